package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/owed/owed/models"
)

// endKind is how a run of a claimed job ends; Content.finish records exactly one thing for
// each ending (docs/architecture.md, "How a job ends").
type endKind int

const (
	endRecorded endKind = iota // the task recorded the answer itself, or found the item gone
	endAttempt                 // an attempt that leaves the job owed, with its why and wait
	endRelease                 // let go unattempted, due at once: stopping, or the lease ran out
	// endPutOff: put off unattempted and uncharged, until the breaker's probe, or (a held
	// task) with its lease freed and its due time kept.
	endPutOff
)

// ending is how one run ended: what finish records.
type ending struct {
	kind endKind
	out  Outcome // endRecorded: Done or Gone (Pending for a review entry)

	// endAttempt
	why        models.Why
	wait       time.Duration
	status     int    // the model's HTTP status, 0 when none
	upstreamMs *int64 // the model's time, when it was asked
	text       string // the attempt's error in words, kept with the job and its event

	at time.Time // endPutOff: until when; zero for a held task

	cause error // what went wrong, for the log (never shown: text is what is kept)
}

func recorded(out Outcome) ending { return ending{kind: endRecorded, out: out} }

func attempt(why models.Why, wait time.Duration, text string) ending {
	return ending{kind: endAttempt, why: why, wait: wait, text: text}
}

func release(cause error) ending { return ending{kind: endRelease, cause: cause} }

func (e ending) because(cause error) ending { e.cause = cause; return e }

// failed is the ending of a step that returned err: a shutdown is a release, a refusal an
// attempt with why refused, anything else the database failing (why unavailable; logged only).
func (c *Content) failed(ctx context.Context, job models.Job, what string, err error) ending {
	if ctx.Err() != nil {
		return release(errors.Join(ctx.Err(), err))
	}
	var r *refusal
	if errors.As(err, &r) {
		return attempt(models.WhyRefused, Backoff(job.Attempts), "refused before sending: "+r.Error()).because(err)
	}
	return attempt(models.WhyUnavailable, Backoff(job.Attempts), "the database failed: "+what).because(fmt.Errorf("%s: %w", what, err))
}

// run runs a claimed job holding its model slots (given back whatever happens) to its ending,
// and records it; ev is the attempt's event as recorded.
func (c *Content) run(ctx context.Context, l leased) (Outcome, models.Event, error) {
	defer l.slots.release()
	job := l.job
	ev := attemptEvent(job, job.Task)
	e := c.steps(ctx, job, l.claimed, l.slots, &ev)
	out, err := c.finish(ctx, job, &ev, e)
	return out, ev, err
}

// steps does a claimed job's work up to its ending: the item, the holds, the breaker, the
// charge, the ask and the task's record.
func (c *Content) steps(ctx context.Context, job models.Job, claimed time.Time, s *slots, ev *models.Event) ending {
	live, err := c.live(ctx)
	if err != nil {
		return c.failed(ctx, job, "read the live model", err)
	}
	t, err := c.taskFor(job, live)
	if err != nil {
		return c.failed(ctx, job, "", err)
	}
	*ev = t.event()

	if ok, err := t.subject(ctx); err != nil {
		return c.failed(ctx, job, "read the item", err)
	} else if !ok {
		return recorded(Gone) // deleted since; its trigger took the job too
	}

	if problem := live.problem(); problem != "" {
		return attempt(models.WhyUnreachable, Backoff(job.Attempts), problem)
	}

	// The ask ends before the lease does, so no other worker claims the job meanwhile.
	askCtx, cancelAsk, ok := c.withinLease(ctx, job)
	defer cancelAsk()
	if !ok {
		return release(errLeaseOver)
	}

	// A hold set since the claim: the job is not charged or asked while it lasts.
	if held, err := c.held(ctx, job.Task, claimed); err != nil {
		return c.failed(ctx, job, "read the holds", err)
	} else if held {
		return ending{kind: endPutOff, why: models.WhyHeld}
	}

	// The breaker, now the job holds its slots: it may have opened while they were waited for.
	adm, err := c.breaker.admit(ctx, job)
	if err != nil {
		return c.failed(ctx, job, "read the model's breaker", err)
	}
	if adm.park {
		return ending{kind: endPutOff, at: adm.at, why: adm.why}
	}
	p := adm.pass
	asked := false
	defer func() {
		if !asked {
			c.breaker.giveUp(ctx, p) // a probe that made no call
		}
	}()

	if e, ok := c.charge(ctx, job, t); !ok {
		return e
	}

	asked = true
	c.calling(int64(callsOf(job.Task)))
	reply := t.ask(askCtx, live.client)
	c.calling(-int64(callsOf(job.Task)))
	// The breaker hears of the reply while the job holds its slots, so a job taking a freed
	// slot sees a breaker that counts this failure.
	if reply.Why != "" && ctx.Err() != nil {
		c.breaker.giveUp(ctx, p) // stopping, not failing: the model is not to blame
		return release(ctx.Err())
	}
	c.breaker.report(ctx, p, reply)
	s.release() // the call is over: its slots go to the next job before this one records
	if c.metrics != nil {
		c.metrics.ModelLatency.WithLabelValues(string(ev.Event)).Observe(float64(reply.UpstreamMs) / 1000)
	}
	status, upstreamMs := reply.Status, reply.UpstreamMs
	answered := func(e ending) ending {
		e.status, e.upstreamMs = status, &upstreamMs
		return e
	}
	if reply.Why != "" {
		return answered(attempt(models.Why(reply.Why), max(Backoff(job.Attempts), reply.RetryAfter), reply.Error))
	}
	bytes := int64(reply.RequestBytes)
	ev.Status, ev.UpstreamMs, ev.RequestBytes = &status, &upstreamMs, &bytes
	out, lack, err := t.record(ctx, reply, ev)
	if err != nil {
		return answered(c.failed(ctx, job, "record the answer", err))
	}
	if lack != "" {
		return answered(attempt(models.WhyUnanswered, Backoff(job.Attempts), lack))
	}
	return recorded(out)
}

// charge spends the job's model calls of its author's budget for today before the ask (a
// failed call is still spent); when refused or uncountable, ok is false and e is the ending.
func (c *Content) charge(ctx context.Context, job models.Job, t task) (e ending, ok bool) {
	if u, is := t.(unchargedTask); is && u.uncharged() {
		return ending{}, true
	}
	runs := callsOf(job.Task)
	now := c.clock.Now()
	_, ok, err := c.store.Charge(ctx, job.UserID, int64(runs), now)
	switch {
	case err != nil && ctx.Err() != nil:
		return release(errors.Join(ctx.Err(), err)), false
	case err != nil:
		return attempt(models.WhyBudgetUnavailable, Backoff(job.Attempts), "the author's budget could not be counted").because(err), false
	case !ok:
		if c.metrics != nil {
			c.metrics.BudgetRefusals.Inc()
		}
		return attempt(models.WhyBudget, models.BudgetReset(now).Sub(now),
			fmt.Sprintf("the author's budget for today cannot cover %d more model call(s); it resets at 00:00 UTC", runs)), false
	}
	return ending{}, true
}

// finish records how a run ended, e: the one completion path of a job. An error means nothing
// could be recorded: the job is due again once its lease runs out.
func (c *Content) finish(ctx context.Context, job models.Job, ev *models.Event, e ending) (Outcome, error) {
	switch e.kind {
	case endRecorded:
		if e.out == Done || (ev.Why != nil && *ev.Why == models.WhyReview) {
			c.note(*ev)
		}
		return e.out, nil
	case endAttempt:
		if e.cause != nil {
			c.log.Error("content job", "task", job.Task, "kind", job.Kind, "itemId", job.ItemID, "jobId", job.ID,
				"why", e.why, "err", e.cause)
		}
		return c.reschedule(ctx, job, ev, e)
	case endPutOff:
		if e.at.IsZero() {
			return Pending, c.store.ReleaseLease(ctx, models.LeasedJobs, job.ID, job.LeaseOwner, job.LeaseUntil) // held: due at its own time once lifted
		}
		if _, err := c.store.ParkJob(ctx, job, e.at); err != nil {
			return Pending, err
		}
		c.log.Debug("put off until the model's probe", "jobId", job.ID, "why", e.why, "nextAttemptAt", e.at)
		return Pending, nil
	default: // endRelease
		err := c.store.ReleaseLease(context.WithoutCancel(ctx), models.LeasedJobs, job.ID, job.LeaseOwner, job.LeaseUntil)
		if ctx.Err() == nil {
			c.log.Info("content job let go unasked", "task", job.Task, "jobId", job.ID, "cause", e.cause)
		}
		return Pending, err
	}
}

// reschedule records an attempt that leaves the job owed, due again after e.wait; a job
// another worker holds by now is left to it.
func (c *Content) reschedule(ctx context.Context, job models.Job, ev *models.Event, e ending) (Outcome, error) {
	why := e.why
	ev.Outcome, ev.Why, ev.UpstreamMs, ev.Error = models.OutcomePending, &why, e.upstreamMs, errorText(e.text)
	ev.Status = nonZero(e.status)
	at := c.clock.Now().Add(e.wait)
	ok, err := c.store.Reschedule(ctx, job, at, why, ev.Status, *ev)
	if err != nil {
		return Pending, fmt.Errorf("reschedule %s job %d: %w", job.Task, job.ID, err)
	}
	if ok {
		c.note(*ev, slog.Time("nextAttemptAt", at))
	} else {
		c.log.Info("content job lost its lease before its attempt was recorded", "task", job.Task, "jobId", job.ID, "why", why)
	}
	return Pending, nil
}

// errLeaseOver is the cause of a job let go unasked because its lease had run out.
var errLeaseOver = errors.New("the job's lease ran out before it was asked")

// holdsFresh is how long a process trusts its last read of the holds or the model settings.
const holdsFresh = time.Second

// recentRead keeps the last read of a row every job consults, shared for holdsFresh.
type recentRead[T any] struct {
	mu sync.Mutex
	v  T
	at time.Time // real time of the read; zero: never, or forgotten
}

// get is the last read if it is younger than holdsFresh and was made after since (real time),
// else a new one by read.
func (r *recentRead[T]) get(ctx context.Context, since time.Time, read func(context.Context) (T, error)) (T, error) {
	r.mu.Lock()
	v, at := r.v, r.at
	r.mu.Unlock()
	if !at.IsZero() && at.After(since) && time.Since(at) < holdsFresh {
		return v, nil
	}
	now := time.Now()
	v, err := read(ctx)
	if err != nil {
		return v, err
	}
	r.mu.Lock()
	r.v, r.at = v, now
	r.mu.Unlock()
	return v, nil
}

// forget makes the next get read again.
func (r *recentRead[T]) forget() {
	r.mu.Lock()
	r.at = time.Time{}
	r.mu.Unlock()
}

// held reports whether an admin holds task, for a job claimed at claimed (real time; zero:
// read anew); a read from before the claim is never trusted.
func (c *Content) held(ctx context.Context, task models.Task, claimed time.Time) (bool, error) {
	if claimed.IsZero() {
		claimed = time.Now()
	}
	h, err := c.holds.get(ctx, claimed, c.store.Holds)
	return h.Task(task), err
}
