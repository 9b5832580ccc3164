package scheduler

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
)

// The candidate's defaults: its model calls per UTC day (OWED_SHADOW_DAILY_LIMIT), and its
// calls in flight per process (one score's runs).
const (
	DefaultShadowDailyLimit  = 1000
	DefaultShadowConcurrency = ScoreRuns
)

// ShadowConfig is the candidate (docs/shadow.md): a model or a rubric asked beside the live
// ones for every live verdict and score that settles, its answers recorded and never acted on.
type ShadowConfig struct {
	Model       *modelclient.Client // the candidate's client (the live model's address when only the rubric differs)
	Name        string              // the candidate model's name, kept with its answers
	API         string              // the candidate model's dialect, as shown
	Rubric      string              // the candidate's rubric for scores (a key of Rubrics)
	Screens     bool                // the candidate is a model of its own: its verdicts are shadowed too
	DailyLimit  int64               // calls per UTC day, charged to no author (DefaultShadowDailyLimit)
	Concurrency int                 // calls in flight in this process (DefaultShadowConcurrency, at least ScoreRuns)
}

// ModelInfo names a model, its dialect and the rubric its scores are made under.
type ModelInfo struct{ Model, API, Rubric string }

// Configured is the configured live model (OWED_MODEL_*) and rubric.
func (c *Content) Configured() ModelInfo {
	return ModelInfo{Model: c.cfg.ModelName, API: c.cfg.ModelAPI, Rubric: RubricID}
}

// Candidate is the candidate as configured; ok is false when none is.
func (c *Content) Candidate() (info ModelInfo, dailyLimit int64, ok bool) {
	if c.shadow == nil {
		return ModelInfo{}, 0, false
	}
	sh := c.shadow.cfg
	return ModelInfo{Model: sh.Name, API: sh.API, Rubric: sh.Rubric}, sh.DailyLimit, true
}

// Candidate is the candidate's name as the database keeps it: "model rubric".
func (s ShadowConfig) Candidate() string { return s.Name + " " + s.Rubric }

// shadow is the candidate's work: a loop claiming shadow jobs while no live job is due, behind
// the model cap at the lowest priority and its own cap, with its own in-process breaker.
type shadow struct {
	cfg  ShadowConfig
	gate *Gate // the candidate's own cap
	loop *loop

	mu        sync.Mutex
	failures  int       // consecutive failures of the candidate
	probes    int       // failed probes since the breaker opened
	openUntil time.Time // the candidate is not asked before then (zero: closed)
}

// The outcomes of shadow calls, as the metric counts them.
const (
	ShadowRecorded = "recorded" // the candidate's answer is kept
	ShadowFailed   = "failed"   // the candidate failed; the job waits out its backoff
	ShadowLimit    = "limit"    // the day's limit is spent; the job waits for 00:00 UTC
	ShadowGone     = "gone"     // the item or its live answer went; the job is dropped
	ShadowReleased = "released" // stopping: the job is let go unasked
)

// ShadowOutcomes lists the shadow calls' outcomes (the metric's label values).
var ShadowOutcomes = []string{ShadowRecorded, ShadowFailed, ShadowLimit, ShadowGone, ShadowReleased}

func newShadow(cfg ShadowConfig, pass func(ctx context.Context) error) *shadow {
	cfg.DailyLimit = positive(cfg.DailyLimit, DefaultShadowDailyLimit)
	cfg.Concurrency = max(cfg.Concurrency, ScoreRuns)
	return &shadow{cfg: cfg, gate: NewGate(cfg.Concurrency), loop: newLoop("shadow", pass)}
}

// report counts a reply: threshold failures in a row (0: never) open the candidate's breaker
// for probeBackoff; an answer closes it.
func (s *shadow) report(r modelclient.Reply, threshold int, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !failure(r) {
		s.failures, s.probes, s.openUntil = 0, 0, time.Time{}
		return
	}
	s.failures++
	if threshold <= 0 || s.failures < threshold {
		return
	}
	s.openUntil = now.Add(max(probeBackoff(s.probes), min(r.RetryAfter, probeMaxAfter)))
	s.probes++
}

// shadowLeased is a claimed shadow job with its slots of the model cap and of the candidate's.
type shadowLeased struct {
	job       models.Job
	main, own *slots
}

// SweepShadow claims and runs shadow jobs until none is due or a live job is (then it ends:
// live work first), and returns how many it ran; without a candidate it does nothing.
func (c *Content) SweepShadow(ctx context.Context) (int, error) {
	if c.shadow == nil {
		return 0, nil
	}
	return pool[shadowLeased]{slots: c.shadow.cfg.Concurrency, quit: c.runner.quit,
		claim: c.claimShadow,
		run:   func(ctx context.Context, l shadowLeased) { c.runShadow(ctx, l) },
	}.drain(ctx)
}

// claimShadow claims one shadow job, holding room for the costliest task in the candidate's
// cap and, at the lowest priority, in the model cap, and gives back what it does not need.
func (c *Content) claimShadow(ctx context.Context, _ int) ([]shadowLeased, int, error) {
	n := min(maxCalls, c.shadow.gate.Cap(), c.gate.Cap())
	if err := c.shadow.gate.Acquire(ctx, PrioritySweep, n); err != nil {
		return nil, 0, err
	}
	own := c.shadow.gate.hold(n)
	defer own.release() // what the job does not take
	if err := c.gate.Acquire(ctx, PriorityShadow, n); err != nil {
		return nil, 0, err
	}
	main := c.gate.hold(n)
	defer main.release()
	jobs, err := c.claimShadowJob(ctx)
	if err != nil || len(jobs) == 0 {
		return nil, 0, err
	}
	calls := jobs[0].Task.Calls()
	l := shadowLeased{job: jobs[0]}
	l.main, _ = main.take(calls)
	l.own, _ = own.take(calls)
	return []shadowLeased{l}, 1, nil
}

// claimShadowJob claims one shadow job unless the candidate's breaker or the live model's is
// open (asked with the slots held, so their calls have reported).
func (c *Content) claimShadowJob(ctx context.Context) ([]models.Job, error) {
	c.shadow.mu.Lock()
	open := c.clock.Now().Before(c.shadow.openUntil) // its probe not due yet
	c.shadow.mu.Unlock()
	if open {
		return nil, nil
	}
	if row, err := c.breaker.state(ctx); err != nil || row.State != models.BreakerClosed {
		return nil, err
	}
	return c.store.ClaimShadow(ctx, 1, c.cfg.Lease, c.cfg.Owner)
}

// runShadow runs a claimed shadow job to its end and counts it.
func (c *Content) runShadow(ctx context.Context, l shadowLeased) {
	defer l.main.release()
	defer l.own.release()
	out, err := c.shadowSteps(ctx, l)
	if err != nil {
		if ctx.Err() != nil {
			out = ShadowReleased
		} else {
			c.log.Error("shadow job", "task", l.job.Task, "kind", l.job.Kind, "itemId", l.job.ItemID, "jobId", l.job.ID, "err", err)
		}
	}
	if out == ShadowReleased {
		if err := c.store.ReleaseLease(context.WithoutCancel(ctx), models.LeasedShadow, l.job.ID, l.job.LeaseOwner, l.job.LeaseUntil); err != nil {
			c.log.Error("shadow job", "op", "let go", "jobId", l.job.ID, "err", err)
		}
	}
	if c.metrics != nil && out != "" {
		c.metrics.ShadowCalls.WithLabelValues(string(l.job.Task), out).Inc()
	}
	c.log.Debug("shadow job", "task", l.job.Task, "kind", l.job.Kind, "itemId", l.job.ItemID, "outcome", out)
}

// shadowSteps does a claimed shadow job's work: the item, the day's limit, the ask and the
// record. It returns the outcome (ShadowReleased: the caller lets the job go).
func (c *Content) shadowSteps(ctx context.Context, l shadowLeased) (string, error) {
	job, sh := l.job, c.shadow
	ask, ok, err := askFor(ctx, c.store, job.Task, job.Kind, job.ItemID, sh.cfg.Name, sh.cfg.Rubric)
	if err != nil {
		return ShadowReleased, err
	}
	if !ok {
		return ShadowGone, c.store.DropShadowJob(ctx, job)
	}
	now := c.clock.Now()
	if ok, err := c.store.ChargeShadow(ctx, int64(job.Task.Calls()), sh.cfg.DailyLimit, now); err != nil {
		return ShadowReleased, err
	} else if !ok {
		text := fmt.Sprintf("the candidate's %d calls of today are spent; it resets at 00:00 UTC", sh.cfg.DailyLimit)
		return ShadowLimit, c.store.RescheduleShadow(ctx, job, models.BudgetReset(now), models.WhyBudget, &text, false)
	}
	askCtx, cancel, ok := c.withinLease(ctx, job)
	defer cancel()
	if !ok {
		return ShadowReleased, nil
	}
	reply := ask.send(askCtx, sh.cfg.Model)
	if reply.Why != "" && ctx.Err() != nil {
		return ShadowReleased, nil
	}
	sh.report(reply, max(c.cfg.ModelBreaker, 0), c.clock.Now())
	l.main.release()
	l.own.release()
	if reply.Why == "" {
		recorded, lack, err := c.recordShadow(ctx, job, reply)
		switch {
		case err != nil:
			return ShadowReleased, err
		case lack == "" && recorded:
			return ShadowRecorded, nil
		case lack == "":
			return ShadowGone, nil
		}
		reply.Why, reply.Error = models.WhyUnanswered, lack
	}
	at := c.clock.Now().Add(max(Backoff(job.Attempts), reply.RetryAfter))
	return ShadowFailed, c.store.RescheduleShadow(ctx, job, at, reply.Why, errorText(reply.Error), true)
}

// recordShadow keeps the candidate's answer; lack says what an answer missed.
func (c *Content) recordShadow(ctx context.Context, job models.Job, reply modelclient.Reply) (recorded bool, lack string, err error) {
	sh := c.shadow.cfg
	if job.Task == models.TaskScreen {
		if reply.Verdict == nil {
			return false, "answer has no verdict", nil
		}
		recorded, err = c.store.RecordShadowScreen(ctx, job, sh.Name, models.Verdict(reply.Verdict.Verdict), reply.Verdict.Confidence)
		return recorded, "", err
	}
	if len(reply.Runs) != ScoreRuns {
		return false, fmt.Sprintf("answered %d run(s) of %d", len(reply.Runs), ScoreRuns), nil
	}
	mean := modelclient.Mean(reply.Runs)
	recorded, err = c.store.RecordShadowScore(ctx, job, sh.Name, sh.Rubric, mean.Art, mean.ArtRuns)
	return recorded, "", err
}

// liveModel is what live work asks: the configured model, or the candidate once promoted.
type liveModel struct {
	client       *modelclient.Client
	name, rubric string
}

// problem says why the live model is not asked ("" when it is configured).
func (l liveModel) problem() string {
	if l.client == nil {
		return modelclient.ErrNotConfigured
	}
	return l.client.Unconfigured()
}

// live is the live model now, from a read of the model settings at most holdsFresh old.
func (c *Content) live(ctx context.Context) (liveModel, error) {
	set, err := c.settings.get(ctx, time.Time{}, c.store.ReadModelSettings)
	if err != nil {
		return liveModel{}, err
	}
	return c.liveOf(set), nil
}

// LiveRubric is the live rubric now (see live): the one public lists put first.
func (c *Content) LiveRubric(ctx context.Context) (string, error) {
	l, err := c.live(ctx)
	return l.rubric, err
}

// ForgetLive makes the next job read the model settings (after a promotion or rollback here).
func (c *Content) ForgetLive() { c.settings.forget() }

// liveOf is the live model the settings make: the promoted candidate's name and rubric, asked
// at the candidate's address (the live one's when this process has none), or the configured.
func (c *Content) liveOf(set models.ModelSettings) liveModel {
	if !set.Promoted() {
		return liveModel{client: c.model, name: c.cfg.ModelName, rubric: RubricID}
	}
	l := liveModel{client: c.model, name: *set.LiveModel, rubric: RubricID}
	if set.LiveRubric != nil {
		l.rubric = *set.LiveRubric
	}
	if c.shadow != nil {
		l.client = c.shadow.cfg.Model
	}
	return l
}

// Live is the live model, its dialect and rubric as the settings make them (see liveOf).
func (c *Content) Live(set models.ModelSettings) ModelInfo {
	l, info := c.liveOf(set), c.Configured()
	if set.Promoted() && c.shadow != nil {
		info.API = c.shadow.cfg.API
	}
	info.Model, info.Rubric = l.name, l.rubric
	return info
}
