package scheduler

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/owed/owed/models"
)

// The status arithmetic at its edges, on fixed figures: computeStatus reads no database, so
// each edge is one input away.

// With no gap between rows and no pause between batches there is no time a row to divide by:
// the estimate is the idle rate, not an infinite one; one millisecond a row is 60,000 a minute.
func TestEstimatedPerMinuteWithoutTimeARowIsTheIdleRate(t *testing.T) {
	t.Parallel()
	if got := EstimatedPerMinute(BackfillSettings{BatchSize: 10}, 0, 0); got != 6000 {
		t.Errorf("no gaps, no pause: %v a minute, want the idle rate, 6000", got)
	}
	if got := EstimatedPerMinute(BackfillSettings{BatchSize: 10}, time.Millisecond, time.Millisecond); got != 60_000 {
		t.Errorf("1 ms a row: %v a minute, want 60000", got)
	}
}

// A rate limit or a walk that ends at this very instant holds nothing: the status shows
// neither, and the running job waits for nothing; one that ends a millisecond later shows, and
// the running job (it has begun its run) waits for it.
func TestStatusLimitAndWalkEndingNowAreOver(t *testing.T) {
	t.Parallel()
	const now = 1_000_000
	running := func(in statusInput) statusInput {
		in.members = []models.BackfillMember{{ID: 1, ChatID: "alpha", Backend: "puppet", Counts: models.ScrapeCounts{Pending: 5, Total: 5}}}
		in.jobs = []models.BackfillJob{{ChatID: "alpha", State: models.BackfillRunning, ActiveAt: time.UnixMilli(now), StartedAt: ptr(time.UnixMilli(now - 1000))}}
		return in
	}
	waits := func(st BackfillStatus) string {
		if len(st.Jobs) != 1 || st.Jobs[0].State != models.BackfillRunning {
			t.Fatalf("jobs %+v, want alpha running", st.Jobs)
		}
		if w := st.Jobs[0].WaitsFor; w != nil {
			return *w
		}
		return ""
	}
	st := computeStatus(running(statusInput{now: now, localLimit: now, walkUntil: now, walkChat: "hotel"}))
	if st.LimitedUntil != nil || st.WalkingUntil != nil || st.WalkingChat != nil || waits(st) != "" {
		t.Errorf("ending now: limitedUntil %v, walkingUntil %v, walkingChat %v, waits for %q; want none",
			st.LimitedUntil, st.WalkingUntil, st.WalkingChat, waits(st))
	}
	for _, c := range []struct {
		limit, walk int64
		waitsFor    string
	}{{now + 1, now + 1, WaitWalk}, {now + 1, 0, WaitRateLimit}, {0, now + 1, WaitWalk}, {now + 2, now + 1, WaitRateLimit}} {
		st = computeStatus(running(statusInput{now: now, localLimit: c.limit, walkUntil: c.walk, walkChat: "hotel"}))
		if (st.LimitedUntil != nil) != (c.limit > now) || (st.WalkingUntil != nil) != (c.walk > now) || waits(st) != c.waitsFor {
			t.Errorf("limit %d, walk %d ms from now: limitedUntil %v, walkingUntil %v, waits for %q; want %q",
				c.limit-now, c.walk-now, st.LimitedUntil, st.WalkingUntil, waits(st), c.waitsFor)
		}
	}
}

// Jobs are listed by pending rows, most first; jobs with as many keep the order of their
// chats' first scrapes, so a console polling the status does not see them swap places.
func TestStatusListsEqualJobsInTheirChatsOrder(t *testing.T) {
	t.Parallel()
	member := func(id int64, chat string, pending int64) models.BackfillMember {
		return models.BackfillMember{ID: id, ChatID: chat, Backend: "puppet", Counts: models.ScrapeCounts{Pending: pending, Total: pending}}
	}
	in := statusInput{now: 1_000_000, members: []models.BackfillMember{
		member(1, "mike", 5), member(2, "alpha", 5), member(3, "zulu", 9), member(4, "kilo", 5)}}
	var got []string
	for _, j := range computeStatus(in).Jobs {
		got = append(got, j.ChatID)
	}
	if want := []string{"zulu", "mike", "alpha", "kilo"}; !slices.Equal(got, want) {
		t.Errorf("listed %v, want %v", got, want)
	}
}

// A job without a measured rate of its own is shown at the queue's latest one: the running
// job's when it measured more than nothing; else that of the job that worked last (the first
// in run order among those that worked at the same moment), never a measured 0; else the
// estimate.
func TestStatusLiveRate(t *testing.T) {
	t.Parallel()
	const now = 1_000_000
	rate := func(r float64) *float64 { return &r }
	job := func(chat, state string, perMinute *float64, activeAgo int64) models.BackfillJob {
		return models.BackfillJob{ChatID: chat, State: state, PerMinute: perMinute, ActiveAt: time.UnixMilli(now - activeAgo)}
	}
	for _, c := range []struct {
		name string
		jobs []models.BackfillJob
		want float64 // charlie's rate (an idle chat, never run)
	}{
		{"the running job's, though another worked later", []models.BackfillJob{
			job("alpha", models.BackfillRunning, rate(100), 10_000), job("bravo", models.BackfillPaused, rate(50), 5_000)}, 100},
		{"a running job that measured 0 gives none: the last one that worked", []models.BackfillJob{
			job("alpha", models.BackfillRunning, rate(0), 1_000), job("bravo", models.BackfillPaused, rate(50), 5_000)}, 50},
		{"a job that measured 0 is no rate, however late", []models.BackfillJob{
			job("bravo", models.BackfillPaused, rate(50), 5_000), job("delta", models.BackfillPaused, rate(0), 2_000)}, 50},
		{"of two that worked at once, the first in run order", []models.BackfillJob{
			job("bravo", models.BackfillPaused, rate(50), 5_000), job("delta", models.BackfillPaused, rate(70), 5_000)}, 50},
		{"none measured: the estimate", []models.BackfillJob{job("bravo", models.BackfillPaused, nil, 5_000)}, idleRowsPerMinute},
	} {
		in := statusInput{now: now, jobs: c.jobs}
		for i, chat := range []string{"alpha", "bravo", "charlie", "delta"} {
			in.members = append(in.members, models.BackfillMember{ID: int64(i + 1), ChatID: chat, Backend: "puppet",
				Counts: models.ScrapeCounts{Pending: 10, Total: 10}})
		}
		for _, j := range computeStatus(in).Jobs {
			if j.ChatID == "charlie" && (j.PerMinute != c.want || j.RateMeasured) {
				t.Errorf("%s: charlie at %v a minute (measured %v), want %v", c.name, j.PerMinute, j.RateMeasured, c.want)
			}
		}
	}
}

// The ETAs divide by the unrounded rate; only the rate shown is rounded to 0.1. At 0.14 rows a
// minute, 7 pending rows take 50 minutes (at the 0.1 shown they would take 70).
func TestStatusEtasUseTheUnroundedRate(t *testing.T) {
	t.Parallel()
	const now = 1_000_000
	rate := 0.14
	st := computeStatus(statusInput{now: now,
		members: []models.BackfillMember{{ID: 1, ChatID: "alpha", Backend: "puppet", Counts: models.ScrapeCounts{Pending: 7, Total: 7}}},
		jobs:    []models.BackfillJob{{ChatID: "alpha", State: models.BackfillRunning, PerMinute: &rate, ActiveAt: time.UnixMilli(now)}}})
	if len(st.Jobs) != 1 {
		t.Fatalf("jobs %+v, want alpha", st.Jobs)
	}
	j := st.Jobs[0]
	if j.EtaRun == nil || j.EtaTotal == nil {
		t.Fatalf("alpha has no ETA: %+v", j)
	}
	if j.PerMinute != 0.1 || *j.EtaRun != 50*time.Minute || *j.EtaTotal != 50*time.Minute {
		t.Errorf("perMinute %v, etaRun %v, etaTotal %v; want 0.1 shown and 50m from the unrounded 0.14", j.PerMinute, *j.EtaRun, *j.EtaTotal)
	}
}

// With nothing pending the totals have no ETA, not one of zero.
func TestStatusTotalsWithNothingPendingHaveNoEta(t *testing.T) {
	t.Parallel()
	st := computeStatus(statusInput{now: 1_000_000, members: []models.BackfillMember{
		{ID: 1, ChatID: "alpha", Backend: "puppet", Counts: models.ScrapeCounts{Cached: 5, Total: 5}}}})
	if tot := st.Totals; tot.Pending != 0 || tot.Eta != nil || tot.EtaStart != nil || tot.EtaRun != nil {
		t.Errorf("totals %+v: want no ETA", tot)
	}
}

// Counts add up to the largest int64 and stop there, never wrapping negative.
func TestSatAddStopsAtTheLargestCount(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ a, b, want int64 }{
		{1, 2, 3}, {math.MaxInt64, 0, math.MaxInt64}, {math.MaxInt64 - 5, 5, math.MaxInt64},
		{math.MaxInt64 - 1, 5, math.MaxInt64}, {5, math.MaxInt64, math.MaxInt64},
	} {
		if got := satAdd(c.a, c.b); got != c.want {
			t.Errorf("satAdd(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
