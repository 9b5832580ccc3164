package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/owed/owed/clock"
	"github.com/owed/owed/media"
	"github.com/owed/owed/metrics"
	"github.com/owed/owed/models"
)

// Backfill limits and constants of the queue's behaviour.
const (
	MaxBatchSize = 500 // the largest batch the settings accept
	stallLimit   = 3   // batches in a row without progress pause a job
	// Suspect failures reaching two thirds of a batch double the cooldown, within these bounds.
	minRaisedCooldown = 60 * time.Second
	maxRaisedCooldown = 300 * time.Second
	idleRowsPerMinute = 6000 // the estimate when the settings and gaps imply no delay at all
	deleteChunk       = 500  // media rows a delete removes per step
)

// errLeaseLost means another process took the queue lease: this one stops running the queue.
var errLeaseLost = errors.New("backfill: the queue lease was lost")

// BackfillConfig tunes the backfill queue. Zero fields take the defaults.
type BackfillConfig struct {
	WalkIdle time.Duration // how long an active scrape that pushes nothing holds the walk lock (DefaultWalkIdle)
	Lease    time.Duration // the queue lease, renewed every third of it (DefaultLease)
	Poll     time.Duration // the longest single wait between re-reading the job and renewing (5s)
	Owner    string        // this process's lease owner, shared by its runners (default: a new one)
	Every    time.Duration // the loops' period on the schedule when not kicked (DefaultBackfillEvery)
	// RateWindow is the time constant of the smoothed recent rate (an exponentially weighted
	// mean over running time); zero takes DefaultRateWindow; negative reports the plain rate.
	RateWindow time.Duration
}

// BackfillConfig's defaults (OWED_WALK_IDLE, …). DefaultRateWindow is negative: owed reports
// the plain rate, whose ETAs erred least in the accuracy benchmark (docs/benchmarks.md).
const (
	DefaultWalkIdle      = 10 * time.Minute
	DefaultBackfillEvery = 30 * time.Second
	DefaultRateWindow    = -1
)

// smoothed reports whether the measured rate is the smoothed recent one.
func (c BackfillConfig) smoothed() bool { return c.RateWindow > 0 }

// recentWeight is how far a batch of d running time moves the smoothed rate.
func (c BackfillConfig) recentWeight(d time.Duration) float64 {
	window := c.RateWindow
	if window <= 0 {
		window = defaultSmoothingWindow
	}
	if d <= 0 {
		return 0
	}
	return 1 - math.Exp(-float64(d)/float64(window))
}

// defaultSmoothingWindow keeps the smoothed rate while the plain one is reported.
const defaultSmoothingWindow = time.Minute

func (c *BackfillConfig) applyDefaults() {
	c.WalkIdle = positive(c.WalkIdle, DefaultWalkIdle)
	c.Lease = positive(c.Lease, DefaultLease)
	c.Every = positive(c.Every, DefaultBackfillEvery)
	c.Poll = positive(c.Poll, 5*time.Second)
	c.Owner = ownerOr(c.Owner)
	c.RateWindow = cmp.Or(c.RateWindow, DefaultRateWindow)
}

// runClock measures a job's running time in one runJob, stopped while it waits.
type runClock struct {
	clk     clock.Clock
	since   time.Time
	acc     time.Duration
	stopped bool
}

func newRunClock(clk clock.Clock) *runClock { return &runClock{clk: clk, since: clk.Now()} }

func (r *runClock) stop() {
	if !r.stopped {
		r.acc += r.clk.Now().Sub(r.since)
		r.stopped = true
	}
}

func (r *runClock) start() {
	if r.stopped {
		r.since, r.stopped = r.clk.Now(), false
	}
}

// take returns the running time since the previous take and goes on running.
func (r *runClock) take() time.Duration {
	r.stop()
	d := r.acc
	r.acc = 0
	r.start()
	return max(0, d)
}

// Backfill is the backfill queue: one job per chat (its paused, done and failed scrapes), run
// one at a time, batch by batch, through the media engine, by the process holding the queue
// lease; its state is rows, so a restart resumes it. It also carries out scrape deletes.
type Backfill struct {
	store   *models.Store
	engine  *media.Engine
	clock   clock.Clock
	log     *slog.Logger
	metrics *metrics.Metrics
	cfg     BackfillConfig
	bootMs  int64 // process start: fully backfilled chats are listed only if their job worked since

	runner  *runner
	queue   *loop // runs the queue (RunQueue)
	deletes *loop // carries out scrape deletes (RunDeletes)

	runMu     sync.Mutex // one RunQueue at a time in this process
	deleteMu  sync.Mutex // one RunDeletes at a time in this process
	renewedAt time.Time  // guarded by runMu

	mu    sync.Mutex
	wakeC chan struct{} // closed (and replaced) to cut the runner's current wait short
}

// NewBackfill makes the backfill queue. Nothing runs until Start (or a RunQueue call).
func NewBackfill(store *models.Store, engine *media.Engine, clk clock.Clock, log *slog.Logger, m *metrics.Metrics, cfg BackfillConfig) *Backfill {
	cfg.applyDefaults()
	clk, log = orDefaults(clk, log)
	b := &Backfill{store: store, engine: engine, clock: clk, log: log, metrics: m, cfg: cfg,
		bootMs: clk.Now().UnixMilli(), wakeC: make(chan struct{})}
	b.runner = newRunner("backfill", log, nil)
	b.queue = newLoop("backfill queue", b.RunQueue)
	b.deletes = newLoop("backfill deletes", b.RunDeletes)
	return b
}

// Config is the queue's configuration with defaults applied.
func (b *Backfill) Config() BackfillConfig { return b.cfg }

// Engine is the media engine the queue previews with.
func (b *Backfill) Engine() *media.Engine { return b.engine }

// Start starts the queue and delete loops, until ctx is done or Stop, and AutoStart.
func (b *Backfill) Start(ctx context.Context) error {
	if err := b.runner.start(ctx, b.queue, b.deletes); err != nil {
		return err
	}
	if err := b.AutoStart(ctx); err != nil {
		b.log.Error("backfill auto-start", "err", err)
	}
	return nil
}

// ScheduleOn adds "backfill queue" and "backfill deletes" to s, every BackfillConfig.Every.
func (b *Backfill) ScheduleOn(s *Schedule) error {
	if err := s.Every("backfill queue", b.cfg.Every, b.queue.tick); err != nil {
		return err
	}
	return s.Every("backfill deletes", b.cfg.Every, b.deletes.tick)
}

// Stop cuts the batch under way short (its unfinished rows stay pending), releases the lease
// and waits for the loops; job states are kept for a restart.
func (b *Backfill) Stop(ctx context.Context) error {
	b.runner.cutShort()
	return b.runner.Stop(ctx)
}

// Wake asks both loops to run now: the queue, and pending deletes.
func (b *Backfill) Wake() {
	b.Kick()
	b.KickDeletes()
}

// Kick asks the queue loop to run the queue now. It never blocks.
func (b *Backfill) Kick() { b.queue.Wake() }

// KickDeletes asks the delete loop to carry out pending deletes now. It never blocks.
func (b *Backfill) KickDeletes() { b.deletes.Wake() }

// wake cuts the runner's current wait short so it re-reads its job (after a pause).
func (b *Backfill) wake() {
	b.mu.Lock()
	close(b.wakeC)
	b.wakeC = make(chan struct{})
	b.mu.Unlock()
}

func (b *Backfill) wakeChan() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.wakeC
}

// Settings reads the queue's settings.
func (b *Backfill) Settings(ctx context.Context) (BackfillSettings, error) {
	return b.store.BackfillSettings(ctx)
}

// SetSettings validates and stores the queue's settings; they apply from the next batch.
func (b *Backfill) SetSettings(ctx context.Context, s BackfillSettings) error {
	if s.BatchSize < 1 || s.BatchSize > MaxBatchSize {
		return fmt.Errorf("backfill: batch size %d is not within 1..%d", s.BatchSize, MaxBatchSize)
	}
	if s.BatchPauseMs < 0 {
		return fmt.Errorf("backfill: batch pause %d ms is negative", s.BatchPauseMs)
	}
	return b.store.SetBackfillSettings(ctx, s)
}

// StartJobs starts every job with pending rows, smallest first, or only chatID's; a paused or
// done one starts a new run. Jobs run in the order they were first started.
func (b *Backfill) StartJobs(ctx context.Context, chatID string) error {
	return b.start(ctx, chatID, false)
}

// AutoStart starts every job with pending rows when the settings say auto, except paused ones.
func (b *Backfill) AutoStart(ctx context.Context) error {
	s, err := b.store.BackfillSettings(ctx)
	if err != nil || !s.Auto {
		return err
	}
	return b.start(ctx, "", true)
}

func (b *Backfill) start(ctx context.Context, chatID string, keepPaused bool) error {
	// A paused job with nothing left is done, not one to resume.
	if _, err := b.settle(ctx, chatID); err != nil {
		return err
	}
	st, err := b.Status(ctx)
	if err != nil {
		return err
	}
	jobs := st.Jobs
	if chatID == "" {
		jobs = append([]BackfillJobStatus(nil), jobs...)
		sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].Pending < jobs[j].Pending })
	}
	var starts []models.JobStart
	pending := map[string]int64{}
	for _, j := range jobs {
		if (chatID != "" && j.ChatID != chatID) || j.Pending <= 0 || (keepPaused && j.State == models.BackfillPaused) {
			continue
		}
		starts = append(starts, models.JobStart{ChatID: j.ChatID, GuildID: j.GuildID})
		pending[j.ChatID] = j.Pending
	}
	started, err := b.store.StartBackfillJobs(ctx, starts)
	if err != nil {
		return err
	}
	for _, c := range started {
		b.log.Info("backfill started", "chatId", c, "pending", pending[c])
	}
	if len(started) > 0 {
		b.Kick()
	}
	return nil
}

// PauseJobs pauses every running or queued job, or only chatID's, after its current batch (a
// wait ends at once); one with nothing left settles done.
func (b *Backfill) PauseJobs(ctx context.Context, chatID string) error {
	paused, err := b.store.PauseBackfillJobs(ctx, chatID)
	if err != nil {
		return err
	}
	for _, c := range paused {
		b.log.Info("backfill pausing", "chatId", c)
	}
	if len(paused) > 0 {
		b.wake()
	}
	_, err = b.settle(ctx, chatID)
	return err
}

// settle moves paused jobs with nothing left (all, or chatID's) to done and answers their chats.
func (b *Backfill) settle(ctx context.Context, chatID string) ([]string, error) {
	settled, err := b.store.SettleBackfillJobs(ctx, chatID)
	if err != nil {
		return nil, err
	}
	for _, c := range settled {
		b.log.Info("backfill finished", "chatId", c, "paused", true)
	}
	if len(settled) > 0 {
		b.updateGauges(ctx)
	}
	return settled, nil
}

// RunQueue runs the queue until no job is running, if this process gets the queue lease.
func (b *Backfill) RunQueue(ctx context.Context) error {
	if !b.runMu.TryLock() {
		return nil
	}
	defer b.runMu.Unlock()
	owner := b.cfg.Owner
	ok, err := b.store.AcquireBackfillLease(ctx, owner, b.cfg.Lease)
	if err != nil || !ok {
		return err
	}
	b.renewedAt = b.clock.Now()
	defer func() {
		bg := context.WithoutCancel(ctx)
		if err := b.store.ReleaseBackfillLease(bg, owner); err != nil {
			b.log.Error("backfill release lease", "err", err)
		}
		b.updateGauges(bg)
	}()
	if _, err := b.settle(ctx, ""); err != nil {
		return err
	}
	for ctx.Err() == nil {
		job, ok, err := b.store.NextBackfillJob(ctx)
		if err != nil || !ok {
			return err
		}
		chat := job.ChatID
		if err := b.store.SetBackfillRunnerJob(ctx, owner, &chat, nil); err != nil {
			return err
		}
		err = b.runJob(ctx, job)
		if cerr := b.store.SetBackfillRunnerJob(context.WithoutCancel(ctx), owner, nil, nil); err == nil {
			err = cerr
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errLeaseLost) {
			b.log.Warn("backfill lease lost; another process runs the queue", "chatId", chat)
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// renew renews the queue lease when a third of it has passed.
func (b *Backfill) renew(ctx context.Context) error {
	now := b.clock.Now()
	if now.Sub(b.renewedAt) < b.cfg.Lease/3 {
		return nil
	}
	ok, err := b.store.AcquireBackfillLease(ctx, b.cfg.Owner, b.cfg.Lease)
	if err != nil {
		return err
	}
	if !ok {
		return errLeaseLost
	}
	b.renewedAt = now
	return nil
}

// wait waits d in steps of at most Poll, renewing the lease and re-reading the job between;
// stopped reports that the job stopped running meanwhile (or ctx ended).
func (b *Backfill) wait(ctx context.Context, chat string, d time.Duration) (stopped bool, err error) {
	end := b.clock.Now().Add(d)
	for {
		left := end.Sub(b.clock.Now())
		if left <= 0 {
			return false, nil
		}
		if err := b.nap(ctx, min(left, b.cfg.Poll)); err != nil {
			return true, err
		}
		if err := b.renew(ctx); err != nil {
			return true, err
		}
		job, err := b.store.BackfillJobOf(ctx, chat)
		if errors.Is(err, models.ErrNotFound) || (err == nil && job.State != models.BackfillRunning) {
			return true, nil
		} else if err != nil {
			return true, err
		}
	}
}

// nap sleeps d, cut short by a pause in this process; it fails only when ctx ends.
func (b *Backfill) nap(ctx context.Context, d time.Duration) error {
	wake := b.wakeChan()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-wake:
			cancel()
		case <-sctx.Done():
		}
	}()
	_ = clock.Sleep(sctx, b.clock, d)
	return ctx.Err()
}

// waitWalk waits while a walk holds the media-traffic lock; stopped: the job was paused.
func (b *Backfill) waitWalk(ctx context.Context, chat string) (stopped bool, err error) {
	logged := false
	for {
		until, walking, err := b.Walking(ctx)
		if err != nil || !walking {
			return false, err
		}
		if !logged {
			b.log.Info("backfill waiting for a walk", "chatId", chat, "until", until)
			logged = true
		}
		if stopped, err := b.wait(ctx, chat, min(until.Sub(b.clock.Now()), b.cfg.Poll)); err != nil || stopped {
			return true, err
		}
	}
}

// Walking reports whether a walk (an active scrape that pushed rows within WalkIdle) holds the
// media-traffic lock, and until when unless it pushes again.
func (b *Backfill) Walking(ctx context.Context) (until time.Time, walking bool, err error) {
	until, ok, err := b.store.WalkUntil(ctx, b.cfg.WalkIdle)
	if err != nil || !ok {
		return time.Time{}, false, err
	}
	return until, until.After(b.clock.Now()), nil
}

// setLimited records the rate limit the runner waits out (zero: none) for the status.
func (b *Backfill) setLimited(ctx context.Context, chat string, until time.Time) error {
	var limited *time.Time // nil: none
	if !until.IsZero() {
		limited = &until
	}
	if b.metrics != nil {
		b.metrics.Backfill.WithLabelValues("rate_limited").Set(boolGauge(limited != nil))
	}
	return b.store.SetBackfillRunnerJob(ctx, b.cfg.Owner, &chat, limited)
}

// runJob runs one chat's job batch by batch until it is done or paused, or ctx ends.
func (b *Backfill) runJob(ctx context.Context, job models.BackfillJob) error {
	chat := job.ChatID
	rc := newRunClock(b.clock)
	for ctx.Err() == nil {
		cur, going, err := b.stillRunning(ctx, chat)
		if err != nil || !going {
			return err
		}
		if err := b.renew(ctx); err != nil {
			return err
		}
		member, retryOnly, err := b.nextMember(ctx, cur)
		if err != nil || member == nil {
			return err
		}
		rc.stop() // waits are not running time

		waited, stopped, err := b.waitOut(ctx, chat)
		if err != nil || stopped {
			return err
		}
		rc.start()
		if err := b.step(ctx, cur, rc, member.ID, retryOnly, waited); err != nil {
			return err
		}
	}
	return nil
}

// stillRunning re-reads chat's job; going is false when it is gone or no longer running (a
// paused one with nothing left is settled done).
func (b *Backfill) stillRunning(ctx context.Context, chat string) (cur models.BackfillJob, going bool, err error) {
	cur, err = b.store.BackfillJobOf(ctx, chat)
	if errors.Is(err, models.ErrNotFound) {
		return cur, false, nil
	}
	if err != nil || cur.State == models.BackfillRunning {
		return cur, err == nil, err
	}
	if cur.State == models.BackfillPaused {
		if settled, err := b.settle(ctx, chat); err != nil || len(settled) > 0 {
			return cur, false, err
		}
	}
	b.log.Info("backfill paused", "chatId", chat, "processed", cur.Processed)
	return cur, false, nil
}

// nextMember is the member the next batch takes (pickMember); with none it ends the job done.
func (b *Backfill) nextMember(ctx context.Context, cur models.BackfillJob) (member *models.BackfillMember, retryOnly bool, err error) {
	members, err := b.store.BackfillMembers(ctx, cur.ChatID)
	if err != nil {
		return nil, false, err
	}
	if member, retryOnly = pickMember(members); member != nil {
		return member, retryOnly, nil
	}
	if ended, err := b.store.EndBackfillJob(ctx, cur.ChatID, models.BackfillDone); err != nil || !ended {
		return nil, false, err
	}
	b.log.Info("backfill finished", "chatId", cur.ChatID, "processed", cur.Processed)
	b.updateGauges(ctx)
	return nil, false, nil
}

// step runs the job's next batch, or suspect retry pass, under the settings as they are now.
func (b *Backfill) step(ctx context.Context, cur models.BackfillJob, rc *runClock, scrapeID int64, retryOnly bool, waited time.Duration) error {
	if cur.StartedAt == nil {
		if err := b.store.MarkBackfillJobStarted(ctx, cur.ChatID); err != nil {
			return err
		}
	}
	settings, err := b.store.BackfillSettings(ctx)
	if err != nil {
		return err
	}
	size := max(1, settings.BatchSize)
	pause := time.Duration(settings.BatchPauseMs) * time.Millisecond
	if cur.CooldownMs != nil {
		pause = max(pause, time.Duration(*cur.CooldownMs)*time.Millisecond)
	}
	if retryOnly {
		return b.retryPass(ctx, cur, rc, scrapeID, size, pause, waited)
	}
	return b.batch(ctx, cur, rc, scrapeID, size, pause, waited)
}

// waitOut waits out the engine's rate limit, then a walk; waited is the rate limit's part
// (the measured rate may count it, models.WaitsCountFrom), stopped that the job stopped.
func (b *Backfill) waitOut(ctx context.Context, chat string) (waited time.Duration, stopped bool, err error) {
	if lim := b.engine.RateLimit(); lim.Active {
		if err := b.setLimited(ctx, chat, lim.Until); err != nil {
			return 0, true, err
		}
		b.log.Info("backfill waiting out a rate limit", "chatId", chat, "ms", lim.Remaining.Milliseconds())
		from := b.clock.Now()
		if stopped, err := b.wait(ctx, chat, lim.Remaining); err != nil || stopped {
			return 0, true, err
		}
		waited = b.clock.Now().Sub(from)
	} else if err := b.setLimited(ctx, chat, time.Time{}); err != nil {
		return 0, true, err
	}
	stopped, err = b.waitWalk(ctx, chat)
	return waited, stopped, err
}

// batch previews a batch of pending rows, records the progress, cools down, retries suspects.
func (b *Backfill) batch(ctx context.Context, cur models.BackfillJob, rc *runClock, scrapeID int64, size int, pause, waited time.Duration) error {
	chat := cur.ChatID
	items, err := b.store.MediaToPreview(ctx, scrapeID, models.MediaPending, size)
	if err != nil {
		return err
	}
	// Unhandled rows stay pending; a batch that handled nothing counts as stalled.
	res, err := b.preview(ctx, chat, scrapeID, items, false)
	if err != nil || ctx.Err() != nil {
		return err
	}
	if after := b.engine.RateLimit(); after.Active {
		if err := b.setLimited(ctx, chat, after.Until); err != nil {
			return err
		}
	}
	out := judgeBatch(cur, res, size, pause)
	ran := rc.take()
	done, err := b.store.RecordBackfillBatch(ctx, chat, models.BatchRecord{
		Settled: int64(out.progressed + res.Suspect), RunMs: ran.Milliseconds(), WaitMs: waited.Milliseconds(), Stalled: out.stalled, CooldownMs: out.cooldown,
		RecentWeight: b.cfg.recentWeight(ran), Smoothed: b.cfg.smoothed()})
	if err != nil {
		return err
	}
	b.logBatch(chat, scrapeID, len(items), res, done, out)
	b.updateGauges(ctx)
	if out.stalled >= stallLimit {
		return b.pauseStalled(ctx, chat)
	}
	if out.pause > 0 && (out.progressed > 0 || res.Suspect > 0) {
		if stopped, err := b.wait(ctx, chat, out.pause); err != nil || stopped {
			return err
		}
	}
	if res.Suspect > 0 || res.Unverified > 0 {
		if _, err := b.retrySuspects(ctx, chat, scrapeID, SuspectRetrySize(size)); err != nil {
			return err
		}
	}
	return nil
}

// batchOutcome is what one batch's result makes of its job's run.
type batchOutcome struct {
	progressed int           // rows that reached a final state
	stalled    int           // batches in a row without progress, this one included
	cooldown   *int64        // the job's raised cooldown in ms, kept for the rest of the run
	pause      time.Duration // the wait before the next batch
	raised     bool          // this batch raised the cooldown
}

// judgeBatch counts a batch of size rows that made no progress as a stall, and doubles the
// cooldown (within its bounds) when suspect failures reach two thirds of the batch.
func judgeBatch(cur models.BackfillJob, res media.BatchResult, size int, pause time.Duration) batchOutcome {
	out := batchOutcome{progressed: res.Cached + res.Skipped + res.Failed, cooldown: cur.CooldownMs, pause: pause}
	if out.progressed == 0 {
		out.stalled = cur.Stalled + 1
	}
	if out.stalled < stallLimit && res.Suspect > 0 && res.Suspect >= ceilDiv(2*size, 3) {
		out.pause = min(maxRaisedCooldown, max(minRaisedCooldown, 2*pause))
		ms := out.pause.Milliseconds()
		out.cooldown, out.raised = &ms, true
	}
	return out
}

// logBatch logs a batch's counts and the job's progress after it, and a raised cooldown.
func (b *Backfill) logBatch(chat string, scrapeID int64, rows int, res media.BatchResult, done models.BackfillJob, out batchOutcome) {
	attrs := []any{"chatId", chat, "scrapeId", scrapeID, "rows", rows, "cached", res.Cached,
		"skipped", res.Skipped, "failed", res.Failed, "suspect", res.Suspect, "ratelimited", res.RateLimited,
		"unverified", res.Unverified, "processed", done.Processed, "stalled", out.stalled, "cooldownMs", out.pause.Milliseconds()}
	if done.PerMinute != nil {
		attrs = append(attrs, "perMinute", round1(*done.PerMinute))
	}
	b.log.Info("backfill batch", attrs...)
	if out.raised {
		b.log.Warn("backfill suspect failures raised the cooldown", "chatId", chat, "suspect", res.Suspect, "cooldownMs", out.pause.Milliseconds())
	}
}

// retryPass gives suspect rows their retry after the cooldown (when nothing is pending); a
// pass that settles none counts as a stall.
func (b *Backfill) retryPass(ctx context.Context, cur models.BackfillJob, rc *runClock, scrapeID int64, size int, pause, waited time.Duration) error {
	chat := cur.ChatID
	if pause > 0 {
		if stopped, err := b.wait(ctx, chat, pause); err != nil || stopped {
			return err
		}
	}
	res, err := b.retrySuspects(ctx, chat, scrapeID, SuspectRetrySize(size))
	if err != nil {
		return err
	}
	stalled := 0
	if res.Cached+res.Failed+res.Skipped+res.Unverified == 0 {
		stalled = cur.Stalled + 1
	}
	ran := rc.take()
	if _, err := b.store.RecordBackfillBatch(ctx, chat, models.BatchRecord{RunMs: ran.Milliseconds(), WaitMs: waited.Milliseconds(), Stalled: stalled,
		CooldownMs: cur.CooldownMs, Smoothed: b.cfg.smoothed()}); err != nil {
		return err
	}
	if stalled >= stallLimit {
		return b.pauseStalled(ctx, chat)
	}
	return nil
}

// pickMember is the first member with pending rows, else with suspect ones (retryOnly), else nil.
func pickMember(members []models.BackfillMember) (m *models.BackfillMember, retryOnly bool) {
	if i := slices.IndexFunc(members, func(m models.BackfillMember) bool { return m.Counts.Pending > 0 }); i >= 0 {
		return &members[i], false
	}
	if i := slices.IndexFunc(members, func(m models.BackfillMember) bool { return m.Counts.Suspect > 0 }); i >= 0 {
		return &members[i], true
	}
	return nil, false
}

// SuspectRetrySize is how many suspect rows one retry takes: half a batch, at least two.
func SuspectRetrySize(batch int) int { return max(2, ceilDiv(batch, 2)) }

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func (b *Backfill) pauseStalled(ctx context.Context, chat string) error {
	if _, err := b.store.EndBackfillJob(ctx, chat, models.BackfillPaused); err != nil {
		return err
	}
	b.log.Warn("backfill made no progress; job paused", "chatId", chat, "batches", stallLimit)
	return nil
}

// retrySuspects gives up to n suspect rows of a scrape their one retry.
func (b *Backfill) retrySuspects(ctx context.Context, chat string, scrapeID int64, n int) (media.BatchResult, error) {
	rows, err := b.store.MediaToPreview(ctx, scrapeID, models.MediaSuspect, n)
	if err != nil || len(rows) == 0 {
		return media.BatchResult{}, err
	}
	res, err := b.preview(ctx, chat, scrapeID, rows, true)
	if err != nil || ctx.Err() != nil {
		return res, err
	}
	b.log.Info("backfill suspect retry", "chatId", chat, "scrapeId", scrapeID, "rows", len(rows),
		"recovered", res.Cached, "unverified", res.Unverified, "failed", res.Failed, "ratelimited", res.RateLimited)
	return res, nil
}

// preview runs rows (suspects' retries when retry) through the engine; an error other than a
// lost lease is logged, not returned, and none is when ctx ended.
func (b *Backfill) preview(ctx context.Context, chat string, scrapeID int64, rows []models.Media, retry bool) (media.BatchResult, error) {
	items := make([]media.Item, len(rows))
	for i, r := range rows {
		items[i] = media.Item{ID: r.ID, Kind: string(r.Kind), URL: r.URL, Retry: retry}
	}
	res, err := b.engine.Batch(ctx, items, b.recorder(ctx, chat))
	switch {
	case ctx.Err() != nil || err == nil:
		return res, nil
	case errors.Is(err, errLeaseLost):
		return res, err
	case retry:
		b.log.Error("backfill suspect retry", "chatId", chat, "scrapeId", scrapeID, "err", err)
	default:
		b.log.Error("backfill batch", "chatId", chat, "scrapeId", scrapeID, "err", err)
	}
	return res, nil
}

// recorder keeps each preview's outcome on its row (even after ctx ends: the fetch happened).
func (b *Backfill) recorder(ctx context.Context, chat string) func(media.Item, media.Result) error {
	return func(item media.Item, res media.Result) error {
		if err := b.renew(ctx); err != nil {
			return err
		}
		state := res.Outcome.State()
		if state == "" {
			return nil
		}
		if res.Outcome == media.Failed {
			// The row keeps only its state; the reason (never the URL) is for operators.
			b.log.Info("backfill media failed", "mediaId", item.ID, "status", res.Status, "reason", res.Err)
		}
		ok, err := b.store.RecordBackfillPreview(context.WithoutCancel(ctx), chat, item.ID, models.MediaState(state), res.Bytes)
		if err != nil {
			return err
		}
		if !ok && res.Outcome == media.Cached {
			// The row was deleted (or handled) meanwhile: its preview belongs to no one.
			if err := b.engine.RemovePreview(item.ID); err != nil {
				b.log.Warn("backfill remove orphan preview", "mediaId", item.ID, "err", err)
			}
		}
		return nil
	}
}

// RunDeletes carries out asked-for scrape deletes: pending-delete → deleting (previews and
// media rows removed in chunks) → deleted. It is idempotent across restarts and replicas.
func (b *Backfill) RunDeletes(ctx context.Context) error {
	if !b.deleteMu.TryLock() {
		return nil
	}
	defer b.deleteMu.Unlock()
	ids, err := b.store.ScrapesToDelete(ctx)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := b.store.MarkScrapeDeleting(ctx, id); err != nil {
			return err
		}
		removed := 0
		for {
			mids, err := b.store.MediaIDsOf(ctx, id, deleteChunk)
			if err != nil {
				return err
			}
			if len(mids) == 0 {
				break
			}
			// Previews go first: a crash leaves rows to delete again, never orphan previews.
			for _, mid := range mids {
				if err := b.engine.RemovePreview(mid); err != nil {
					b.log.Warn("scrape delete: remove preview", "mediaId", mid, "err", err)
				}
			}
			if err := b.store.DeleteMedia(ctx, mids); err != nil {
				return err
			}
			removed += len(mids)
		}
		done, err := b.store.FinishScrapeDelete(ctx, id)
		if err != nil {
			return err
		}
		if done {
			b.log.Info("scrape deleted", "scrapeId", id, "media", removed)
		}
	}
	return nil
}

// updateGauges refreshes the backfill gauges from the status.
func (b *Backfill) updateGauges(ctx context.Context) {
	if b.metrics != nil {
		if _, err := b.Status(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("backfill gauges", "err", err)
		}
	}
}

// round1 rounds to one decimal, halves up, as rates are shown.
func round1(x float64) float64 { return math.Floor(x*10+0.5) / 10 }

// roundMs rounds a duration in ms to a whole number, halves up.
func roundMs(x float64) int64 { return int64(math.Floor(x + 0.5)) }
