package models

import (
	"context"
	"fmt"
	"time"
)

// Backfill job states as stored; no row is idle, and "queued" is a running job behind another.
const (
	BackfillRunning = "running"
	BackfillPaused  = "paused"
	BackfillDone    = "done"
)

// BackfillSettings tune the backfill queue.
type BackfillSettings struct {
	// BatchSize is how many rows one batch previews (1..500).
	BatchSize int `gorm:"column:batch_size"`
	// BatchPauseMs is the cooldown between batches.
	BatchPauseMs int64 `gorm:"column:batch_pause_ms"`
	// Auto starts every job with pending rows when owed starts.
	Auto bool `gorm:"column:auto"`
}

// BackfillSettings reads the queue's settings.
func (s *Store) BackfillSettings(ctx context.Context) (BackfillSettings, error) {
	set, err := fetch[BackfillSettings](ctx, s, s.read, `SELECT batch_size, batch_pause_ms, auto FROM backfill_settings WHERE id = 1`)
	return set, wrap(err, "backfill settings")
}

// SetBackfillSettings replaces the queue's settings; the caller has validated them.
func (s *Store) SetBackfillSettings(ctx context.Context, set BackfillSettings) error {
	_, err := s.exec(ctx, `UPDATE backfill_settings SET batch_size = ?, batch_pause_ms = ?, auto = ?, updated_at = ? WHERE id = 1`,
		set.BatchSize, set.BatchPauseMs, boolInt(set.Auto), s.nowMs())
	return wrap(err, "set backfill settings")
}

// BackfillMember is a paused, done or failed scrape of its chat's backfill job, with its counts.
type BackfillMember struct {
	ID         int64
	ChatID     string
	GuildID    *string
	Backend    string
	Mode       string
	State      string
	Downloaded int64
	Counts     ScrapeCounts
}

// BackfillMembers lists chatID's backfill members (every chat's when "") with their counts.
func (s *Store) BackfillMembers(ctx context.Context, chatID string) ([]BackfillMember, error) {
	q := `SELECT s.id, s.chat_id, s.guild_id, s.backend, s.mode, s.state, s.downloaded, ` + totalsColumns + `
		FROM scrapes s JOIN scrape_totals t ON t.scrape_id = s.id
		WHERE s.state IN ('paused', 'done', 'failed') AND (? = '' OR s.chat_id = ?) ORDER BY s.id`
	rows, err := s.query(ctx, s.read, q, chatID, chatID)
	if err != nil {
		return nil, fmt.Errorf("backfill members: %w", err)
	}
	defer rows.Close()
	var out []BackfillMember
	for rows.Next() {
		var m BackfillMember
		dest := append([]any{&m.ID, &m.ChatID, &m.GuildID, &m.Backend, &m.Mode, &m.State, &m.Downloaded}, m.Counts.totalsDest()...)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("backfill members: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("backfill members: %w", err)
	}
	return out, nil
}

// BackfillJob is the stored state of one chat's backfill job.
type BackfillJob struct {
	ChatID    string  `gorm:"column:chat_id"`
	GuildID   *string `gorm:"column:guild_id"`
	State     string  `gorm:"column:state"`
	Position  int64   `gorm:"column:position"`
	Processed int64   `gorm:"column:processed"`
	// PerMinute is the measured rate, null until the run has lasted 30 s.
	PerMinute  *float64   `gorm:"column:per_minute"`
	StartedAt  *time.Time `gorm:"column:started_at;serializer:unixms"`
	FinishedAt *time.Time `gorm:"column:finished_at;serializer:unixms"`
	// CooldownMs is the pause between batches once suspect failures raised it (nil: the settings').
	CooldownMs *int64    `gorm:"column:cooldown_ms"`
	Stalled    int       `gorm:"column:stalled"`
	ActiveAt   time.Time `gorm:"column:active_at;serializer:unixms"`
	// RunMs is this run's time running batches, across restarts; waits and pauses left out.
	RunMs int64 `gorm:"column:run_ms"`
	// RunRows is the rows this run took off pending (cached, skipped, failed or suspect).
	RunRows int64 `gorm:"column:run_rows"`
	// RecentPerMinute is the smoothed recent rate over running time, kept from the first batch.
	RecentPerMinute *float64 `gorm:"column:recent_per_minute"`
	// RunWaitMs and RunWaits are this run's rate-limit waits, in all and how many.
	RunWaitMs int64 `gorm:"column:run_wait_ms"`
	RunWaits  int64 `gorm:"column:run_waits"`
}

// WaitsCountFrom is how many rate-limit waits a run must have sat out before its measured rate
// counts them: one 429 is an incident, two or more are a pace.
const WaitsCountFrom = 2

// CountedWaitMs is the run's waits once there were WaitsCountFrom of them, else none.
func (j BackfillJob) CountedWaitMs() int64 {
	if j.RunWaits >= WaitsCountFrom {
		return j.RunWaitMs
	}
	return 0
}

const backfillJobColumns = `chat_id, guild_id, state, position, processed, per_minute, started_at, finished_at, cooldown_ms, stalled, active_at,
	run_ms, run_rows, recent_per_minute, run_wait_ms, run_waits`

// BackfillJobs lists every job row in execution order.
func (s *Store) BackfillJobs(ctx context.Context) ([]BackfillJob, error) {
	jobs, err := fetch[[]BackfillJob](ctx, s, s.read, `SELECT `+backfillJobColumns+` FROM backfill_jobs ORDER BY position, chat_id`)
	return jobs, wrap(err, "backfill jobs")
}

// BackfillJobOf reads one chat's job row; ErrNotFound when the chat was never started.
func (s *Store) BackfillJobOf(ctx context.Context, chatID string) (BackfillJob, error) {
	return first[BackfillJob](ctx, s, s.db, "backfill job of chat", chatID, `SELECT `+backfillJobColumns+` FROM backfill_jobs WHERE chat_id = ?`, chatID)
}

// JobStart names a chat to start.
type JobStart struct {
	ChatID  string
	GuildID *string
}

// StartBackfillJobs starts the chats' jobs in order and returns the chats it started. A
// running job is left as it is; any other is reset for a new run and keeps its place in the
// execution order; a chat never started joins its end.
func (s *Store) StartBackfillJobs(ctx context.Context, starts []JobStart) ([]string, error) {
	var started []string
	err := s.WithTx(ctx, func(tx *Store) error {
		started = started[:0] // a transaction tried again starts over
		now := tx.nowMs()
		last, err := fetch[*int64](ctx, tx, tx.db, `SELECT MAX(position) FROM backfill_jobs`)
		if err != nil {
			return err
		}
		next := int64(1)
		if last != nil {
			next = *last + 1
		}
		for _, st := range starts {
			states, err := fetch[[]string](ctx, tx, tx.db, `SELECT state FROM backfill_jobs WHERE chat_id = ?`+tx.dialect.forUpdate(), st.ChatID)
			if err != nil {
				return err
			}
			switch {
			case len(states) == 0:
				if _, err := tx.exec(ctx, `INSERT INTO backfill_jobs (chat_id, guild_id, state, position, processed, per_minute,
					started_at, finished_at, cooldown_ms, stalled, active_at, run_ms, run_rows, recent_per_minute, run_wait_ms, run_waits)
					VALUES (?, ?, 'running', ?, 0, NULL, NULL, NULL, NULL, 0, ?, 0, 0, NULL, 0, 0)`,
					st.ChatID, st.GuildID, next, now); err != nil {
					return err
				}
				next++
			case states[0] == BackfillRunning:
				continue
			default:
				if _, err := tx.exec(ctx, `UPDATE backfill_jobs SET state = 'running', guild_id = COALESCE(guild_id, ?), processed = 0,
					per_minute = NULL, started_at = NULL, finished_at = NULL, cooldown_ms = NULL, stalled = 0, active_at = ?,
					run_ms = 0, run_rows = 0, recent_per_minute = NULL, run_wait_ms = 0, run_waits = 0
					WHERE chat_id = ?`, st.GuildID, now, st.ChatID); err != nil {
					return err
				}
			}
			started = append(started, st.ChatID)
		}
		return nil
	})
	return wrapped(started, err, "start backfill jobs")
}

// PauseBackfillJobs pauses every running job, or chatID's, and returns the chats it paused.
func (s *Store) PauseBackfillJobs(ctx context.Context, chatID string) ([]string, error) {
	chats, err := fetch[[]string](ctx, s, s.db, `UPDATE backfill_jobs SET state = 'paused'
		WHERE state = 'running' AND (? = '' OR chat_id = ?) RETURNING chat_id`, chatID, chatID)
	return chats, wrap(err, "pause backfill jobs")
}

// NextBackfillJob is the first running job in execution order; ok is false when none runs.
func (s *Store) NextBackfillJob(ctx context.Context) (BackfillJob, bool, error) {
	j, ok, err := maybe[BackfillJob](ctx, s, s.db, `SELECT `+backfillJobColumns+` FROM backfill_jobs WHERE state = 'running'
		ORDER BY position, chat_id LIMIT 1`)
	return j, ok, wrap(err, "next backfill job")
}

// MarkBackfillJobStarted records that chatID's run began its first batch now, once.
func (s *Store) MarkBackfillJobStarted(ctx context.Context, chatID string) error {
	_, err := s.exec(ctx, `UPDATE backfill_jobs SET started_at = ? WHERE chat_id = ? AND started_at IS NULL`, s.nowMs(), chatID)
	return wrap(err, "mark the backfill job of %s started", chatID)
}

// measuredAfter is the running time before a run's measured rate is more than noise.
const measuredAfter = 30 * time.Second

// BatchRecord is what one batch adds to its job's run (rows add to processed themselves).
type BatchRecord struct {
	// Settled is the rows the batch took off pending: the rate's numerator.
	Settled int64
	// RunMs is the running time since the previous record, rate-limit and walk waits left out.
	RunMs int64
	// WaitMs is the rate-limit wait sat out before this batch (0: none).
	WaitMs int64
	// Stalled and CooldownMs are the stall count and raised cooldown the runner carries on.
	Stalled    int
	CooldownMs *int64
	// RecentWeight is how far this batch moves the smoothed rate, 1 - exp(-RunMs/window).
	RecentWeight float64
	// Smoothed reports the smoothed rate as the measured one, rather than the plain one.
	Smoothed bool
}

// RecordBackfillBatch adds a batch to the job's run (settled rows, running time, the
// rate-limit wait before it), moves the smoothed recent rate, and reports the measured rate
// once the run has measuredAfter of running time. It changes a job of any state: a job paused
// during its batch still did that work.
func (s *Store) RecordBackfillBatch(ctx context.Context, chatID string, rec BatchRecord) (BackfillJob, error) {
	var out BackfillJob
	err := s.WithTx(ctx, func(tx *Store) error {
		j, err := first[BackfillJob](ctx, tx, tx.db, "backfill job of chat", chatID,
			`SELECT `+backfillJobColumns+` FROM backfill_jobs WHERE chat_id = ?`+tx.dialect.forUpdate(), chatID)
		if err != nil {
			return err
		}
		j.RunMs += max(0, rec.RunMs)
		j.RunRows += rec.Settled
		if rec.WaitMs > 0 {
			j.RunWaitMs += rec.WaitMs
			j.RunWaits++
		}
		j.Stalled, j.CooldownMs, j.ActiveAt = rec.Stalled, rec.CooldownMs, fromMillis(tx.nowMs())
		// An exponentially weighted mean over running time, from the first batch's rate.
		batchMs := rec.RunMs
		if j.RunWaits >= WaitsCountFrom {
			batchMs += max(0, rec.WaitMs)
		}
		if batchMs > 0 && rec.RecentWeight > 0 {
			own := float64(rec.Settled) * 60000 / float64(batchMs)
			if j.RecentPerMinute == nil {
				j.RecentPerMinute = &own
			} else {
				v := *j.RecentPerMinute + rec.RecentWeight*(own-*j.RecentPerMinute)
				j.RecentPerMinute = &v
			}
		}
		j.PerMinute = nil
		switch {
		case j.RunMs < measuredAfter.Milliseconds():
		case rec.Smoothed && j.RecentPerMinute != nil:
			j.PerMinute = ptrTo(*j.RecentPerMinute)
		default:
			j.PerMinute = ptrTo(float64(j.RunRows) * 60000 / float64(j.RunMs+j.CountedWaitMs()))
		}
		out = j
		_, err = tx.exec(ctx, `UPDATE backfill_jobs SET run_ms = ?, run_rows = ?, recent_per_minute = ?, per_minute = ?,
			stalled = ?, cooldown_ms = ?, active_at = ?, run_wait_ms = ?, run_waits = ? WHERE chat_id = ?`,
			j.RunMs, j.RunRows, j.RecentPerMinute, j.PerMinute, j.Stalled, j.CooldownMs, j.ActiveAt.UnixMilli(), j.RunWaitMs, j.RunWaits, chatID)
		return err
	})
	return wrapped(out, err, "record a backfill batch of %s", chatID)
}

func ptrTo[T any](v T) *T { return &v }

// EndBackfillJob moves a running job to paused or done; done records when it finished and
// owes the backfill.finished webhook in the same transaction. ended reports whether it changed.
func (s *Store) EndBackfillJob(ctx context.Context, chatID, state string) (bool, error) {
	var ended bool
	err := s.WithTx(ctx, func(tx *Store) error {
		now := tx.nowMs()
		if state == BackfillDone {
			var err error
			ended, err = tx.finishBackfillJob(ctx, chatID, BackfillRunning, now)
			return err
		}
		n, err := tx.exec(ctx, `UPDATE backfill_jobs SET state = ?, finished_at = NULL, active_at = ? WHERE chat_id = ? AND state = 'running'`, state, now, chatID)
		ended = n > 0
		return err
	})
	return wrapped(ended, err, "end the backfill job of %s", chatID)
}

// SettleBackfillJobs moves every paused job (or chatID's) whose member scrapes have no pending
// or suspect rows left to done, each with its backfill.finished webhook, and returns the chats
// it settled: a job paused during its last batch is not left "paused, 100 %".
func (s *Store) SettleBackfillJobs(ctx context.Context, chatID string) ([]string, error) {
	var settled []string
	err := s.WithTx(ctx, func(tx *Store) error {
		settled = settled[:0] // a transaction tried again starts over
		q := `SELECT j.chat_id FROM backfill_jobs j WHERE j.state = 'paused'
			AND EXISTS (SELECT 1 FROM scrapes s WHERE s.chat_id = j.chat_id AND s.state IN ('paused', 'done', 'failed'))
			AND NOT EXISTS (SELECT 1 FROM scrapes s JOIN scrape_totals t ON t.scrape_id = s.id
				WHERE s.chat_id = j.chat_id AND s.state IN ('paused', 'done', 'failed') AND (t.pending > 0 OR t.suspect > 0))
			AND (? = '' OR j.chat_id = ?) ORDER BY j.position, j.chat_id`
		chats, err := fetch[[]string](ctx, tx, tx.db, q, chatID, chatID)
		if err != nil {
			return err
		}
		now := tx.nowMs()
		for _, c := range chats {
			ok, err := tx.finishBackfillJob(ctx, c, BackfillPaused, now)
			if err != nil {
				return err
			}
			if ok {
				settled = append(settled, c)
			}
		}
		return nil
	})
	return wrapped(settled, err, "settle backfill jobs")
}

// finishBackfillJob moves chatID's job from from to done at now, owing backfill.finished.
func (tx *Store) finishBackfillJob(ctx context.Context, chatID, from string, now int64) (bool, error) {
	n, err := tx.exec(ctx, `UPDATE backfill_jobs SET state = 'done', finished_at = ?, active_at = ?
		WHERE chat_id = ? AND state = ?`, now, now, chatID, from)
	if err != nil || n == 0 {
		return false, err
	}
	job, err := tx.BackfillJobOf(ctx, chatID)
	if err != nil {
		return false, err
	}
	var sums struct {
		Cached int64 `gorm:"column:cached"`
		Failed int64 `gorm:"column:failed"`
		Total  int64 `gorm:"column:total"`
	}
	if err := tx.scan(ctx, tx.db, &sums, `SELECT COALESCE(SUM(t.cached), 0) AS cached,
		COALESCE(SUM(t.failed), 0) AS failed, COALESCE(SUM(t.total), 0) AS total
		FROM scrape_totals t JOIN scrapes s ON s.id = t.scrape_id
		WHERE s.chat_id = ? AND s.state IN ('paused', 'done', 'failed')`, chatID); err != nil {
		return false, err
	}
	data := BackfillFinishedData{ChatID: chatID, GuildID: job.GuildID, Processed: job.Processed, Cached: sums.Cached,
		Failed: sums.Failed, Total: sums.Total, FinishedAt: fromMillis(now), StartedAt: job.StartedAt}
	return true, tx.EnqueueWebhook(ctx, EventBackfillFinished, data)
}

// BackfillRunner is the queue runner's row: the lease's holder, its job and rate limit.
type BackfillRunner struct {
	Owner        *string    `gorm:"column:owner"`
	LeaseUntil   *time.Time `gorm:"column:lease_until;serializer:unixms"`
	ChatID       *string    `gorm:"column:chat_id"`
	LimitedUntil *time.Time `gorm:"column:limited_until;serializer:unixms"`
}

// Live reports whether the lease holds at now.
func (r BackfillRunner) Live(now time.Time) bool {
	return r.Owner != nil && r.LeaseUntil != nil && r.LeaseUntil.After(now)
}

// BackfillRunnerState reads the runner row.
func (s *Store) BackfillRunnerState(ctx context.Context) (BackfillRunner, error) {
	r, err := fetch[BackfillRunner](ctx, s, s.read, `SELECT owner, lease_until, chat_id, limited_until FROM backfill_runner WHERE id = 1`)
	return r, wrap(err, "backfill runner")
}

// AcquireBackfillLease takes or renews the queue lease for owner unless another owner's holds.
func (s *Store) AcquireBackfillLease(ctx context.Context, owner string, lease time.Duration) (bool, error) {
	now := s.nowMs()
	n, err := s.exec(ctx, `UPDATE backfill_runner SET
		chat_id = CASE WHEN owner = ? THEN chat_id ELSE NULL END,
		limited_until = CASE WHEN owner = ? THEN limited_until ELSE NULL END,
		owner = ?, lease_until = ?
		WHERE id = 1 AND (owner IS NULL OR owner = ? OR lease_until IS NULL OR lease_until <= ?)`,
		owner, owner, owner, now+lease.Milliseconds(), owner, now)
	return wrapped(n > 0, err, "acquire the backfill lease")
}

// ReleaseBackfillLease gives the queue lease up if owner holds it.
func (s *Store) ReleaseBackfillLease(ctx context.Context, owner string) error {
	_, err := s.exec(ctx, `UPDATE backfill_runner SET owner = NULL, lease_until = NULL, chat_id = NULL, limited_until = NULL
		WHERE id = 1 AND owner = ?`, owner)
	return wrap(err, "release the backfill lease")
}

// SetBackfillRunnerJob records owner's job and rate limit (nil: none) if owner holds the lease.
func (s *Store) SetBackfillRunnerJob(ctx context.Context, owner string, chatID *string, limitedUntil *time.Time) error {
	_, err := s.exec(ctx, `UPDATE backfill_runner SET chat_id = ?, limited_until = ? WHERE id = 1 AND owner = ?`,
		chatID, limitedUntil, owner)
	return wrap(err, "set the backfill runner job")
}
