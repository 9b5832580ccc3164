package scheduler_test

import (
	"net/http"
	"sync"
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

// A write's own screen is served its model slot before a backlog of sweep work that has waited
// longer: the author sees the verdict in the write's answer, not after everyone's due jobs. With
// every slot held, the periodic sweep (bob's three scores) waits for slots first and the write's
// screen second; when the slots free, the write's screen is the next call the model receives.
func TestWriteScreenIsServedBeforeASweepBacklog(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelConcurrency = scheduler.ScoreRuns }))
		ann, bob, carol := r.user("ann"), r.user("bob"), r.user("carol")
		_, held := r.allowedRevision(carol, "S", "c")
		for _, title := range []string{"B1", "B2", "B3"} {
			r.allowedRevision(bob, title, "b")
		}

		// Carol's score holds every slot while the model keeps one of its calls.
		release := make(chan struct{})
		let := sync.OnceFunc(func() { close(release) })
		t.Cleanup(let) // a test that fails first must not leave the call held
		var calls atomic.Int64
		r.model.Handle(func(http.ResponseWriter, *http.Request) bool {
			if calls.Add(1) == 1 {
				<-release
			}
			return false
		})
		j := r.claim(models.TaskScore, models.KindRevision, held)
		scored := make(chan scheduler.Outcome, 1)
		go func() {
			out, err := r.content.Run(r.ctx, j)
			if err != nil {
				t.Error(err)
			}
			scored <- out
		}()
		wait.Until(t, "carol's calls", func() bool { return r.model.Calls() == scheduler.ScoreRuns })

		swept := make(chan int, 1)
		go func() {
			n, err := r.content.Sweep(r.ctx, 0)
			if err != nil {
				t.Error(err)
			}
			swept <- n
		}()
		wait.Until(t, "the sweep to wait for slots", func() bool { return r.content.ModelWaiters() == 1 })
		written := r.content.RunItem(models.TaskScreen, models.KindPitch, r.pitch(ann, "ann's"))
		wait.Until(t, "the write's screen to wait for a slot", func() bool { return r.content.ModelWaiters() == 2 })
		let()

		if out := <-scored; out != scheduler.Done {
			t.Fatalf("carol's score: %s", out)
		}
		if out, ok := <-written; !ok || out != scheduler.Done {
			t.Fatalf("the write's screen: %s (ran %v), want done", out, ok)
		}
		if n := <-swept; n != 3 {
			t.Errorf("the sweep ran %d jobs, want bob's 3 scores", n)
		}
		var order []string
		for _, req := range r.model.Requests() {
			order = append(order, req.Task+" "+req.Subject.Text)
		}
		// Carol's three runs, then the write's screen, then bob's nine runs.
		if want := "screen ann's"; len(order) != 13 || order[scheduler.ScoreRuns] != want {
			t.Errorf("the model was asked in this order: %q; want %q right after carol's %d runs", order, want, scheduler.ScoreRuns)
		}
	})
}
