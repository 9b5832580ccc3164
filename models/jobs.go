package models

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Job is one piece of owed work, a screen or a score of one item, until it is done or the item goes.
type Job struct {
	ID         int64      `gorm:"column:id"`
	Task       Task       `gorm:"column:task"`
	Kind       Kind       `gorm:"column:kind"`
	ItemID     int64      `gorm:"column:item_id"`
	UserID     int64      `gorm:"column:user_id"`
	DueAt      time.Time  `gorm:"column:due_at;serializer:unixms"`
	Attempts   int        `gorm:"column:attempts"`
	Why        *Why       `gorm:"column:why"`
	Status     *int       `gorm:"column:status"`
	LeaseUntil *time.Time `gorm:"column:lease_until;serializer:unixms"`
	LeaseOwner *string    `gorm:"column:lease_owner"`
	CreatedAt  time.Time  `gorm:"column:created_at;serializer:unixms"`
	// LastError is the last attempt's error, read by the admin's queries only.
	LastError *string `gorm:"column:last_error"`
}

const jobColumns = `id, task, kind, item_id, user_id, due_at, attempts, why, status, lease_until, lease_owner, created_at`

// Event is one attempt at a job, as kept for the admin and the log (columns: eventFields).
type Event struct {
	ID           int64
	At           time.Time
	Event        Task
	Kind         Kind
	ItemID       int64
	UserID       int64
	Outcome      EventOutcome
	Why          *Why
	Status       *int
	UpstreamMs   *int64
	Attempt      int
	Confidence   *float64
	Art          *float64
	RequestBytes *int64
	Runs         *int
	Error        *string  // what went wrong, in words (at most 500 characters, no secret)
	AdminID      *int64   // a verdict by hand: who decided
	Note         *string  // a verdict by hand: the admin's note (the moderators' alone)
	Verdict      *Verdict // a verdict by hand: what was decided
	// JobID is the job the attempt was at (nil for a verdict by hand on no owed job).
	JobID *int64
	// Reason is a verdict by hand's public reason, which the item's author sees.
	Reason *string
}

// ClaimDue leases up to limit due, free, unheld jobs (one user's when userID is non-zero) to
// owner for lease; two claimers never get the same job while its lease holds.
func (s *Store) ClaimDue(ctx context.Context, limit int, lease time.Duration, owner string, userID int64) ([]Job, error) {
	filter, args := "", []any(nil)
	if userID != 0 {
		filter, args = " AND user_id = ?", []any{userID}
	}
	jobs, err := s.claim(ctx, limit, lease, owner, filter, args...)
	return wrapped(jobs, err, "claim content jobs")
}

// ClaimItem is ClaimDue narrowed to one item's task; ok is false unless it was due, free and unheld.
func (s *Store) ClaimItem(ctx context.Context, task Task, kind Kind, itemID int64, lease time.Duration, owner string) (Job, bool, error) {
	jobs, err := s.claim(ctx, 1, lease, owner, " AND task = ? AND kind = ? AND item_id = ?", task, kind, itemID)
	if err != nil {
		return Job{}, false, fmt.Errorf("claim the %s job of %s %d: %w", task, kind, itemID, err)
	}
	if len(jobs) == 0 {
		return Job{}, false, nil
	}
	return jobs[0], true, nil
}

// claim is both claims' one statement (claimDue), narrowed by filter taking filterArgs.
func (s *Store) claim(ctx context.Context, limit int, lease time.Duration, owner, filter string, filterArgs ...any) ([]Job, error) {
	now := s.nowMs()
	args := make([]any, 0, 5+len(filterArgs))
	args = append(args, now+lease.Milliseconds(), owner, now, now)
	args = append(args, filterArgs...)
	args = append(args, limit)
	rows, err := s.query(ctx, s.db, s.dialect.claimDue(filter, !s.inTx), args...)
	if err != nil {
		return nil, err
	}
	return scanJobs(rows, limit)
}

// Reschedule puts a claimed job off until at with an attempt added, why, status and ev's
// error, frees its lease and keeps ev, in one transaction; ok is false when the claim is gone.
func (s *Store) Reschedule(ctx context.Context, job Job, at time.Time, why Why, status *int, ev Event) (bool, error) {
	var ok bool
	err := s.WithTx(ctx, func(tx *Store) error {
		n, err := tx.exec(ctx, `UPDATE content_jobs SET due_at = ?, attempts = attempts + 1, why = ?, status = ?,
			last_error = ?, lease_until = NULL, lease_owner = NULL WHERE id = ? AND lease_owner = ?`,
			at.UnixMilli(), why, status, ev.Error, job.ID, job.LeaseOwner)
		if err != nil || n == 0 {
			return err
		}
		ok = true
		tx.changed(job.UserID)
		return tx.insertEvent(ctx, &ev)
	})
	return wrapped(ok, err, "reschedule job %d", job.ID)
}

// RecordScreen keeps an item's verdict and its event in one transaction (a trigger settles the
// screen job); recorded is false when the item is gone or already has a verdict. Concurrent
// verdicts share their statements and commit (see batcher).
func (s *Store) RecordScreen(ctx context.Context, kind Kind, itemID int64, verdict Verdict, confidence float64, ev Event) (bool, error) {
	if _, err := itemTable(kind); err != nil {
		return false, fmt.Errorf("record screen: %w", err)
	}
	call := screenCall{kind: kind, itemID: itemID, verdict: verdict, confidence: confidence, ev: ev}
	var recorded bool
	if s.screens != nil {
		var err error
		if recorded, err = s.screens.do(ctx, call); err != nil {
			return false, fmt.Errorf("record the screen of %s %d: %w", kind, itemID, err)
		}
	} else {
		out, err := s.recordScreens(ctx, []screenCall{call})
		if err != nil {
			return false, fmt.Errorf("record the screen of %s %d: %w", kind, itemID, err)
		}
		recorded = out[0]
	}
	if recorded {
		// The verdict settled the item's screen job (the screens_settle trigger).
		s.changed(ev.UserID)
	}
	return recorded, nil
}

type screenCall struct {
	kind       Kind
	itemID     int64
	verdict    Verdict
	confidence float64
	ev         Event
}

type itemKey struct {
	kind Kind
	id   int64
}

func (c screenCall) key() itemKey { return itemKey{c.kind, c.itemID} }

// insertScreensIf inserts v's verdicts whose items exist and have none yet, if cond holds.
func insertScreensIf(cond string) string {
	return `INSERT INTO screens (kind, item_id, verdict, confidence, screened_at, public_reason)
	SELECT v.kind, v.item_id, v.verdict, v.confidence, v.at, v.e_public_reason FROM v
	WHERE (` + cond + `) AND ((v.kind = 'revision' AND EXISTS (SELECT 1 FROM revisions WHERE id = v.item_id))
		OR (v.kind = 'comment' AND EXISTS (SELECT 1 FROM comments WHERE id = v.item_id))
		OR (v.kind = 'pitch' AND EXISTS (SELECT 1 FROM pitches WHERE id = v.item_id)))
	ON CONFLICT (kind, item_id) DO NOTHING`
}

// insertScreens inserts the verdicts of v's rows whose items still exist and have none yet.
var insertScreens = insertScreensIf("1 = 1")

// recordScreensAlone records a batch no webhook wants in one statement (writable CTEs); when a
// webhook wants item.screened it writes nothing and answers one row of empty kind. Arguments:
// the rows (fromJSON), then eventPattern of item.screened and of EventAll.
var recordScreensAlone = `, w AS (SELECT EXISTS (` + subscribersSQL + `) AS subscribed),
	s AS (` + insertScreensIf("NOT (SELECT subscribed FROM w)") + ` RETURNING kind, item_id),
	e AS (` + insertScreenEvents + ` JOIN s ON s.kind = v.kind AND s.item_id = v.item_id)
	SELECT kind, item_id FROM s UNION ALL SELECT '', 0 FROM w WHERE subscribed`

// recordScreens records calls' verdicts (of distinct items) and events and says which were recorded.
func (s *Store) recordScreens(ctx context.Context, calls []screenCall) ([]bool, error) {
	now := s.nowMs()
	rows := make([]screenRow, len(calls))
	for i, c := range calls {
		rows[i] = newScreenRow(c, now)
	}
	// In author order, so batches lock kept versions in one order and never deadlock.
	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, func(a, b screenRow) int { return cmp.Compare(a.ev.UserID, b.ev.UserID) })
	param, err := jsonParam(sorted)
	if err != nil {
		return nil, err
	}
	with := `WITH v AS (SELECT * FROM ` + s.dialect.fromJSON("j", screenColumns...) + `) `
	recorded := make(map[itemKey]bool, len(calls))
	subscribed := false
	scanKeys := func(rows *queryRows) error {
		defer rows.Close()
		for rows.Next() {
			var k itemKey
			if err := rows.Scan(&k.kind, &k.id); err != nil {
				return err
			}
			if k.kind == "" { // recordScreensAlone's answer when a webhook wants the verdicts
				subscribed = true
				continue
			}
			recorded[k] = true
		}
		return rows.Err()
	}
	outcome := func() []bool {
		out := make([]bool, len(calls))
		for i, c := range calls {
			out[i] = recorded[c.key()]
		}
		return out
	}
	if s.dialect.writableCTEs() && !s.inTx {
		// Repeatable: a verdict an earlier try wrote conflicts and is left alone, and a
		// deadlock (40P01) between batches is tried again as the transaction path does.
		err := s.retryRepeatable(ctx, func() error {
			clear(recorded)
			subscribed = false
			res, err := s.query(ctx, s.db, with+recordScreensAlone, param, eventPattern(EventItemScreened), eventPattern(EventAll))
			if err != nil {
				return err
			}
			return scanKeys(res)
		})
		if err != nil {
			return nil, err
		}
		if !subscribed {
			return outcome(), nil
		}
	}
	err = s.WithTx(ctx, func(tx *Store) error {
		clear(recorded)
		res, err := tx.query(ctx, tx.db, with+insertScreens+` RETURNING kind, item_id`, param)
		if err != nil {
			return err
		}
		if err := scanKeys(res); err != nil {
			return err
		}
		return tx.screenedAfter(ctx, with, calls, rows, recorded)
	})
	if err != nil {
		return nil, err
	}
	return outcome(), nil
}

// screenedAfter owes the recorded verdicts' webhooks and inserts their events (in a transaction).
func (tx *Store) screenedAfter(ctx context.Context, with string, calls []screenCall, rows []screenRow, recorded map[itemKey]bool) error {
	subscribed, err := tx.webhookSubscribed(ctx, EventItemScreened)
	if err != nil {
		return err
	}
	var events []screenRow
	for i, c := range calls {
		if !recorded[c.key()] {
			continue
		}
		if subscribed { // checked once for the batch above
			d, err := tx.screenedData(ctx, c.kind, c.itemID, c.verdict, c.confidence)
			if err != nil {
				return err
			}
			d.DecidedBy, d.Note, d.Reason = c.ev.AdminID, c.ev.Note, c.ev.Reason // a verdict by hand names its moderator and why
			if err := tx.insertDeliveries(ctx, EventItemScreened, d); err != nil {
				return err
			}
		}
		events = append(events, rows[i])
	}
	if len(events) == 0 {
		return nil
	}
	param, err := jsonParam(events)
	if err != nil {
		return err
	}
	_, err = tx.exec(ctx, with+insertScreenEvents, param)
	return err
}

// RecordScore keeps a revision's score and event in one transaction; recorded is false if gone or scored.
func (s *Store) RecordScore(ctx context.Context, sc Score, ev Event) (bool, error) {
	return s.recordScore(ctx, sc, ev, false)
}

// ReplaceScore is RecordScore replacing a score under another rubric (one under sc's is kept).
func (s *Store) ReplaceScore(ctx context.Context, sc Score, ev Event) (bool, error) {
	return s.recordScore(ctx, sc, ev, true)
}

func (s *Store) recordScore(ctx context.Context, sc Score, ev Event, replace bool) (bool, error) {
	runs, _ := json.Marshal(sc.ArtRuns)
	criteria, _ := json.Marshal(sc.Criteria)
	var recorded bool
	err := s.WithTx(ctx, func(tx *Store) error {
		if replace {
			if _, err := tx.exec(ctx, `DELETE FROM scores WHERE revision_id = ? AND rubric <> ?`, sc.RevisionID, sc.Rubric); err != nil {
				return err
			}
		}
		n, err := tx.exec(ctx, `INSERT INTO scores (revision_id, song_id, art, art_runs, criteria, model, rubric, scored_at)
			SELECT id, song_id, ?, ?, ?, ?, ?, ? FROM revisions WHERE id = ?
			ON CONFLICT (revision_id) DO NOTHING`,
			sc.Art, string(runs), string(criteria), sc.Model, sc.Rubric, tx.nowMs(), sc.RevisionID)
		if err != nil || n == 0 {
			return err
		}
		recorded = true
		tx.changed(ev.UserID)
		if err := tx.enqueueScored(ctx, sc); err != nil {
			return err
		}
		return tx.insertEvent(ctx, &ev)
	})
	return wrapped(recorded, err, "record the score of revision %d", sc.RevisionID)
}

// NewLeaseOwner names a lease holder by host, process id and a random tag.
func NewLeaseOwner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), NewToken()[5:13])
}

// Leased names a table whose rows are leased to workers.
type Leased string

// The leased tables.
const (
	LeasedJobs       Leased = "content_jobs"
	LeasedShadow     Leased = "shadow_jobs"
	LeasedDeliveries Leased = "webhook_deliveries"
)

// ReleaseLeases frees every lease of t that owner holds, so a stopping process's rows are due at once.
func (s *Store) ReleaseLeases(ctx context.Context, t Leased, owner string) (int64, error) {
	n, err := s.exec(ctx, `UPDATE `+string(t)+` SET lease_until = NULL, lease_owner = NULL WHERE lease_owner = ?`, owner)
	return n, wrap(err, "release the %s leases of %s", t, owner)
}

// ReleaseLease frees the lease of t's row id without an attempt, if the claim (owner, lease end) holds.
func (s *Store) ReleaseLease(ctx context.Context, t Leased, id int64, owner *string, until *time.Time) error {
	_, err := s.exec(ctx, `UPDATE `+string(t)+` SET lease_until = NULL, lease_owner = NULL
		WHERE id = ? AND lease_owner = ? AND lease_until = ?`, id, owner, until)
	return wrap(err, "release the lease of %s %d", t, id)
}

// JobFilter selects owed jobs for the admin.
type JobFilter struct {
	ID     int64 // one job
	Task   Task
	Kind   Kind
	Why    Why // the why shown (ShownWhy); "none" selects jobs shown with no why
	UserID int64
	Author string // part of the author's name, any case
	ItemID int64
	State  JobState
	// Outcome selects settled jobs (State JobDone) by how they settled (DoneOutcomes).
	Outcome EventOutcome

	// Held, when set, is the holds as read just before; the filter then names the held tasks
	// itself, so a filter by why reads only the why index. Nil reads the holds in the statement.
	Held *Holds

	// Deferred, when set, is when the open breaker's jobs are asked again (Breaker.DeferredUntil).
	Deferred *time.Time
}

// whose adds the conditions on the item and its author, named alike by owed jobs and events.
func (f JobFilter) whose(add func(cond string, args ...any)) {
	if f.Kind != "" {
		add("kind = ?", f.Kind)
	}
	if f.UserID != 0 {
		add("user_id = ?", f.UserID)
	}
	if f.Author != "" {
		add(authorCond, f.authorPattern())
	}
	if f.ItemID != 0 {
		add("item_id = ?", f.ItemID)
	}
}

// where is the filter's SQL condition and arguments, by the why a job is shown (shownSQL).
func (f JobFilter) where(now int64) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, a ...any) { conds = append(conds, cond); args = append(args, a...) }
	if f.ID != 0 {
		add("id = ?", f.ID)
	}
	if f.Task != "" {
		add("task = ?", f.Task)
	}
	if f.Why != "" {
		held := heldTask
		if f.Held != nil {
			var tasks []string
			for _, t := range Tasks {
				if f.Held.Task(t) {
					tasks = append(tasks, "'"+string(t)+"'")
				}
			}
			held = "1 = 0"
			if len(tasks) > 0 {
				held = "task IN (" + strings.Join(tasks, ", ") + ")"
			}
		}
		cond, a := shownSQL(f.Why, held, f.Deferred, now)
		add(cond, a...)
	}
	f.whose(add)
	if f.Outcome != "" {
		add("1 = 0") // an outcome is a settled job's: none is owed (ListDoneJobs)
	}
	switch f.State {
	case JobDue:
		add("due_at <= ? AND (lease_until IS NULL OR lease_until <= ?)", now, now)
	case JobWaiting:
		add("due_at > ? AND (lease_until IS NULL OR lease_until <= ?)", now, now)
	case JobLeased:
		add("lease_until > ?", now)
	case JobDone:
		add("1 = 0") // settled jobs are no content_jobs row (ListDoneJobs)
	}
	if len(conds) == 0 {
		return "1 = 1", nil
	}
	return strings.Join(conds, " AND "), args
}

// authorCond selects rows whose user_id is an author whose name has authorPattern in it.
const authorCond = `user_id IN (SELECT id FROM users WHERE LOWER(name) LIKE ? ESCAPE '\')`

func (f JobFilter) authorPattern() string {
	return "%" + likeEscaper.Replace(strings.ToLower(f.Author)) + "%"
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// Orders of the admin's job list.
const (
	JobsByID       = "id"       // oldest job first
	JobsByDue      = "due"      // soonest due first
	JobsByAttempts = "attempts" // most attempts first
)

// JobCursor is where a page of the job list starts: after job ID, whose sort key was Key.
type JobCursor struct {
	ID  int64
	Key int64
}

// JobRow is a job as the admin's list shows it, with its author's name, item title and song.
type JobRow struct {
	Job
	UserName  string
	ItemTitle *string // nil when the item is gone
	SongID    *int64
	// Final is a settled job's settling attempt (ListDoneJobs); nil for an owed job.
	Final *Event
}

// Cursor is the cursor of the page that starts after r, in order.
func (r JobRow) Cursor(order string) JobCursor {
	switch order {
	case JobsByDue:
		return JobCursor{ID: r.ID, Key: r.DueAt.UnixMilli()}
	case JobsByAttempts:
		return JobCursor{ID: r.ID, Key: int64(r.Attempts)}
	}
	return JobCursor{ID: r.ID}
}

// jobRowColumns are jobColumns and what JobRow adds, read from content_jobs.
var jobRowColumns = jobColumns + `, last_error, ` + namesOf("content_jobs")

// namesOf is what a row of table shows of its author and item: name, title (or 80 characters), song.
func namesOf(table string) string {
	return `(SELECT name FROM users WHERE id = ` + table + `.user_id),
	CASE kind WHEN 'revision' THEN (SELECT title FROM revisions WHERE id = ` + table + `.item_id)
		WHEN 'comment' THEN (SELECT SUBSTR(body, 1, 80) FROM comments WHERE id = ` + table + `.item_id)
		ELSE (SELECT SUBSTR(body, 1, 80) FROM pitches WHERE id = ` + table + `.item_id) END,
	CASE kind WHEN 'revision' THEN (SELECT song_id FROM revisions WHERE id = ` + table + `.item_id)
		WHEN 'comment' THEN (SELECT song_id FROM comments WHERE id = ` + table + `.item_id) END`
}

// scanRows reads rows of columns columns, a T each as read makes it, and closes rows (an empty
// page is not nil).
func scanRows[T any](rows *queryRows, columns, sizeHint int, read func(r *row) T) ([]T, error) {
	defer rows.Close()
	r := newRow(columns)
	out := make([]T, 0, sizeHint)
	for rows.Next() {
		if err := r.scan(rows); err != nil {
			return nil, err
		}
		v := read(r)
		if r.err != nil { // a column that did not convert: the row's value would be wrong
			return nil, r.err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// scanJobRows reads rows of jobRowColumns and closes rows.
func scanJobRows(rows *queryRows, sizeHint int) ([]JobRow, error) {
	return scanRows(rows, jobColumnCount+4, sizeHint, func(r *row) JobRow {
		j := JobRow{Job: r.job(0), ItemTitle: r.strp(jobColumnCount + 2), SongID: r.int64p(jobColumnCount + 3)}
		j.LastError = r.strp(jobColumnCount)
		if name := r.strp(jobColumnCount + 1); name != nil {
			j.UserName = *name
		}
		return j
	})
}

// pageOf adds the page's start after the cursor to where and args, and answers the ORDER BY.
func pageOf(order string, after *JobCursor, cols [3]string, where string, args []any) (string, []any, string) {
	id, due, attempts := cols[0], cols[1], cols[2]
	switch order {
	case JobsByDue:
		if after != nil {
			where += " AND (" + due + " > ? OR (" + due + " = ? AND " + id + " > ?))"
			args = append(args, after.Key, after.Key, after.ID)
		}
		return where, args, due + ", " + id
	case JobsByAttempts:
		if after != nil {
			where += " AND (" + attempts + " < ? OR (" + attempts + " = ? AND " + id + " > ?))"
			args = append(args, after.Key, after.Key, after.ID)
		}
		return where, args, attempts + " DESC, " + id
	}
	if after != nil {
		where += " AND " + id + " > ?"
		args = append(args, after.ID)
	}
	return where, args, id
}

// ListJobRows pages through owed jobs in order, after the cursor (nil: from the start).
func (s *Store) ListJobRows(ctx context.Context, f JobFilter, order string, after *JobCursor, limit int) ([]JobRow, error) {
	where, args := f.where(s.nowMs())
	jobs, err := s.jobPage(ctx, jobRowColumns+` FROM content_jobs`, where, args, pageOrder{order, after, [3]string{"id", "due_at", "attempts"}}, limit, scanJobRows)
	return wrapped(jobs, err, "list jobs")
}

// pageOrder is a job list's order (see pageOf): its name, the cursor and the columns.
type pageOrder struct {
	order string
	after *JobCursor
	cols  [3]string
}

// jobPage reads a page of a job list: SELECT from WHERE where, in o's order, read by scan.
func (s *Store) jobPage(ctx context.Context, from, where string, args []any, o pageOrder, limit int,
	scan func(rows *queryRows, sizeHint int) ([]JobRow, error)) ([]JobRow, error) {
	where, args, orderBy := pageOf(o.order, o.after, o.cols, where, args)
	args = append(args, limit)
	rows, err := s.query(ctx, s.read, `SELECT `+from+` WHERE `+where+` ORDER BY `+orderBy+` LIMIT ?`, args...)
	if err != nil {
		return nil, err
	}
	return scan(rows, min(limit, 512))
}

// CountJobs counts the jobs the filter selects, from the kept counts when it can (keptCount).
func (s *Store) CountJobs(ctx context.Context, f JobFilter) (int64, error) {
	if n, ok, err := s.keptCount(ctx, f); err != nil {
		return 0, fmt.Errorf("count jobs: %w", err)
	} else if ok {
		return n, nil
	}
	where, args := f.where(s.nowMs())
	n, err := fetch[int64](ctx, s, s.read, `SELECT COUNT(*) FROM content_jobs WHERE `+where, args...)
	return n, wrap(err, "count jobs")
}

// JobByID finds one owed job as the admin's list shows it, from the writer.
func (s *Store) JobByID(ctx context.Context, id int64) (JobRow, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+jobRowColumns+` FROM content_jobs WHERE id = ?`, id)
	if err != nil {
		return JobRow{}, fmt.Errorf("job %d: %w", id, err)
	}
	jobs, err := scanJobRows(rows, 1)
	if err != nil {
		return JobRow{}, fmt.Errorf("job %d: %w", id, err)
	}
	if len(jobs) == 0 {
		return JobRow{}, missing("job", id)
	}
	return jobs[0], nil
}

// ErrBudgetSpent refuses a retry of a job waiting for a budget that cannot cover it today.
var ErrBudgetSpent = errors.New("the author's budget for today cannot cover the job")

// budgetRoom is true in SQL when a job's author can be charged its task today (day, default limit).
var budgetRoom = `COALESCE((SELECT spent FROM budgets WHERE user_id = content_jobs.user_id AND day = ?), 0)
	+ ` + taskCallsSQL + `
	<= COALESCE((SELECT daily_limit FROM users WHERE id = content_jobs.user_id), ?)`

// RetryJobs makes the filtered jobs due now and counts them (RetryJobsReport).
func (s *Store) RetryJobs(ctx context.Context, f JobFilter) (int64, error) {
	r, err := s.RetryJobsReport(ctx, f)
	return r.Retried, err
}

// EventFilter selects attempt events.
type EventFilter struct {
	Event   Task
	Why     Why // "none" selects events with no why
	Outcome EventOutcome
	Kind    Kind
	UserID  int64
	ItemID  int64
}

// ListEvents pages through events newest first, before the id beforeID (0: from the newest).
func (s *Store) ListEvents(ctx context.Context, f EventFilter, beforeID int64, limit int) ([]Event, error) {
	q := `SELECT id, ` + eventColumns + ` FROM events WHERE 1 = 1`
	var args []any
	add := func(cond string, a ...any) { q += ` AND ` + cond; args = append(args, a...) }
	JobFilter{Task: f.Event, Why: f.Why, Outcome: f.Outcome, Kind: f.Kind, UserID: f.UserID, ItemID: f.ItemID}.eventWhere(add)
	if beforeID > 0 {
		add("id < ?", beforeID)
	}
	q += ` ORDER BY id DESC`
	if limit >= 0 {
		q += ` LIMIT ` + strconv.Itoa(limit) // a literal, as GORM's Limit wrote it: PostgreSQL plans for it
	}
	rows, err := s.query(ctx, s.read, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	evs, err := scanEvents(rows, max(limit, 0))
	return wrapped(evs, err, "list events")
}
