package scheduler_test

import (
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/owed/owed/metrics"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
	"github.com/owed/owed/scheduler"
)

// The runner's metrics, as /metrics serves them: each attempt counted by event, outcome and
// why; the model's time in seconds (the histogram's buckets are seconds, the reply's time is
// milliseconds); and each charge the author's budget refused.
func TestRunMetricsCountAttemptsModelSecondsAndRefusals(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		m := metrics.New(nil)
		r := newRig(t, db, withMetrics(m))
		ann := r.user("ann")
		if _, err := r.store.SetDailyLimit(r.ctx, ann, ptr(int64(2))); err != nil {
			t.Fatal(err)
		}
		_, rev := r.song(ann, "S", "c")
		r.model.Delay(50 * time.Millisecond)
		start := time.Now()
		if out := r.run(models.TaskScreen, models.KindRevision, rev); out != scheduler.Done {
			t.Fatalf("screen: %s", out)
		}
		wall := time.Since(start).Seconds()

		lat := metric(t, m, "owed_model_latency_seconds", "event", "screen").GetHistogram()
		if lat.GetSampleCount() != 1 || lat.GetSampleSum() < 0.05 || lat.GetSampleSum() > wall {
			t.Errorf("model latency: %d samples, sum %v s; want one of at least 0.05 s and at most the run's %v s",
				lat.GetSampleCount(), lat.GetSampleSum(), wall)
		}
		if n := metric(t, m, "owed_attempts_total", "outcome", "allow").GetCounter().GetValue(); n != 1 {
			t.Errorf("attempts{outcome=allow} = %v, want 1", n)
		}

		// The score needs 3 calls with 1 left: refused, counted, and no model call timed.
		if out := r.run(models.TaskScore, models.KindRevision, rev); out != scheduler.Pending {
			t.Fatalf("score: %s", out)
		}
		if n := metric(t, m, "owed_budget_refusals_total", "", "").GetCounter().GetValue(); n != 1 {
			t.Errorf("budget refusals = %v, want 1", n)
		}
		if n := metric(t, m, "owed_attempts_total", "why", string(models.WhyBudget)).GetCounter().GetValue(); n != 1 {
			t.Errorf("attempts{why=budget} = %v, want 1", n)
		}
		if n := metric(t, m, "owed_model_latency_seconds", "event", "screen").GetHistogram().GetSampleCount(); n != 1 {
			t.Errorf("model latency samples = %d after a refused charge, want still 1", n)
		}
	})
}

// Run holds its task's model slots while it asks (a score's three), so owed_model_inflight
// shows them and the process's model cap counts them, and gives them back once it is over.
func TestRunHoldsItsModelSlotsWhileAsking(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		m := metrics.New(nil)
		r := newRig(t, db, withMetrics(m))
		ann := r.user("ann")
		_, rev := r.allowedRevision(ann, "S", "c")
		release := make(chan struct{})
		r.model.Handle(func(http.ResponseWriter, *http.Request) bool { <-release; return false })
		j := r.claim(models.TaskScore, models.KindRevision, rev)
		done := make(chan scheduler.Outcome, 1)
		go func() {
			out, err := r.content.Run(r.ctx, j)
			if err != nil {
				t.Error(err)
			}
			done <- out
		}()
		wait.Until(t, "the score's call", func() bool { return r.model.InFlight() > 0 })
		if n := metric(t, m, "owed_model_inflight", "", "").GetGauge().GetValue(); n != scheduler.ScoreRuns {
			t.Errorf("model slots in use while the score asks = %v, want %d", n, scheduler.ScoreRuns)
		}
		close(release)
		if out := <-done; out != scheduler.Done {
			t.Fatalf("score: %s", out)
		}
		if n := metric(t, m, "owed_model_inflight", "", "").GetGauge().GetValue(); n != 0 {
			t.Errorf("model slots in use after the score = %v, want 0", n)
		}
	})
}

// metric is the one series of family name whose label is value (label "": the family's first).
func metric(t *testing.T, m *metrics.Metrics, name, label, value string) *dto.Metric {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			if label == "" {
				return s
			}
			for _, l := range s.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return s
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return nil
}
