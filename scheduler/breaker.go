package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/owed/owed/clock"
	"github.com/owed/owed/metrics"
	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
)

// Probe backoff: the first probe 5 s after the breaker opens, then doubling to 5 minutes
// between probes. A Retry-After the model sent is honoured when longer, up to an hour (the
// longest a job's own backoff waits).
const (
	probeFirst    = 5 * time.Second
	probeMax      = 5 * time.Minute
	probeMaxAfter = time.Hour
)

// probeBackoff is the wait before the next probe after failed probes (0: the first).
func probeBackoff(failed int) time.Duration { return doubling(probeFirst, probeMax, failed) }

// probeDue reports whether an open breaker's probe, or a probing one's lapsed probe, is due.
func probeDue(row models.Breaker, now time.Time) bool {
	return (row.State == models.BreakerOpen && row.NextProbeAt != nil && !row.NextProbeAt.After(now)) ||
		(row.State == models.BreakerProbing && row.ProbeUntil != nil && !row.ProbeUntil.After(now))
}

// breakerFresh is how long a process trusts its last read of a closed breaker (an open one is
// read every time).
const breakerFresh = time.Second

// breaker counts consecutive model failures and keeps the shared breaker row (models.Breaker):
// opened by the process that counts OWED_MODEL_BREAKER failures in a row, probed by one job at
// a time across the replicas, closed by the first probe that gets an answer.
type breaker struct {
	store     *models.Store
	clock     clock.Clock
	log       *slog.Logger
	metrics   *metrics.Metrics
	threshold int // 0: no breaker
	lease     time.Duration
	owner     string

	mu       sync.Mutex
	row      models.Breaker
	readAt   time.Time // real time of the last read, for breakerFresh
	failures int       // this process's consecutive failures while closed
}

// nonZero is &v, or nil when v is 0.
func nonZero(v int) *int {
	if v == 0 {
		return nil
	}
	return &v
}

// failure says whether a reply counts against the model: no connection, a 5xx, or a 429. An
// answer that is not the expected JSON is the item's problem, not the model's.
func failure(r modelclient.Reply) bool {
	return r.Why == models.WhyUnreachable || (r.Why == models.WhyUpstream && (r.Status >= 500 || r.Status == 429))
}

// state is the breaker's row, from the cache while it is closed and fresh.
func (b *breaker) state(ctx context.Context) (models.Breaker, error) {
	if b.threshold <= 0 {
		return models.Breaker{State: models.BreakerClosed}, nil
	}
	b.mu.Lock()
	if b.row.State == models.BreakerClosed && time.Since(b.readAt) < breakerFresh {
		row := b.row
		b.mu.Unlock()
		return row, nil
	}
	b.mu.Unlock()
	row, err := b.store.ReadBreaker(ctx)
	if err != nil {
		return row, err
	}
	b.remember(row)
	return row, nil
}

// remember caches row as the breaker's state and shows it in the metrics.
func (b *breaker) remember(row models.Breaker) {
	b.mu.Lock()
	b.row, b.readAt = row, time.Now()
	if row.State != models.BreakerClosed {
		b.failures = 0
	}
	b.mu.Unlock()
	if b.metrics != nil {
		for _, s := range []string{models.BreakerClosed, models.BreakerOpen, models.BreakerProbing} {
			b.metrics.ModelBreaker.WithLabelValues(s).Set(boolGauge(s == row.State))
		}
	}
}

// forget makes the next state read the row.
func (b *breaker) forget() {
	b.mu.Lock()
	b.readAt = time.Time{}
	b.mu.Unlock()
}

// pass is a job's leave to ask the model: the probe it owns, if any.
type pass struct {
	probe      string // the probe's owner name; "" when not the probe
	probeUntil time.Time
	probes     int // failed probes before this one
}

// admission is the breaker's word on one job: ask (maybe as the probe), or park until at.
type admission struct {
	park   bool
	at     time.Time
	why    models.Why
	status *int
	pass   pass
}

// admit consults the breaker for job: closed, it may ask; open with its probe due, the one job
// that claims the probe asks; otherwise it waits for the next probe.
func (b *breaker) admit(ctx context.Context, job models.Job) (admission, error) {
	row, err := b.state(ctx)
	if err != nil {
		return admission{}, err
	}
	for range 2 {
		now := b.clock.Now()
		switch row.State {
		case models.BreakerClosed:
			return admission{}, nil
		case models.BreakerOpen, models.BreakerProbing:
			if probeDue(row, now) {
				owner := b.owner + ":" + strconv.FormatInt(job.ID, 10)
				until := now.Add(b.lease)
				claimed, ok, err := b.store.ClaimProbe(ctx, owner, until)
				if err != nil {
					return admission{}, err
				}
				if ok {
					b.remember(claimed)
					b.log.Info("model probe", "jobId", job.ID, "failedProbes", claimed.Probes)
					return admission{pass: pass{probe: owner, probeUntil: until, probes: claimed.Probes}}, nil
				}
				// Another job, here or on another replica, claimed it first: read what it left.
				if row, err = b.store.ReadBreaker(ctx); err != nil {
					return admission{}, err
				}
				b.remember(row)
				continue
			}
			return parkFor(row, now), nil
		default:
			return admission{}, fmt.Errorf("model breaker in an unknown state %q", row.State)
		}
	}
	return parkFor(row, b.clock.Now()), nil
}

// parkFor parks a job until the breaker's next probe, or the end of the one under way.
func parkFor(row models.Breaker, now time.Time) admission {
	a := admission{park: true, at: now.Add(probeFirst), why: models.WhyUnreachable, status: row.Status}
	if row.Why != nil {
		a.why = *row.Why
	}
	switch {
	case row.State == models.BreakerProbing && row.ProbeUntil != nil:
		a.at = *row.ProbeUntil
	case row.NextProbeAt != nil:
		a.at = *row.NextProbeAt
	}
	if !a.at.After(now) {
		// Due now but lost to another prober's claim that has since ended: try again shortly.
		a.at = now.Add(probeFirst)
	}
	return a
}

// report counts a call's reply: a probe's closes or reopens the breaker; failures open it.
func (b *breaker) report(ctx context.Context, p pass, r modelclient.Reply) {
	if b.threshold <= 0 {
		return
	}
	now := b.clock.Now()
	wait := min(r.RetryAfter, probeMaxAfter)
	failed := failure(r)
	if p.probe != "" {
		if failed {
			next := now.Add(max(probeBackoff(p.probes+1), wait))
			row, ok, err := b.store.ProbeFailed(ctx, p.probe, next, p.probeUntil, errorText(r.Error))
			if err != nil {
				b.log.Error("model breaker", "op", "probe failed", "err", err)
			} else if ok {
				b.remember(row)
				b.log.Warn("model probe failed", "why", r.Why, "status", r.Status, "nextProbeAt", next)
			}
			return
		}
		row, ok, err := b.store.CloseBreaker(ctx, p.probe, p.probeUntil)
		if err != nil {
			b.log.Error("model breaker", "op", "close", "err", err)
		} else if ok {
			b.remember(row)
			b.log.Info("model breaker closed: the probe got an answer")
		}
		return
	}
	b.mu.Lock()
	if !failed {
		b.failures = 0
		b.mu.Unlock()
		return
	}
	b.failures++
	n := b.failures
	closed := b.row.State == models.BreakerClosed
	b.mu.Unlock()
	if n < b.threshold || !closed {
		return
	}
	next := now.Add(max(probeFirst, wait))
	row, ok, err := b.store.OpenBreaker(ctx, n, models.Why(r.Why), nonZero(r.Status), errorText(r.Error), next)
	if err != nil {
		b.log.Error("model breaker", "op", "open", "err", err)
		return
	}
	if !ok {
		b.forget() // another replica changed it first
		return
	}
	b.remember(row)
	b.log.Warn("model breaker opened: the model is not asked until a probe gets an answer",
		"failures", n, "why", r.Why, "status", r.Status, "nextProbeAt", next)
}

// giveUp releases a probe that made no call.
func (b *breaker) giveUp(ctx context.Context, p pass) {
	if p.probe == "" {
		return
	}
	if err := b.store.ReleaseProbe(context.WithoutCancel(ctx), p.probe); err != nil {
		b.log.Error("model breaker", "op", "release probe", "err", err)
	}
	b.forget()
}

// ModelState is the model breaker and cap as GET /api/admin/model shows them.
type ModelState struct {
	State       string
	Since       *time.Time
	Failures    int
	NextProbeAt *time.Time // open: the next probe; probing: the end of the probe under way
	InFlight    int        // model calls this process's jobs are asking now (a score's runs count three)
	Cap         int
	// Why, Status and LastError are the failure that opened it (the last real error, kept
	// after it closes); nil when none is known.
	Why       *models.Why
	Status    *int
	LastError *string
}

// ModelState reads the breaker's shared state, with this process's calls in flight and cap.
// Failures is, while closed, this process's consecutive failures; while open, those that
// opened it and the failed probes since.
func (c *Content) ModelState(ctx context.Context) (ModelState, error) {
	c.breaker.forget()
	row, err := c.breaker.state(ctx)
	if err != nil {
		return ModelState{}, err
	}
	st := ModelState{State: row.State, Since: row.Since, Failures: row.Failures, InFlight: int(c.asking.Load()), Cap: c.gate.Cap(),
		Why: row.Why, Status: row.Status, LastError: row.LastError}
	switch row.State {
	case models.BreakerClosed:
		c.breaker.mu.Lock()
		st.Failures = c.breaker.failures
		c.breaker.mu.Unlock()
	case models.BreakerOpen:
		st.NextProbeAt = row.NextProbeAt
	case models.BreakerProbing:
		st.NextProbeAt = row.ProbeUntil
	}
	return st, nil
}
