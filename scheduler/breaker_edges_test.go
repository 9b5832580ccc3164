package scheduler_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/owed/owed/metrics"
	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
	"github.com/owed/owed/scheduler"
)

// Only a server error (500 and up) or a 429 counts against the model: any other 4xx answer is
// about the request, so however many come in a row the breaker stays closed.
func TestBreakerCountsServerErrorsAnd429Only(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		opens  bool
	}{{500, true}, {429, true}, {400, false}, {404, false}, {499, false}} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			owedtest.Dialects(t, func(t *testing.T, db string) {
				r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelBreaker = 2 }))
				p := r.pitch(r.user("ann"), "p")
				r.model.Fail(tc.status, nil)
				for range 2 {
					r.clk.Advance(time.Hour)
					r.exec(`UPDATE content_jobs SET due_at = ?`, r.nowMs())
					r.run(models.TaskScreen, models.KindPitch, p)
				}
				st := modelState(t, r.content)
				if tc.opens && (st.State != models.BreakerOpen || st.Status == nil || *st.Status != tc.status) {
					t.Fatalf("after two %d answers the breaker is %+v (status %s), want open with that status", tc.status, st, num(st.Status))
				}
				if !tc.opens && (st.State != models.BreakerClosed || st.Failures != 0) {
					t.Fatalf("after two %d answers the breaker is %+v (status %s), want closed with no failures counted", tc.status, st, num(st.Status))
				}
			})
		})
	}
}

// A negative OWED_MODEL_BREAKER turns the breaker off in this process: a shared row left open
// (by a replica or an earlier run that had one) does not stop it asking the model.
func TestBreakerOffIgnoresTheSharedRow(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelBreaker = -1 }))
		if _, ok, err := r.store.OpenBreaker(r.ctx, 10, models.WhyUpstream, ptr(503), nil, r.clk.Now().Add(time.Hour)); err != nil || !ok {
			t.Fatalf("open the shared breaker: ok=%v err=%v", ok, err)
		}
		p := r.pitch(r.user("ann"), "p")
		if out := r.run(models.TaskScreen, models.KindPitch, p); out != scheduler.Done || r.model.Calls() != 1 {
			t.Fatalf("with the breaker off: %s after %d calls, want done after one", out, r.model.Calls())
		}
		if st := modelState(t, r.content); st.State != models.BreakerClosed {
			t.Fatalf("with the breaker off the model state shows %+v, want closed (this process never waits on it)", st)
		}
	})
}

// A replica reads an open or probing breaker every time, never from its cache: the moment
// another replica's probe gets an answer and closes it, this one asks the model again.
func TestBreakerReplicaSeesAnotherClose(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelBreaker = 1 }))
		other := r.replica(t, "replica-2", nil)
		ann := r.user("ann")
		first, probe, after := r.pitch(ann, "first"), r.pitch(ann, "probe"), r.pitch(ann, "after")

		// This replica's failure opens the breaker.
		r.model.FailNext(1, 503, nil)
		r.run(models.TaskScreen, models.KindPitch, first)
		if st := modelState(t, r.content); st.State != models.BreakerOpen {
			t.Fatalf("after a failure with a threshold of 1 the breaker is %+v", st)
		}

		// The other replica's probe is under way (its call held) when this one reads the breaker.
		release := make(chan struct{})
		r.model.Handle(func(w http.ResponseWriter, req *http.Request) bool {
			<-release
			return false
		})
		r.clk.Advance(5 * time.Second)
		done := make(chan scheduler.Outcome, 1)
		go func() {
			j, ok, err := r.store.ClaimItem(r.ctx, models.TaskScreen, models.KindPitch, probe, time.Minute, "replica-2")
			if err != nil || !ok {
				t.Errorf("replica-2 claims the probe's job: ok=%v err=%v", ok, err)
				done <- scheduler.Outcome("no claim")
				return
			}
			out, err := other.Run(r.ctx, j)
			if err != nil {
				t.Error(err)
			}
			done <- out
		}()
		wait.Until(t, "the probe's call", func() bool { return r.model.InFlight() == 1 })
		if st := modelState(t, r.content); st.State != models.BreakerProbing {
			t.Fatalf("during the other replica's probe this one sees %+v", st)
		}
		close(release)
		if out := <-done; out != scheduler.Done {
			t.Fatalf("the probe: %s", out)
		}

		// At once, not a cache's lifetime later, this replica asks again.
		calls := r.model.Calls()
		if out := r.run(models.TaskScreen, models.KindPitch, after); out != scheduler.Done || r.model.Calls() != calls+1 {
			t.Fatalf("right after the other replica closed the breaker: %s, %d calls, want done with one", out, r.model.Calls()-calls)
		}
	})
}

// A replica's owed_model_breaker_state gauge shows the breaker as it last read the shared row:
// opened by another replica, it reads open here as soon as this one consults it for a job.
func TestBreakerGaugeFollowsTheSharedRow(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelBreaker = 1 }))
		m := metrics.New(nil)
		watched := r.replica(t, "replica-2", m)
		ann := r.user("ann")
		first, second := r.pitch(ann, "first"), r.pitch(ann, "second")
		r.model.FailNext(1, 503, nil)
		r.run(models.TaskScreen, models.KindPitch, first)

		j, ok, err := r.store.ClaimItem(r.ctx, models.TaskScreen, models.KindPitch, second, time.Minute, "replica-2")
		if err != nil || !ok {
			t.Fatalf("claim: ok=%v err=%v", ok, err)
		}
		if out, err := watched.Run(r.ctx, j); err != nil || out != scheduler.Pending {
			t.Fatalf("a job while the breaker is open: %s, %v; want pending", out, err)
		}
		if open, closed := breakerGauge(t, m, models.BreakerOpen), breakerGauge(t, m, models.BreakerClosed); open != 1 || closed != 0 {
			t.Fatalf("the replica's gauge: open %v, closed %v; want open 1, closed 0", open, closed)
		}
	})
}

// breakerGauge is owed_model_breaker_state{state} as m's registry serves it.
func breakerGauge(t *testing.T, m *metrics.Metrics, state string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "owed_model_breaker_state" {
			continue
		}
		for _, g := range f.GetMetric() {
			for _, l := range g.GetLabel() {
				if l.GetName() == "state" && l.GetValue() == state {
					return g.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no owed_model_breaker_state{state=%q}", state)
	return 0
}

// A breaker turned off never opens the shared row either: failures here do not stop the
// replicas that have one, nor owe a model.breaker webhook.
func TestBreakerOffNeverOpensTheSharedRow(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelBreaker = -1 }))
		if _, err := r.store.CreateWebhook(r.ctx, "https://hooks.example/model", []string{models.EventModelBreaker}, "whsec_x"); err != nil {
			t.Fatal(err)
		}
		p := r.pitch(r.user("ann"), "p")
		r.model.Fail(503, nil)
		for range 3 {
			r.clk.Advance(time.Hour)
			r.exec(`UPDATE content_jobs SET due_at = ?`, r.nowMs())
			if out := r.run(models.TaskScreen, models.KindPitch, p); out != scheduler.Pending {
				t.Fatalf("a failed call: %s, want pending", out)
			}
		}
		row, err := r.store.ReadBreaker(r.ctx)
		if err != nil {
			t.Fatal(err)
		}
		var owed int64
		r.store.RawScan(r.ctx, &owed, `SELECT COUNT(*) FROM webhook_deliveries WHERE event = 'model.breaker'`)
		if row.State != models.BreakerClosed || owed != 0 || r.model.Calls() != 3 {
			t.Fatalf("three failures with the breaker off: shared row %s, %d model.breaker deliveries, %d calls", row.State, owed, r.model.Calls())
		}
	})
}

// A probe whose prober died (its replica stopped mid-call) is taken over once its lease runs
// out: the next due job probes, instead of every job waiting for a probe that never ends.
func TestBreakerDeadProbersProbeIsTakenOver(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelBreaker = 1 }))
		ann := r.user("ann")
		first, next := r.pitch(ann, "first"), r.pitch(ann, "next")
		r.model.FailNext(1, 503, nil)
		r.run(models.TaskScreen, models.KindPitch, first)
		r.clk.Advance(5 * time.Second)
		probeUntil := r.clk.Now().Add(time.Minute)
		if _, ok, err := r.store.ClaimProbe(r.ctx, "dead-replica:1", probeUntil); err != nil || !ok {
			t.Fatalf("the dead replica's claim of the probe: ok=%v err=%v", ok, err)
		}
		if out := r.run(models.TaskScreen, models.KindPitch, next); out != scheduler.Pending || r.model.Calls() != 1 {
			t.Fatalf("during another's probe: %s after %d calls, want pending with no call", out, r.model.Calls())
		}
		if j := r.mustJob(models.TaskScreen, models.KindPitch, next); !j.DueAt.Equal(probeUntil) {
			t.Fatalf("a job put off during another's probe is due at %v, want the end of that probe's lease %v", j.DueAt, probeUntil)
		}
		r.clk.Advance(time.Minute + time.Second)
		r.exec(`UPDATE content_jobs SET due_at = ?`, r.nowMs())
		if out := r.run(models.TaskScreen, models.KindPitch, next); out != scheduler.Done || r.model.Calls() != 2 {
			t.Fatalf("after the dead prober's lease ran out: %s after %d calls, want done by a probe of its own", out, r.model.Calls())
		}
		if st := modelState(t, r.content); st.State != models.BreakerClosed {
			t.Fatalf("the breaker after the probe was taken over and answered: %+v", st)
		}
	})
}

// The prober's gauge follows its own probes: open again after one fails, closed after one
// gets an answer (never left at probing).
func TestBreakerGaugeFollowsItsOwnProbes(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		m := metrics.New(nil)
		c := r.replica(t, "watched", m)
		p := r.pitch(r.user("ann"), "p")
		run := func() scheduler.Outcome {
			t.Helper()
			r.exec(`UPDATE content_jobs SET due_at = ?`, r.nowMs())
			j, ok, err := r.store.ClaimItem(r.ctx, models.TaskScreen, models.KindPitch, p, time.Minute, "watched")
			if err != nil || !ok {
				t.Fatalf("claim: ok=%v err=%v", ok, err)
			}
			out, err := c.Run(r.ctx, j)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		gauge := func(want string) {
			t.Helper()
			for _, s := range []string{models.BreakerClosed, models.BreakerOpen, models.BreakerProbing} {
				if v, w := breakerGauge(t, m, s), map[bool]float64{true: 1}[s == want]; v != w {
					t.Fatalf("owed_model_breaker_state{state=%q} %v, want %v", s, v, w)
				}
			}
		}
		r.model.FailNext(2, 503, nil)
		run()
		gauge(models.BreakerOpen)
		r.clk.Advance(5 * time.Second)
		if out := run(); out != scheduler.Pending || r.model.Calls() != 2 {
			t.Fatalf("the failed probe: %s after %d calls", out, r.model.Calls())
		}
		gauge(models.BreakerOpen)
		r.clk.Advance(10 * time.Second)
		if out := run(); out != scheduler.Done || r.model.Calls() != 3 {
			t.Fatalf("the probe that gets an answer: %s after %d calls", out, r.model.Calls())
		}
		gauge(models.BreakerClosed)
	})
}

// A call cut off because the worker is stopping is not the model's failure: it never counts
// towards opening the breaker.
func TestBreakerIgnoresCallsCutOffByStop(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelBreaker = 1 }))
		p := r.pitch(r.user("ann"), "p")
		release := make(chan struct{})
		defer close(release)
		r.model.Handle(func(w http.ResponseWriter, req *http.Request) bool {
			select {
			case <-release:
			case <-req.Context().Done():
			}
			return false
		})
		ctx, cancel := context.WithCancel(r.ctx)
		done := make(chan scheduler.Outcome, 1)
		j := r.claim(models.TaskScreen, models.KindPitch, p)
		go func() {
			out, _ := r.content.Run(ctx, j)
			done <- out
		}()
		wait.Until(t, "the call", func() bool { return r.model.InFlight() == 1 })
		cancel()
		<-done
		if st := modelState(t, r.content); st.State != models.BreakerClosed || st.Failures != 0 {
			t.Fatalf("after a call cut off by stopping, the breaker is %+v, want closed with no failure counted", st)
		}
	})
}

// replica is a second content runner on r's database, clock and model, with a breaker
// opened by one failure and its own metrics (nil: none).
func (r *rig) replica(t *testing.T, owner string, m *metrics.Metrics) *scheduler.Content {
	c := scheduler.NewContent(r.store, modelclient.New(r.model.Config()), r.clk, owedtest.Logger(t), m,
		scheduler.ContentConfig{Owner: owner, ModelBreaker: 1})
	stopAtCleanup(t, c)
	return c
}
