package scheduler_test

import (
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/scheduler"
)

// An attempt whose verdict is too unsure and goes to review is, like every attempt, one log
// line: pending, why review.
func TestReviewAttemptIsOneLogLine(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		c, logs := r.contentLogging(scheduler.ContentConfig{Owner: "test-worker", ReviewBelow: map[models.Kind]float64{models.KindPitch: 0.9}})
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

// The review band is below its figure: a verdict exactly as sure as the band is recorded, not
// sent to review.
func TestReviewBandIsBelowItsFigure(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		c, _ := r.contentLogging(scheduler.ContentConfig{Owner: "test-worker", ReviewBelow: map[models.Kind]float64{models.KindPitch: 0.75}})
		r.model.SetVerdict("allow", 0.75)
		p := r.pitch(r.user("ann"), "p")
		if out, err := c.Run(r.ctx, r.claim(models.TaskScreen, models.KindPitch, p)); err != nil || out != scheduler.Done {
			t.Fatalf("a verdict at the band: %s, %v; want done", out, err)
		}
	})
}

// The last tenth of a job's lease is kept for recording the outcome: a job claimed with only
// that left is not asked at all (the model never sees the call), and it stays owed.
func TestRunKeepsTheLeasesLastTenthForRecording(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		const lease = time.Second
		r := newRig(t, db, withModelTimeout(time.Minute), withConfig(func(c *scheduler.ContentConfig) { c.Lease = lease }))
		r.model.Hang()
		p := r.pitch(r.user("ann"), "p")
		job := r.claim(models.TaskScreen, models.KindPitch, p)
		r.clk.Advance(lease - lease/10)
		if out, err := r.content.Run(r.ctx, job); err != nil || out != scheduler.Pending {
			t.Fatalf("with a tenth of the lease left: %s, %v; want pending", out, err)
		}
		if n := r.model.Calls(); n != 0 {
			t.Fatalf("the model was asked %d times with only the recording tenth of the lease left", n)
		}
		r.mustJob(models.TaskScreen, models.KindPitch, p)
	})
}
