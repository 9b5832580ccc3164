package scheduler_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// Every attempt that leaves a job pending keeps what went wrong, in words, with its event and
// as the job's last error; an answered attempt keeps none.
func TestRunKeepsEachAttemptsError(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		for _, tc := range []struct {
			name  string
			opts  []rigOption
			setup func(r *rig, ann int64)
			task  models.Task
			want  string
		}{
			{"no model", []rigOption{withoutModel()}, nil, models.TaskScreen, "no model configured"},
			{"503", nil, func(r *rig, _ int64) { r.model.Fail(http.StatusServiceUnavailable, nil) }, models.TaskScreen, "HTTP 503: fake failure"},
			{"garbage", nil, func(r *rig, _ int64) { r.model.Garbage() }, models.TaskScreen, "answer is not JSON"},
			{"dropped", nil, func(r *rig, _ int64) { r.model.DropConnections() }, models.TaskScreen, "EOF"},
			{"budget", nil, func(r *rig, ann int64) {
				if _, err := r.store.SetDailyLimit(r.ctx, ann, ptr(int64(0))); err != nil {
					t.Fatal(err)
				}
			}, models.TaskScreen, "the author's budget for today cannot cover 1 more model call(s); it resets at 00:00 UTC"},
			{"score run out of range", nil, func(r *rig, _ int64) {
				r.model.SetArt(func(run int) modelclient.ArtRun {
					if run == 2 {
						return modelclient.ArtRun{Art: 1.5}
					}
					return modeltest.DefaultArt(run)
				})
			}, models.TaskScore, "answer's art 1.5 is not between 0 and 1"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := newRig(t, db, tc.opts...)
				ann := r.user("ann")
				kind, item := models.KindPitch, int64(0)
				if tc.task == models.TaskScore {
					_, item = r.allowedRevision(ann, "S", "c")
					kind = models.KindRevision
				} else {
					item = r.pitch(ann, "p")
				}
				if tc.setup != nil {
					tc.setup(r, ann)
				}
				r.run(tc.task, kind, item)
				ev := r.lastEvent(kind, item)
				if ev.Error == nil || !strings.HasSuffix(*ev.Error, tc.want) {
					t.Errorf("event error = %v, want %q", deref(ev.Error), tc.want)
				}
				job, err := r.store.JobByID(r.ctx, r.mustJob(tc.task, kind, item).ID)
				if err != nil || job.LastError == nil || *job.LastError != deref(ev.Error) {
					t.Errorf("job lastError = %v (%v), want the event's", deref(job.LastError), err)
				}
				// Answered at last: the verdict's event has no error.
				r.model.Reset()
				if tc.name == "budget" {
					if _, err := r.store.SetDailyLimit(r.ctx, ann, nil); err != nil {
						t.Fatal(err)
					}
				}
				if tc.name == "no model" {
					return
				}
				r.clk.Set(r.clk.Now().Add(25 * time.Hour)) // past the budget's reset and any backoff
				r.run(tc.task, kind, item)
				if ev := r.lastEvent(kind, item); ev.Outcome == "pending" || ev.Error != nil {
					t.Errorf("the answered attempt's event = %+v", ev)
				}
			})
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
