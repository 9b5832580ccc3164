package scheduler_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
	"github.com/owed/owed/scheduler"
)

// An author's sweep (one author's jobs, started by their view) is served model slots before the
// periodic sweep of everyone's, even when the periodic one has waited longer: with every slot
// held, the author's sweep takes them first and runs the author's job; the periodic sweep runs
// what is left.
func TestAuthorSweepIsServedBeforeThePeriodicSweep(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelConcurrency = scheduler.ScoreRuns }))
		ann, bob, carol := r.user("ann"), r.user("bob"), r.user("carol")
		_, rev := r.allowedRevision(carol, "S", "c")
		r.pitch(ann, "ann's")
		r.pitch(bob, "bob's")

		// Carol's score holds every slot while the model keeps its call.
		release := make(chan struct{})
		var calls atomic.Int64
		r.model.Handle(func(http.ResponseWriter, *http.Request) bool {
			if calls.Add(1) == 1 {
				<-release
			}
			return false
		})
		j := r.claim(models.TaskScore, models.KindRevision, rev)
		scored := make(chan scheduler.Outcome, 1)
		go func() {
			out, err := r.content.Run(r.ctx, j)
			if err != nil {
				t.Error(err)
			}
			scored <- out
		}()
		wait.Until(t, "the score's call", func() bool { return r.model.InFlight() == 1 })

		sweep := func(userID int64) <-chan int {
			ran := make(chan int, 1)
			go func() {
				n, err := r.content.Sweep(r.ctx, userID)
				if err != nil {
					t.Error(err)
				}
				ran <- n
			}()
			return ran
		}
		periodic := sweep(0)
		wait.Until(t, "the periodic sweep to wait for slots", func() bool { return r.content.ModelWaiters() == 1 })
		author := sweep(ann)
		wait.Until(t, "the author's sweep to wait for slots", func() bool { return r.content.ModelWaiters() == 2 })
		close(release)

		if out := <-scored; out != scheduler.Done {
			t.Fatalf("carol's score: %s", out)
		}
		if a, p := <-author, <-periodic; a != 1 || p != 1 {
			t.Fatalf("the author's sweep ran %d jobs, the periodic one %d; want 1 each (ann's by her sweep, bob's by the periodic)", a, p)
		}
		if n := r.countJobs(); n != 0 {
			t.Errorf("%d jobs still owed, want none", n)
		}
	})
}
