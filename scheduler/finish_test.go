package scheduler_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/scheduler"
)

// An attempt that owed itself failed (the database) leaves an error line in the log with its
// cause, since the job keeps only words without it; an attempt the model failed (its status
// is kept with the job and event) leaves none.
func TestRunLogsAnErrorOnlyWhenOwedFailed(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		c, logs := r.contentLogging(scheduler.ContentConfig{Owner: "test-worker"})
		ann := r.user("ann")
		failing, upstream := r.pitch(ann, "failing"), r.pitch(ann, "upstream")

		r.model.FailNext(1, 503, nil)
		if out, err := c.Run(r.ctx, r.claim(models.TaskScreen, models.KindPitch, upstream)); out != scheduler.Pending || err != nil {
			t.Fatalf("the model's 503: %s, %v", out, err)
		}
		if errs := errorLines(logs.lines()); len(errs) != 0 {
			t.Fatalf("after the model's 503, error lines %v; want none (the attempt's line says it)", errs)
		}

		r.exec(`ALTER TABLE pitches RENAME TO pitches_gone`)
		out, err := c.Run(r.ctx, r.claim(models.TaskScreen, models.KindPitch, failing))
		r.exec(`ALTER TABLE pitches_gone RENAME TO pitches`)
		if out != scheduler.Pending || err != nil {
			t.Fatalf("the database failing: %s, %v", out, err)
		}
		errs := errorLines(logs.lines())
		if len(errs) != 1 {
			t.Fatalf("after the database failed, error lines %v; want one", errs)
		}
		e := errs[0]
		if e["msg"] != "content job" || e["why"] != string(models.WhyUnavailable) || e["itemId"] != float64(failing) ||
			!strings.Contains(fmt.Sprint(e["err"]), "read the item") {
			t.Errorf("error line %v; want the job, why unavailable and the cause (read the item: ...)", e)
		}
	})
}

// A job let go unasked while the process runs (its lease ran out before the ask) leaves an
// info line saying why; one let go because the process is stopping leaves none: a shutdown
// would otherwise log a line for each job it holds.
func TestRunLogsALetGoOnlyWhenNotStopping(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		c, logs := r.contentLogging(scheduler.ContentConfig{Owner: "test-worker"})
		ann := r.user("ann")
		stopping, late := r.pitch(ann, "stopping"), r.pitch(ann, "late")
		due := r.clk.Now()

		ctx, cancel := context.WithCancel(r.ctx)
		cancel()
		if out, err := c.Run(ctx, r.claim(models.TaskScreen, models.KindPitch, stopping)); out != scheduler.Pending || err != nil {
			t.Fatalf("a run while stopping: %s, %v", out, err)
		}
		wantUntouched(t, r.mustJob(models.TaskScreen, models.KindPitch, stopping), due, nil)
		if got := letGoLines(logs.lines()); len(got) != 0 {
			t.Fatalf("a job let go while stopping logged %v; want nothing", got)
		}

		j := r.claim(models.TaskScreen, models.KindPitch, late)
		lease := c.Config().Lease
		r.clk.Advance(lease - lease/10) // only the tenth kept for recording is left: not asked
		if out, err := c.Run(r.ctx, j); out != scheduler.Pending || err != nil {
			t.Fatalf("a run past its lease: %s, %v", out, err)
		}
		wantUntouched(t, r.mustJob(models.TaskScreen, models.KindPitch, late), due, nil)
		got := letGoLines(logs.lines())
		if len(got) != 1 || got[0]["level"] != "INFO" || got[0]["jobId"] != float64(j.ID) || !strings.Contains(fmt.Sprint(got[0]["cause"]), "lease") {
			t.Fatalf("a job let go past its lease logged %v; want one info line with the job and its cause", got)
		}
		r.wantNothingAsked(t, ann, stopping, late)
	})
}

// A job the open breaker puts off whose putting off cannot be written (the database failing)
// is an error of the run, logged by the runner, not a quiet pending: the job keeps its lease
// until it runs out and is then due again.
func TestRunPutOffNotWrittenIsAnError(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		p := r.pitch(ann, "p")
		probe := r.clk.Now().Add(time.Minute)
		if _, ok, err := r.store.OpenBreaker(r.ctx, 10, models.WhyUnreachable, nil, nil, probe); err != nil || !ok {
			t.Fatalf("open the breaker: %v, %v", ok, err)
		}
		j := r.claim(models.TaskScreen, models.KindPitch, p)
		r.exec(`ALTER TABLE content_jobs RENAME TO content_jobs_gone`)
		out, err := r.content.Run(r.ctx, j)
		r.exec(`ALTER TABLE content_jobs_gone RENAME TO content_jobs`)
		if out != scheduler.Pending || err == nil {
			t.Fatalf("Run = %s, %v; want pending and the error", out, err)
		}
		got := r.mustJob(models.TaskScreen, models.KindPitch, p)
		if got.LeaseOwner == nil || *got.LeaseOwner != "test-worker" || !got.DueAt.Equal(j.DueAt) || got.Attempts != 0 {
			t.Errorf("job %+v; want it as claimed: leased to test-worker, due at %v, no attempt", got, j.DueAt)
		}
		r.wantNothingAsked(t, ann, p)
	})
}

// A run in the background (RunItem, a sweep) whose ending cannot be recorded logs one error
// line with the cause, since no caller hears of it; a run that records its ending logs none.
func TestBackgroundRunLogsAnUnrecordedEnding(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		c, logs := r.contentLogging(scheduler.ContentConfig{Owner: "test-worker"})
		ann := r.user("ann")
		fine, lost := r.pitch(ann, "fine"), r.pitch(ann, "lost")
		if out := <-c.RunItem(models.TaskScreen, models.KindPitch, fine); out != scheduler.Done {
			t.Fatalf("the first screen: %s", out)
		}
		if errs := errorLines(logs.lines()); len(errs) != 0 {
			t.Fatalf("a recorded run logged errors %v; want none", errs)
		}

		// The model fails, and meanwhile the jobs' table goes: the attempt cannot be recorded.
		renamed := make(chan error, 1)
		r.model.FailNext(1, 503, nil)
		r.model.Handle(func(http.ResponseWriter, *http.Request) bool {
			_, err := r.store.RawExec(r.ctx, `ALTER TABLE content_jobs RENAME TO content_jobs_gone`)
			renamed <- err
			return false
		})
		out := <-c.RunItem(models.TaskScreen, models.KindPitch, lost)
		r.model.Handle(nil)
		if err := <-renamed; err != nil {
			t.Fatal(err)
		}
		r.exec(`ALTER TABLE content_jobs_gone RENAME TO content_jobs`)
		if out != scheduler.Pending {
			t.Fatalf("the unrecorded screen: %s, want pending", out)
		}
		errs := errorLines(logs.lines())
		if len(errs) != 1 || errs[0]["msg"] != "content job" || errs[0]["itemId"] != float64(lost) ||
			!strings.Contains(fmt.Sprint(errs[0]["err"]), "reschedule") {
			t.Fatalf("error lines %v; want one for the lost pitch's job with its cause", errs)
		}
	})
}

func letGoLines(lines []map[string]any) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["msg"] == "content job let go unasked" {
			out = append(out, l)
		}
	}
	return out
}

func errorLines(lines []map[string]any) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["level"] == "ERROR" {
			out = append(out, l)
		}
	}
	return out
}
