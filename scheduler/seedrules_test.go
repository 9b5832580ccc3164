package scheduler_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// These tests guard backfill seed rules that the other tests left open: each
// fails under the mutation named in its comment (checked by hand; see docs/benchmarks.md,
// "Mutation testing").

// The suspect threshold is two thirds of a batch, rounded up: 2 suspects of a batch of 3
// raise the cooldown, 3 of a batch of 6 do not. (A threshold of half a batch raises it for 3
// of 6; a strict "more than two thirds" does not raise it for 2 of 3.) Where two thirds is not
// whole the rounding decides: 14 of the default 20 raise it and 13 do not, 5 of 7 raise it and
// 4 do not (two thirds rounded down would raise it for 13 of 20 and 4 of 7).
func TestBackfillSuspectThresholdIsTwoThirds(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		for _, c := range []struct {
			size, suspects int
			raised         bool
		}{{3, 2, true}, {6, 3, false}, {6, 4, true}, {20, 13, false}, {20, 14, true}, {7, 4, false}, {7, 5, true}} {
			t.Run(fmt.Sprintf("%d of %d", c.suspects, c.size), func(t *testing.T) {
				b := newBF(t, db)
				b.settings(c.size, 1000)
				// One batch: the suspects first, then images that are cached.
				ps := append(paths("/status/404/%d", 1, c.suspects), paths("/img/%d.png", 1, c.size-c.suspects)...)
				b.scrape("chat-t", "puppet", models.ScrapeDone, ps...)
				b.start("")
				b.run()
				batches := b.logs.named("backfill batch")
				if len(batches) != 1 {
					t.Fatalf("%d batches, want 1", len(batches))
				}
				a := batches[0].attrs
				if a["suspect"] != int64(c.suspects) {
					t.Fatalf("batch with %v suspects, want %d", a["suspect"], c.suspects)
				}
				want := int64(1000) // the settings' pause
				if c.raised {
					want = 60000 // doubled, and at least 60 s
				}
				if a["cooldownMs"] != want {
					t.Errorf("cooldown after %d suspects of %d = %v ms, want %d", c.suspects, c.size, a["cooldownMs"], want)
				}
				if n := len(b.logs.named("backfill suspect failures raised the cooldown")); (n == 1) != c.raised {
					t.Errorf("%d raises logged, want raised=%v", n, c.raised)
				}
				if j := b.mustJob(b.status(), "chat-t"); j.State != "done" {
					t.Errorf("job = %s, want done", j.State)
				}
			})
		}
	})
}

// A job pauses after three batches *in a row* without progress: a batch that progresses
// starts the count again, so stall, progress, stall, stall does not pause. (A count that is
// not reset by progress pauses this job at its fourth batch.)
func TestBackfillStallsCountOnlyInARow(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBF(t, db)
		b.settings(3, 0)
		var ps []string
		ps = append(ps, paths("/status/404/%d", 1, 3)...) // stall
		ps = append(ps, paths("/img/%d.png", 1, 3)...)    // progress
		ps = append(ps, paths("/status/404/%d", 4, 6)...) // stall, stall
		ps = append(ps, paths("/img/%d.png", 4, 3)...)    // progress
		b.scrape("chat-s", "puppet", models.ScrapeDone, ps...)
		b.start("")
		b.run()

		var stalled []any
		for _, r := range b.logs.named("backfill batch") {
			stalled = append(stalled, r.attrs["stalled"])
		}
		if want := []any{int64(1), int64(0), int64(1), int64(2), int64(0)}; !reflect.DeepEqual(stalled, want) {
			t.Errorf("stalled counts %v, want %v", stalled, want)
		}
		if n := len(b.logs.named("backfill made no progress; job paused")); n != 0 {
			t.Errorf("the job was paused for making no progress (%d times)", n)
		}
		if j := b.mustJob(b.status(), "chat-s"); j.State != "done" || j.Cached != 6 {
			t.Errorf("job = %s with %d cached, want done with 6", j.State, j.Cached)
		}
	})
}
