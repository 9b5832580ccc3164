// Package scheduler runs owed's work, each kind by a runner on one lifecycle (runner.go): the
// content jobs (screen and score, behind the model's cap and breaker) claimed by writes, by
// authors' views and by the periodic sweep; the webhook deliveries (deliveries.go); and the
// backfill queue. Schedule holds the cron entries that wake them.
package scheduler

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/owed/owed/clock"
	"github.com/owed/owed/metrics"
	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
)

// ScoreRuns is how many times the critic is asked per score (the mean is kept: one run moves
// by up to 0.06 on unchanged code); models.ScoreCalls, which the budget's SQL charges too.
const ScoreRuns = models.ScoreCalls

// Backoff is a job's wait after attempts failed attempts: a minute, doubling, at most an hour.
func Backoff(attempts int) time.Duration { return doubling(time.Minute, time.Hour, attempts) }

// doubling is first doubled n times, at most most.
func doubling(first, most time.Duration, n int) time.Duration {
	d := first
	for ; n > 0 && d < most; n-- {
		d *= 2
	}
	return min(d, most)
}

// Outcome is how running a claimed job ended.
type Outcome string

const (
	Done    Outcome = "done"    // the verdict or score is recorded
	Pending Outcome = "pending" // rescheduled with a why
	Gone    Outcome = "gone"    // the item was deleted meanwhile
)

// ContentConfig tunes the content jobs.
type ContentConfig struct {
	Lease       time.Duration // how long a claim holds a job (default DefaultLease)
	ModelName   string        // the critic model named in score requests (default DefaultModelName)
	ModelAPI    string        // the model's dialect, as the shadow page shows it
	Concurrency int           // jobs one sweep runs at once (default DefaultConcurrency)
	Owner       string        // this process's lease owner, shared by its runners (default: a new one)
	Every       time.Duration // the sweep's period on the schedule (DefaultSweepEvery, OWED_SWEEP_EVERY)
	// ModelConcurrency caps the model calls in flight in this process, every claimer together
	// (default DefaultModelConcurrency, at least ScoreRuns).
	ModelConcurrency int
	// ModelBreaker is how many consecutive model failures open the breaker (default
	// DefaultModelBreaker; negative: no breaker).
	ModelBreaker int
	// ReviewBelow is the review band per kind: a verdict less confident waits for a moderator
	// (models.EnterReview); zero or absent: every verdict settles (OWED_REVIEW_BELOW).
	ReviewBelow map[models.Kind]float64
	Shadow      *ShadowConfig // the candidate, asked beside the live model (nil: none)
}

// The content jobs' defaults (OWED_MODEL_NAME, OWED_SWEEP_CONCURRENCY, OWED_MODEL_CONCURRENCY,
// OWED_MODEL_BREAKER, OWED_SWEEP_EVERY). A sweep runs at most the model cap's free slots at
// once; the high DefaultConcurrency lets concurrent jobs share statements (docs/benchmarks.md).
const (
	DefaultSweepEvery       = time.Minute
	DefaultModelName        = "critic"
	DefaultConcurrency      = 512
	DefaultModelConcurrency = 16
	DefaultModelBreaker     = 10
)

func (c *ContentConfig) applyDefaults() {
	c.Lease = positive(c.Lease, DefaultLease)
	c.ModelName = cmp.Or(c.ModelName, DefaultModelName)
	c.Concurrency = positive(c.Concurrency, DefaultConcurrency)
	c.Owner = ownerOr(c.Owner)
	c.Every = positive(c.Every, DefaultSweepEvery)
	c.ModelConcurrency = max(positive(c.ModelConcurrency, DefaultModelConcurrency), ScoreRuns)
	c.ModelBreaker = cmp.Or(c.ModelBreaker, DefaultModelBreaker)
}

// Content runs content jobs; all its background work runs under one runner, so Stop can wait
// for it and then free the leases still held.
type Content struct {
	store   *models.Store
	model   *modelclient.Client
	clock   clock.Clock
	log     *slog.Logger
	metrics *metrics.Metrics
	cfg     ContentConfig
	gate    *Gate    // the model slots
	breaker *breaker // the model's breaker

	runner *runner
	sweep  *loop   // the periodic sweep of everyone's due jobs
	shadow *shadow // the candidate's calls (nil: no candidate)

	mu      sync.Mutex
	authors map[int64]bool // authors whose background sweep is running: true when woken again meanwhile
	// asking counts the model calls being asked now ("in flight"); slots held are not it, since
	// a claimer takes them before it knows whether it finds a job.
	asking   atomic.Int64
	holds    recentRead[models.Holds]         // see held
	settings recentRead[models.ModelSettings] // the model settings (see live)
}

// NewContent makes the content-jobs runner.
func NewContent(store *models.Store, model *modelclient.Client, clk clock.Clock, log *slog.Logger, m *metrics.Metrics, cfg ContentConfig) *Content {
	cfg.applyDefaults()
	clk, log = orDefaults(clk, log)
	c := &Content{store: store, model: model, clock: clk, log: log, metrics: m, cfg: cfg, authors: map[int64]bool{}}
	c.runner = newRunner("content jobs", log, func(ctx context.Context) (int64, error) {
		n, err := store.ReleaseLeases(ctx, models.LeasedJobs, cfg.Owner)
		if err == nil && c.shadow != nil {
			var m int64
			m, err = store.ReleaseLeases(ctx, models.LeasedShadow, cfg.Owner)
			n += m
		}
		return n, err
	})
	c.sweep = newLoop("sweep", c.sweepAll)
	if cfg.Shadow != nil {
		c.shadow = newShadow(*cfg.Shadow, func(ctx context.Context) error {
			_, err := c.SweepShadow(ctx)
			return err
		})
	}
	c.gate = NewGate(cfg.ModelConcurrency)
	if m != nil {
		m.ModelInFlight.Set(0)
	}
	c.breaker = &breaker{store: store, clock: clk, log: log, metrics: m, threshold: max(cfg.ModelBreaker, 0),
		lease: cfg.Lease, owner: cfg.Owner, row: models.Breaker{State: models.BreakerClosed}}
	return c
}

// ModelProblem says why no model is asked ("" when one is configured): "no model configured",
// or the refused configuration. Jobs then wait as unreachable with that error.
func (c *Content) ModelProblem() string {
	return liveModel{client: c.model}.problem()
}

// Config is the runner's configuration with defaults applied.
func (c *Content) Config() ContentConfig { return c.cfg }

// errorText is an attempt's error as kept: nil when empty, else at most
// modelclient.MaxErrorChars characters.
func errorText(s string) *string {
	if s == "" {
		return nil
	}
	s = modelclient.Truncate(s, modelclient.MaxErrorChars)
	return &s
}

// withinLease bounds ctx to the job's lease less a tenth of it (kept for recording the
// outcome); ok is false when no time is left.
func (c *Content) withinLease(ctx context.Context, job models.Job) (context.Context, context.CancelFunc, bool) {
	if job.LeaseUntil == nil {
		return ctx, func() {}, true
	}
	left := job.LeaseUntil.Sub(c.clock.Now()) - c.cfg.Lease/10
	if left <= 0 {
		return ctx, func() {}, false
	}
	ctx, cancel := context.WithTimeout(ctx, left)
	return ctx, cancel, true
}

// note logs an attempt as one structured line and counts it.
func (c *Content) note(ev models.Event, extra ...slog.Attr) {
	why := ""
	if ev.Why != nil {
		why = string(*ev.Why)
	}
	if c.metrics != nil {
		c.metrics.Attempts.WithLabelValues(string(ev.Event), string(ev.Outcome), why).Inc()
	}
	attrs := []slog.Attr{slog.String("kind", string(ev.Kind)), slog.Int64("itemId", ev.ItemID), slog.Int64("userId", ev.UserID),
		slog.String("outcome", string(ev.Outcome)), slog.String("why", why), slog.Int("attempt", ev.Attempt)}
	attrs = withOpt(attrs, "status", ev.Status)
	attrs = withOpt(attrs, "upstreamMs", ev.UpstreamMs)
	attrs = withOpt(attrs, "confidence", ev.Confidence)
	attrs = withOpt(attrs, "art", ev.Art)
	attrs = withOpt(attrs, "requestBytes", ev.RequestBytes)
	attrs = withOpt(attrs, "runs", ev.Runs)
	attrs = append(withOpt(attrs, "error", ev.Error), extra...)
	c.log.LogAttrs(context.Background(), slog.LevelInfo, string(ev.Event), attrs...)
}

// withOpt appends key=*v to attrs unless v is nil.
func withOpt[T any](attrs []slog.Attr, key string, v *T) []slog.Attr {
	if v != nil {
		attrs = append(attrs, slog.Any(key, *v))
	}
	return attrs
}

// leased is a claimed job, the model slots its task needs, and when it was claimed (real time,
// for held; zero when not known).
type leased struct {
	job     models.Job
	slots   *slots
	claimed time.Time
}

// runClaimed runs a claimed job, logging an error (the job is due again once its lease runs out).
func (c *Content) runClaimed(ctx context.Context, l leased) (Outcome, models.Event) {
	out, ev, err := c.run(ctx, l)
	if err != nil && ctx.Err() == nil {
		c.log.Error("content job", "task", l.job.Task, "kind", l.job.Kind, "itemId", l.job.ItemID, "jobId", l.job.ID, "err", err)
	}
	return out, ev
}

// Sweep claims and runs due jobs (one author's when userID is non-zero) until none is due, at
// most cfg.Concurrency at once, and returns how many it ran. Each claim first takes model
// slots, so a job never waits for one while its lease runs (fit); while the breaker is open it
// puts every due job off until the next probe (parkDue).
func (c *Content) Sweep(ctx context.Context, userID int64) (int, error) {
	prio := PrioritySweep
	if userID != 0 {
		prio = PriorityAuthor
	}
	least := 1 // slots the next claim waits for: the count of the last job that did not fit
	return pool[leased]{slots: c.cfg.Concurrency, quit: c.runner.quit,
		claim: func(ctx context.Context, free int) ([]leased, int, error) {
			if err := c.parkDue(ctx, userID); err != nil {
				return nil, 0, err
			}
			got, err := c.gate.acquire(ctx, prio, min(least, c.gate.Cap()), min(free*maxCalls, c.gate.Cap()))
			if err != nil {
				return nil, 0, err
			}
			room := c.gate.hold(got)
			defer room.release() // what no claimed job took
			claimed := time.Now()
			jobs, err := c.store.ClaimDue(ctx, min(free, got), c.cfg.Lease, c.cfg.Owner, userID)
			if err != nil {
				return nil, 0, fmt.Errorf("claim content jobs: %w", err)
			}
			return c.fit(ctx, jobs, claimed, room, &least), len(jobs), nil
		},
		run: func(ctx context.Context, l leased) { c.runClaimed(ctx, l) },
	}.drain(ctx)
}

// fit gives each claimed job its task's slots out of room; one room cannot cover is let go
// unrun, and *least becomes its count, for the next claim to wait for.
func (c *Content) fit(ctx context.Context, jobs []models.Job, claimed time.Time, room *slots, least *int) []leased {
	run := make([]leased, 0, len(jobs))
	*least = 1
	for _, j := range jobs {
		if s, ok := room.take(callsOf(j.Task)); ok {
			run = append(run, leased{job: j, slots: s, claimed: claimed})
			continue
		}
		*least = max(*least, callsOf(j.Task))
		if err := c.store.ReleaseLease(context.WithoutCancel(ctx), models.LeasedJobs, j.ID, j.LeaseOwner, j.LeaseUntil); err != nil {
			c.log.Error("content job", "op", "let go unrun", "jobId", j.ID, "err", err)
		}
	}
	return run
}

// sweepAll is the periodic sweep's pass: everyone's due jobs, then a wake of the shadow calls.
func (c *Content) sweepAll(ctx context.Context) error {
	n, err := c.Sweep(ctx, 0)
	if n > 0 {
		c.log.Debug("sweep", "ran", n)
	}
	if c.shadow != nil && err == nil {
		c.shadow.loop.Wake()
	}
	return err
}

// parkDue puts every due job (one author's when userID is non-zero) off until the next probe
// while the breaker is open and its probe not due.
func (c *Content) parkDue(ctx context.Context, userID int64) error {
	row, err := c.breaker.state(ctx)
	if err != nil || row.State == models.BreakerClosed {
		return err
	}
	now := c.clock.Now()
	a := parkFor(row, now)
	if probeDue(row, now) {
		return nil
	}
	n, err := c.store.ParkDue(ctx, a.at, userID)
	if n > 0 {
		c.log.Debug("put off until the model's probe", "jobs", n, "nextAttemptAt", a.at)
	}
	return err
}

// Start runs the sweep's loop (and the shadow's) until ctx ends or Stop: at once, then when woken.
func (c *Content) Start(ctx context.Context) error {
	if c.shadow != nil {
		return c.runner.start(ctx, c.sweep, c.shadow.loop)
	}
	return c.runner.start(ctx, c.sweep)
}

// ScheduleOn adds "content sweep" (and "shadow calls") to s, every ContentConfig.Every.
func (c *Content) ScheduleOn(s *Schedule) error {
	if c.shadow != nil {
		if err := s.Every("shadow calls", c.cfg.Every, c.shadow.loop.tick); err != nil {
			return err
		}
	}
	return s.Every("content sweep", c.cfg.Every, c.sweep.tick)
}

// Wake makes the sweep run now instead of at its next entry.
func (c *Content) Wake() { c.sweep.Wake() }

// Go runs fn in the background under the runner's lifetime, unless it is stopping.
func (c *Content) Go(fn func(ctx context.Context)) bool { return c.runner.Go(fn) }

// SweepAuthor starts a background sweep of one author's due jobs, or has the running one sweep
// once more; it never blocks. Each sweep raises the author's bound on their earliest due time
// (models.Store.RaiseNextDue), so jobs put off stop waking it.
func (c *Content) SweepAuthor(userID int64) {
	c.mu.Lock()
	if _, running := c.authors[userID]; running {
		c.authors[userID] = true
		c.mu.Unlock()
		return
	}
	c.authors[userID] = false
	c.mu.Unlock()
	started := c.Go(func(ctx context.Context) {
		for again := true; again; {
			_, err := c.Sweep(ctx, userID)
			if err == nil {
				err = c.store.RaiseNextDue(ctx, userID, c.clock.Now())
			}
			if err != nil && ctx.Err() == nil {
				c.log.Error("author sweep", "userId", userID, "err", err)
			}
			c.mu.Lock()
			if again = c.authors[userID] && ctx.Err() == nil; again {
				c.authors[userID] = false
			} else {
				delete(c.authors, userID)
			}
			c.mu.Unlock()
		}
	})
	if !started {
		c.mu.Lock()
		delete(c.authors, userID)
		c.mu.Unlock()
	}
}

// calling adds n to the model calls being asked now (asking), and to its gauge.
func (c *Content) calling(n int64) {
	v := c.asking.Add(n)
	if c.metrics != nil {
		c.metrics.ModelInFlight.Set(float64(v))
	}
}

// RunItem claims and runs the job of one item's task in the background and returns a channel
// that receives its outcome (closed without one when the job was not due or not free). A
// screen runs at the inline priority, a score at the sweep's. An allowed revision's score has
// started before its screen reports Done, so a Stop after the outcome waits for it too.
func (c *Content) RunItem(task models.Task, kind models.Kind, itemID int64) <-chan Outcome {
	prio := PriorityInline
	if task != models.TaskScreen {
		prio = PrioritySweep
	}
	return c.runItem(task, kind, itemID, prio)
}

// runItem is RunItem at priority prio: the task's model slots first, then the claim.
func (c *Content) runItem(task models.Task, kind models.Kind, itemID int64, prio Priority) <-chan Outcome {
	done := make(chan Outcome, 1)
	started := c.Go(func(ctx context.Context) {
		defer close(done)
		n := callsOf(task)
		if n == 0 {
			c.log.Error("claim item", "task", task, "kind", kind, "itemId", itemID, "err", fmt.Errorf("owed does not run %q jobs", task))
			return
		}
		if err := c.gate.Acquire(ctx, prio, n); err != nil {
			return // stopping
		}
		s := c.gate.hold(n)
		claimed := time.Now()
		job, ok, err := c.store.ClaimItem(ctx, task, kind, itemID, c.cfg.Lease, c.cfg.Owner)
		if err != nil || !ok {
			s.release()
			if err != nil {
				c.log.Error("claim item", "task", task, "kind", kind, "itemId", itemID, "err", err)
			}
			return
		}
		out, ev := c.runClaimed(ctx, leased{job: job, slots: s, claimed: claimed})
		if task == models.TaskScreen && kind == models.KindRevision && out == Done && ev.Outcome == models.OutcomeAllow {
			// Its score joins the runner before the outcome is told.
			c.runItem(models.TaskScore, models.KindRevision, itemID, PrioritySweep)
		}
		done <- out
	})
	if !started {
		close(done)
	}
	return done
}

// Stop lets background work finish until ctx ends, cancels the rest and frees this process's leases.
func (c *Content) Stop(ctx context.Context) error { return c.runner.Stop(ctx) }
