package scheduler_test

import (
	"log/slog"
	"testing"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/scheduler"
)

// An attempt whose verdict is too unsure and goes to review is, like every attempt, one log
// line: pending, why review.
func TestReviewAttemptIsOneLogLine(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		var logs syncBuffer
		c := scheduler.NewContent(r.store, modelclient.New(r.model.Config()), r.clk, slog.New(slog.NewJSONHandler(&logs, nil)), nil,
			scheduler.ContentConfig{Owner: "test-worker", ReviewBelow: map[models.Kind]float64{models.KindPitch: 0.9}})
		r.model.SetVerdict("allow", 0.6)
		p := r.pitch(r.user("ann"), "p")
		if out, err := c.Run(r.ctx, r.claim(models.TaskScreen, models.KindPitch, p)); err != nil || out != scheduler.Pending {
			t.Fatalf("an unsure verdict: %s, %v; want pending", out, err)
		}
		var attempts []map[string]any
		for _, l := range logs.lines() {
			if l["msg"] == "screen" {
				attempts = append(attempts, l)
			}
		}
		if len(attempts) != 1 || attempts[0]["outcome"] != "pending" || attempts[0]["why"] != "review" {
			t.Fatalf("log lines for the attempt: %v, want one, pending for review", attempts)
		}
	})
}
