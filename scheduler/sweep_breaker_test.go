package scheduler_test

import (
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// While the breaker is open and its probe is not due, a sweep claims nothing: it puts every due
// job off until the probe in one statement, so no job takes a lease, a slot or a run.
func TestSweepWhileBreakerOpenClaimsNothing(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		p, q := r.pitch(ann, "p"), r.pitch(ann, "q")
		probe := r.clk.Now().Add(time.Minute)
		if _, ok, err := r.store.OpenBreaker(r.ctx, 10, models.WhyUnreachable, nil, nil, probe); err != nil || !ok {
			t.Fatalf("open the breaker: %v, %v", ok, err)
		}
		for _, userID := range []int64{0, ann} {
			if n, err := r.content.Sweep(r.ctx, userID); n != 0 || err != nil {
				t.Fatalf("sweep (user %d) while the breaker is open ran %d jobs, %v; want none", userID, n, err)
			}
		}
		for _, id := range []int64{p, q} {
			wantUntouched(t, r.mustJob(models.TaskScreen, models.KindPitch, id), probe, nil)
		}
		r.wantNothingAsked(t, ann, p, q)
	})
}
