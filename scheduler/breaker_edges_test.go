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
	"github.com/owed/owed/scheduler"
)

// Only a server error (500 and up) or a 429 counts against the model: any other 4xx answer is
// about the request, so however many come in a row the breaker stays closed.
func TestBreakerCountsServerErrorsAnd429Only(t *testing.T) {
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
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelBreaker = -1 }))
		if _, ok, err := r.store.OpenBreaker(r.ctx, 10, models.WhyUpstream, ptr(503), nil, r.clk.Now().Add(time.Hour)); err != nil || !ok {
			t.Fatalf("open the shared breaker: ok=%v err=%v", ok, err)
		}
		p := r.pitch(r.user("ann"), "p")
		if out := r.run(models.TaskScreen, models.KindPitch, p); out != scheduler.Done || r.model.Calls() != 1 {
			t.Fatalf("with the breaker off: %s after %d calls, want done after one", out, r.model.Calls())
		}
	})
}

// A replica reads an open or probing breaker every time, never from its cache: the moment
// another replica's probe gets an answer and closes it, this one asks the model again.
func TestBreakerReplicaSeesAnotherClose(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelBreaker = 1 }))
		other := scheduler.NewContent(r.store, modelclient.New(r.model.Config()), r.clk, owedtest.Logger(t), nil,
			scheduler.ContentConfig{Owner: "replica-2", ModelBreaker: 1})
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			other.Stop(ctx)
		})
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
		waitFor(t, "the probe's call", func() bool { return r.model.InFlight() == 1 })
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
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelBreaker = 1 }))
		m := metrics.New(nil)
		watched := scheduler.NewContent(r.store, modelclient.New(r.model.Config()), r.clk, owedtest.Logger(t), m,
			scheduler.ContentConfig{Owner: "replica-2", ModelBreaker: 1})
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			watched.Stop(ctx)
		})
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
