// Package scheduler runs owed's work: the content jobs (screen and score) claimed by writes,
// by authors' views and by the periodic sweep, and the backfill queue.
package scheduler

import (
	"context"
	"errors"
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

// ScoreRuns is how many times the critic is asked per score: one run moves by up to 0.06 on
// unchanged code, which would reorder a list sorted by art, so the mean of three is kept.
const ScoreRuns = 3

// Backoff is how long a job waits after attempts failed attempts: a minute, doubling, at most
// an hour.
func Backoff(attempts int) time.Duration {
	if attempts >= 6 {
		return time.Hour
	}
	return min(time.Minute<<attempts, time.Hour)
}

// Outcome is how running a claimed job ended.
type Outcome string

const (
	Done    Outcome = "done"    // the verdict or score is recorded
	Pending Outcome = "pending" // rescheduled with a why
	Gone    Outcome = "gone"    // the item was deleted meanwhile
)

// DefaultSweepEvery is the period of the background sweep of everyone's due jobs.
const DefaultSweepEvery = time.Minute

// ContentConfig tunes the content jobs.
type ContentConfig struct {
	Lease       time.Duration // how long a claim holds a job (default DefaultLease)
	ModelName   string        // the critic model named in score requests (default DefaultModelName)
	Concurrency int           // jobs one sweep runs at once (default DefaultConcurrency)
	// Owner is this process's lease owner name, the same for every runner of the process
	// (default: a new one, host:pid:random).
	Owner string
	// Every is the period of the sweep's entry on the schedule (default DefaultSweepEvery):
	// everyone's due jobs, whoever else claims them (OWED_SWEEP_EVERY).
	Every time.Duration
	// ModelConcurrency caps the model calls in flight in this process, for every claimer
	// together; a score holds three (default DefaultModelConcurrency, at least ScoreRuns).
	ModelConcurrency int
	// ModelBreaker is how many consecutive model failures open the breaker
	// (default DefaultModelBreaker; negative: no breaker).
	ModelBreaker int
	// ReviewBelow is the review band per kind of item: a model verdict less confident than the
	// kind's value does not settle the item, which waits for a moderator (why review; see
	// models.EnterReview). Zero or absent: every verdict settles (OWED_REVIEW_BELOW).
	ReviewBelow map[models.Kind]float64
}

// The content jobs' defaults, taken by ContentConfig's zero fields; owed's settings
// (OWED_MODEL_NAME, OWED_SWEEP_CONCURRENCY, OWED_MODEL_CONCURRENCY,
// OWED_MODEL_BREAKER) default to them.
const (
	DefaultModelName        = "critic"
	DefaultConcurrency      = 64
	DefaultModelConcurrency = 16
	DefaultModelBreaker     = 10
)

func (c *ContentConfig) applyDefaults() {
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.ModelName == "" {
		c.ModelName = DefaultModelName
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Owner == "" {
		c.Owner = models.NewLeaseOwner()
	}
	if c.Every <= 0 {
		c.Every = DefaultSweepEvery
	}
	if c.ModelConcurrency <= 0 {
		c.ModelConcurrency = DefaultModelConcurrency
	}
	c.ModelConcurrency = max(c.ModelConcurrency, ScoreRuns)
	if c.ModelBreaker == 0 {
		c.ModelBreaker = DefaultModelBreaker
	}
}

// Content runs content jobs. Its background work (the periodic sweep, inline screens that
// outlive their request, scores after a write, authors' sweeps) runs under one runner, so Stop
// can wait for it and then free the leases still held.
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
	sweep  *loop // the periodic sweep of everyone's due jobs

	mu      sync.Mutex
	authors map[int64]bool // authors whose background sweep is running
	// authorSweeps counts the author sweeps started (AuthorSweeps).
	authorSweeps atomic.Int64
}

// NewContent makes the content-jobs runner.
func NewContent(store *models.Store, model *modelclient.Client, clk clock.Clock, log *slog.Logger, m *metrics.Metrics, cfg ContentConfig) *Content {
	cfg.applyDefaults()
	if clk == nil {
		clk = clock.Real{}
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Content{store: store, model: model, clock: clk, log: log, metrics: m, cfg: cfg, authors: map[int64]bool{}}
	c.runner = newRunner("content jobs", log, func(ctx context.Context) (int64, error) {
		return store.ReleaseLeases(ctx, cfg.Owner)
	})
	c.sweep = newLoop("sweep", c.sweepAll)
	c.gate = NewGate(cfg.ModelConcurrency)
	if m != nil {
		m.ModelInFlight.Set(0)
		c.gate.onUse = func(used int) { m.ModelInFlight.Set(float64(used)) }
	}
	c.breaker = &breaker{store: store, clock: clk, log: log, metrics: m, threshold: max(cfg.ModelBreaker, 0),
		lease: cfg.Lease, owner: cfg.Owner, row: models.Breaker{State: models.BreakerClosed}}
	return c
}

// ModelProblem says why no model is asked ("" when one is configured): "no model configured",
// or the refused configuration. Jobs then wait as unreachable with that error.
func (c *Content) ModelProblem() string {
	if c.model == nil {
		return modelclient.ErrNotConfigured
	}
	return c.model.Unconfigured()
}

// Config is the runner's configuration with defaults applied.
func (c *Content) Config() ContentConfig { return c.cfg }

// Run runs one claimed job to its end or its next attempt, waiting for its model slots as the
// periodic sweep does. An error means the job could not be run at all (a request the model client
// would refuse, or the database failing): the job keeps its lease until it runs out and is
// then due again.
func (c *Content) Run(ctx context.Context, job models.Job) (Outcome, error) {
	return c.run(ctx, job, PrioritySweep, 0)
}

// run is Run for a claimer of priority prio that already holds held model slots for the job
// (given back, or kept for the call, whatever the outcome).
func (c *Content) run(ctx context.Context, job models.Job, prio Priority, held int) (Outcome, error) {
	defer func() { c.gate.Release(held) }()
	t := c.taskFor(job)
	runs := t.calls()
	ev := t.event()
	later := func(why models.Why, wait time.Duration, status int, upstreamMs *int64) (Outcome, error) {
		return c.reschedule(ctx, job, &ev, why, wait, status, upstreamMs)
	}

	// What to ask: the item as it is now.
	if ok, err := t.subject(ctx); err != nil {
		return Pending, err
	} else if !ok {
		return Gone, nil // deleted since; its trigger took the job too
	}

	if problem := c.ModelProblem(); problem != "" {
		ev.Error = errorText(problem)
		return later(models.WhyUnreachable, Backoff(job.Attempts), 0, nil)
	}

	// The ask ends before the lease does (OWED_MODEL_TIMEOUT may be as long as OWED_LEASE), so no
	// other worker can claim the job while this one still waits for the model.
	askCtx, cancelAsk := c.withinLease(ctx, job)
	defer cancelAsk()

	// The breaker and the cap come before the charge: a job that is not asked is not charged.
	p, out, err := c.enter(askCtx, ctx, job, prio, &held, runs)
	if p == nil {
		return out, err
	}

	// Charged first, as the model's relay charges: a call that then fails is still spent.
	now := c.clock.Now()
	if _, ok, err := c.store.Charge(ctx, job.UserID, int64(runs), now); err != nil {
		c.breaker.giveUp(ctx, *p)
		c.log.Error("budget", "op", "charge", "userId", job.UserID, "err", err)
		ev.Error = errorText("the author's budget could not be counted")
		return later(models.WhyBudgetUnavailable, Backoff(job.Attempts), 0, nil)
	} else if !ok {
		c.breaker.giveUp(ctx, *p)
		if c.metrics != nil {
			c.metrics.BudgetRefusals.Inc()
		}
		ev.Error = errorText(fmt.Sprintf("the author's budget for today cannot cover %d more model call(s); it resets at 00:00 UTC", runs))
		return later(models.WhyBudget, models.BudgetReset(now).Sub(now), 0, nil)
	}

	reply := t.ask(askCtx, c.model)
	// The breaker hears of the reply while the job still holds its slots: a job that takes a
	// freed slot then consults a breaker that already counts this failure, so the calls made
	// before it opens stay within its threshold and the cap.
	stopping := reply.Why != "" && ctx.Err() != nil
	if !stopping {
		c.breaker.report(ctx, *p, reply)
	}
	c.gate.Release(held) // the call is over: its slots go to the next job before this one records
	held = 0
	if c.metrics != nil {
		c.metrics.ModelLatency.WithLabelValues(string(ev.Event)).Observe(float64(reply.UpstreamMs) / 1000)
	}
	if reply.Why != "" {
		return c.unanswered(ctx, job, &ev, *p, reply)
	}
	status := reply.Status
	upstreamMs := reply.UpstreamMs
	bytes := int64(reply.RequestBytes)
	ev.Status, ev.UpstreamMs, ev.RequestBytes = &status, &upstreamMs, &bytes

	out, lack, err := t.record(ctx, reply, &ev)
	if err != nil {
		return Pending, err
	}
	if lack != "" {
		ev.Error = errorText(lack)
		return later(models.WhyUnanswered, Backoff(job.Attempts), status, &upstreamMs)
	}
	if out == Done || (ev.Why != nil && *ev.Why == models.WhyReview) {
		c.note(ev)
	}
	return out, nil
}

// reschedule puts the job off by wait with ev, the attempt's event, as pending for why (with
// the model's status, when not 0, and its time, when known).
func (c *Content) reschedule(ctx context.Context, job models.Job, ev *models.Event, why models.Why, wait time.Duration, status int, upstreamMs *int64) (Outcome, error) {
	ev.Outcome, ev.Why, ev.UpstreamMs = models.OutcomePending, &why, upstreamMs
	var st *int
	if status != 0 {
		st = &status
		ev.Status = st
	}
	at := c.clock.Now().Add(wait)
	ok, err := c.store.Reschedule(ctx, job, at, why, st, *ev)
	if err != nil {
		return Pending, fmt.Errorf("reschedule %s job %d: %w", job.Task, job.ID, err)
	}
	if ok {
		c.note(*ev, slog.Time("nextAttemptAt", at))
	}
	return Pending, nil
}

// unanswered ends an ask the model did not answer (reply.Why is set). Stopping, not failing,
// lets the job go for another worker without an attempt; otherwise (the breaker has heard of
// the failure) the job is put off by its backoff, or longer when the model asked for it.
func (c *Content) unanswered(ctx context.Context, job models.Job, ev *models.Event, p pass, reply modelclient.Reply) (Outcome, error) {
	if ctx.Err() != nil {
		c.breaker.giveUp(ctx, p)
		return Pending, errors.Join(ctx.Err(), c.store.ReleaseJob(context.WithoutCancel(ctx), job))
	}
	// run has reported the reply to the breaker already, while the job held its slots.
	ev.Error = errorText(reply.Error)
	upstreamMs := reply.UpstreamMs
	return c.reschedule(ctx, job, ev, models.Why(reply.Why), max(Backoff(job.Attempts), reply.RetryAfter), reply.Status, &upstreamMs)
}

// errorText is an attempt's error as kept: nil when empty, else at most
// modelclient.MaxErrorChars characters.
func errorText(s string) *string {
	if s == "" {
		return nil
	}
	s = modelclient.Truncate(s, modelclient.MaxErrorChars)
	return &s
}

// withinLease bounds ctx to the end of the job's lease less a tenth of the lease, which is kept
// for recording the outcome: past it, the ask is given up on as unreachable.
func (c *Content) withinLease(ctx context.Context, job models.Job) (context.Context, context.CancelFunc) {
	if job.LeaseUntil == nil {
		return ctx, func() {}
	}
	left := job.LeaseUntil.Sub(c.clock.Now()) - c.cfg.Lease/10
	return context.WithTimeout(ctx, max(left, 0))
}

// enter is the gate before the charge: the breaker's leave to ask (else the job is put off
// until the next probe, neither charged nor counted as an attempt) and then the job's model
// slots at its claimer's priority, waited for within the lease (askCtx; else the job is let go
// unasked, for any worker to take again). *held is the slots the claimer took for the job;
// enter keeps them for the call or gives them back. A nil pass means the job is not asked, and
// out and err are run's result.
func (c *Content) enter(askCtx, ctx context.Context, job models.Job, prio Priority, held *int, runs int) (*pass, Outcome, error) {
	adm, err := c.breaker.admit(ctx, job)
	if err != nil {
		return nil, Pending, fmt.Errorf("model breaker, job %d: %w", job.ID, err)
	}
	if adm.park {
		c.gate.Release(*held)
		*held = 0
		if _, err := c.store.ParkJob(ctx, job, adm.at); err != nil {
			return nil, Pending, err
		}
		c.log.Debug("put off until the model's probe", "jobId", job.ID, "why", adm.why, "nextAttemptAt", adm.at)
		return nil, Pending, nil
	}
	p := adm.pass
	if *held < runs {
		// Never wait holding part of a job's slots: two scores each holding one of the last
		// slots would wait for each other for ever.
		c.gate.Release(*held)
		*held = 0
		if err := c.gate.Acquire(askCtx, prio, runs); err != nil {
			c.breaker.giveUp(ctx, p)
			if ctx.Err() != nil {
				return nil, Pending, errors.Join(ctx.Err(), c.store.ReleaseJob(context.WithoutCancel(ctx), job))
			}
			return nil, Pending, errors.Join(fmt.Errorf("job %d: %w", job.ID, errNoSlot), c.store.ReleaseJob(ctx, job))
		}
		*held = runs
		if p.probe == "" {
			// The breaker again, now that the slots are held: it may have opened while this job
			// waited for them (the calls that held them failing), and a job admitted while it
			// was closed must not call after it opened.
			if parked, err := c.recheck(ctx, job, held, &p); parked {
				return nil, Pending, err
			}
		}
	} else if *held > runs {
		c.gate.Release(*held - runs)
		*held = runs
	}
	p.slots = runs
	return &p, Pending, nil
}

// recheck consults the breaker once more for a job that holds its slots and was admitted while
// the breaker was closed. Still closed, or now with its probe due and claimed by this job
// (*p becomes the probe's pass), the job asks; otherwise it gives its slots back and is put
// off until the next probe, and it answers true.
func (c *Content) recheck(ctx context.Context, job models.Job, held *int, p *pass) (bool, error) {
	adm, err := c.breaker.admit(ctx, job)
	if err != nil {
		c.gate.Release(*held)
		*held = 0
		return true, fmt.Errorf("model breaker, job %d: %w", job.ID, err)
	}
	if !adm.park {
		*p = adm.pass
		return false, nil
	}
	c.gate.Release(*held)
	*held = 0
	if _, err := c.store.ParkJob(ctx, job, adm.at); err != nil {
		return true, err
	}
	c.log.Debug("put off until the model's probe", "jobId", job.ID, "why", adm.why, "nextAttemptAt", adm.at)
	return true, nil
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
	if ev.Status != nil {
		attrs = append(attrs, slog.Int("status", *ev.Status))
	}
	if ev.UpstreamMs != nil {
		attrs = append(attrs, slog.Int64("upstreamMs", *ev.UpstreamMs))
	}
	if ev.Confidence != nil {
		attrs = append(attrs, slog.Float64("confidence", *ev.Confidence))
	}
	if ev.Art != nil {
		attrs = append(attrs, slog.Float64("art", *ev.Art))
	}
	if ev.RequestBytes != nil {
		attrs = append(attrs, slog.Int64("requestBytes", *ev.RequestBytes))
	}
	if ev.Runs != nil {
		attrs = append(attrs, slog.Int("runs", *ev.Runs))
	}
	if ev.Error != nil {
		attrs = append(attrs, slog.String("error", *ev.Error))
	}
	attrs = append(attrs, extra...)
	c.log.LogAttrs(context.Background(), slog.LevelInfo, string(ev.Event), attrs...)
}

// runClaimed runs a claimed job, logging an error instead of returning it: a job that errors
// keeps its lease until it runs out and is then due again.
func (c *Content) runClaimed(ctx context.Context, job models.Job, prio Priority, held int) Outcome {
	out, err := c.run(ctx, job, prio, held)
	if err != nil && ctx.Err() == nil {
		c.log.Error("content job", "task", job.Task, "kind", job.Kind, "itemId", job.ItemID, "jobId", job.ID, "err", err)
	}
	return out
}

// Sweep claims and runs due jobs (one author's when userID is non-zero) until none is due,
// at most cfg.Concurrency at once, and returns how many it ran. Jobs it reschedules are not
// due again within the same sweep, so it ends; jobs its own work makes due (an allowed
// revision's score) are run by it too.
//
// It claims no more jobs than there are model slots free for it (an author's sweep before the
// periodic sweep's): a job that would only wait for a slot is left unclaimed, for a replica with
// room to take, instead of waiting out its lease here. While the model's breaker is open it
// puts every due job off until the next probe in one statement.
func (c *Content) Sweep(ctx context.Context, userID int64) (int, error) {
	prio := PrioritySweep
	if userID != 0 {
		prio = PriorityAuthor
	}
	return pool[models.Job]{slots: c.cfg.Concurrency, quit: c.runner.quit,
		claim: func(ctx context.Context, free int) ([]models.Job, int, error) {
			if err := c.parkDue(ctx, userID); err != nil {
				return nil, 0, err
			}
			slots, err := c.gate.AcquireUpTo(ctx, prio, free)
			if err != nil {
				return nil, 0, err
			}
			jobs, err := c.store.ClaimDue(ctx, slots, c.cfg.Lease, c.cfg.Owner, userID)
			c.gate.Release(slots - len(jobs))
			if err != nil {
				return nil, 0, fmt.Errorf("claim content jobs: %w", err)
			}
			return jobs, len(jobs), nil
		},
		run: func(ctx context.Context, job models.Job) { c.runClaimed(ctx, job, prio, 1) },
	}.drain(ctx)
}

// sweepAll is the periodic sweep's pass: everyone's due jobs.
func (c *Content) sweepAll(ctx context.Context) error {
	n, err := c.Sweep(ctx, 0)
	if n > 0 {
		c.log.Debug("sweep", "ran", n)
	}
	return err
}

// parkDue puts every due job (one author's when userID is non-zero) off until the next probe
// when the breaker is open and its probe is not due; with the probe due, jobs are claimed as
// usual and the first of them probes.
func (c *Content) parkDue(ctx context.Context, userID int64) error {
	row, err := c.breaker.state(ctx)
	if err != nil || row.State == models.BreakerClosed {
		return err
	}
	a := parkFor(row, c.clock.Now())
	now := c.clock.Now()
	if (row.State == models.BreakerOpen && row.NextProbeAt != nil && !row.NextProbeAt.After(now)) ||
		(row.State == models.BreakerProbing && row.ProbeUntil != nil && !row.ProbeUntil.After(now)) {
		return nil
	}
	n, err := c.store.ParkDue(ctx, a.at, userID)
	if n > 0 {
		c.log.Debug("put off until the model's probe", "jobs", n, "nextAttemptAt", a.at)
	}
	return err
}

// Start runs the sweep's loop in the background until ctx ends or Stop: a sweep at once (so
// work owed from before a restart does not wait a period), then one each time it is woken
// (Wake, or its entry on the schedule: ScheduleOn).
func (c *Content) Start(ctx context.Context) error { return c.runner.start(ctx, c.sweep) }

// ScheduleOn adds the sweep's entry to s: "content sweep", every ContentConfig.Every
// (OWED_SWEEP_EVERY), waking the sweep unless one is under way.
func (c *Content) ScheduleOn(s *Schedule) error {
	return s.Every("content sweep", c.cfg.Every, c.sweep.tick)
}

// Wake makes the sweep run now instead of at its next entry.
func (c *Content) Wake() { c.sweep.Wake() }

// Go runs fn in the background under the runner's lifetime, unless it is stopping.
func (c *Content) Go(fn func(ctx context.Context)) bool { return c.runner.Go(fn) }

// SweepAuthor starts a background sweep of one author's due jobs unless one is already
// running for them; it never blocks the caller.
func (c *Content) SweepAuthor(userID int64) {
	c.mu.Lock()
	if c.authors[userID] {
		c.mu.Unlock()
		return
	}
	c.authors[userID] = true
	c.mu.Unlock()
	c.authorSweeps.Add(1)
	started := c.Go(func(ctx context.Context) {
		defer func() {
			c.mu.Lock()
			delete(c.authors, userID)
			c.mu.Unlock()
		}()
		if _, err := c.Sweep(ctx, userID); err != nil && ctx.Err() == nil {
			c.log.Error("author sweep", "userId", userID, "err", err)
		}
	})
	if !started {
		c.authorSweeps.Add(-1)
		c.mu.Lock()
		delete(c.authors, userID)
		c.mu.Unlock()
	}
}

// AuthorSweeps is how many author sweeps SweepAuthor has started in this process. SweepAuthor
// starts its sweep before it returns, so once a view has answered, this tells a view that
// started no sweep from one whose sweep found nothing, with nothing to wait for.
func (c *Content) AuthorSweeps() int64 { return c.authorSweeps.Load() }

// RunItem claims and runs the job of one item's task in the background, and returns a channel
// that receives its outcome (closed without a value when the job was not due or not free).
// The job goes on after the caller stops waiting.
func (c *Content) RunItem(task models.Task, kind models.Kind, itemID int64) <-chan Outcome {
	done := make(chan Outcome, 1)
	started := c.Go(func(ctx context.Context) {
		defer close(done)
		job, ok, err := c.store.ClaimItem(ctx, task, kind, itemID, c.cfg.Lease, c.cfg.Owner)
		if err != nil {
			c.log.Error("claim item", "task", task, "kind", kind, "itemId", itemID, "err", err)
			return
		}
		if !ok {
			return
		}
		out := c.runClaimed(ctx, job, PriorityInline, 0)
		done <- out
		if task == models.TaskScreen && kind == models.KindRevision && out == Done {
			// An allowed revision now owes its score; it follows in the background.
			c.RunItem(models.TaskScore, models.KindRevision, itemID)
		}
	})
	if !started {
		close(done)
	}
	return done
}

// Stop lets background work finish until ctx ends (sweeps claim nothing more), then cancels what
// is still running and frees every lease this process holds, so its jobs are due again at once.
func (c *Content) Stop(ctx context.Context) error { return c.runner.Stop(ctx) }
