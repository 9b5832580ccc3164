package scheduler

import (
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
	if got := EstimatedPerMinute(BackfillSettings{BatchSize: 10}, 0, 0); got != idleRowsPerMinute {
		t.Errorf("no gaps, no pause: %v a minute, want the idle rate %v", got, float64(idleRowsPerMinute))
	}
	if got := EstimatedPerMinute(BackfillSettings{BatchSize: 10}, time.Millisecond, time.Millisecond); got != 60_000 {
		t.Errorf("1 ms a row: %v a minute, want 60000", got)
	}
}

// A rate limit or a walk that ends at this very instant holds nothing: the status shows
// neither, and one that ends a millisecond later shows both.
func TestStatusLimitAndWalkEndingNowAreOver(t *testing.T) {
	t.Parallel()
	const now = 1_000_000
	st := computeStatus(statusInput{now: now, localLimit: now, walkUntil: now, walkChat: "hotel"})
	if st.LimitedUntil != nil || st.WalkingUntil != nil || st.WalkingChat != nil {
		t.Errorf("ending now: limitedUntil %v, walkingUntil %v, walkingChat %v; want none", st.LimitedUntil, st.WalkingUntil, st.WalkingChat)
	}
	st = computeStatus(statusInput{now: now, localLimit: now + 1, walkUntil: now + 1, walkChat: "hotel"})
	if st.LimitedUntil == nil || st.WalkingUntil == nil || st.WalkingChat == nil || *st.WalkingChat != "hotel" {
		t.Errorf("ending a millisecond later: limitedUntil %v, walkingUntil %v, walkingChat %v; want all", st.LimitedUntil, st.WalkingUntil, st.WalkingChat)
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
