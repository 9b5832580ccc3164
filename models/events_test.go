package models_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// The events table's columns have one home (eventFields): they are the migrated table's
// columns, on both dialects, and an event with every field set comes back as it went in,
// whether written alone (an attempt's reschedule) or in a batch of verdicts.
func TestEventColumnsAreWrittenAndReadFromOneList(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		var table []string
		q := `SELECT name FROM pragma_table_info('events') WHERE name <> 'id' ORDER BY cid`
		if f.store.Dialect() == models.Postgres {
			q = `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()
				AND table_name = 'events' AND column_name <> 'id' ORDER BY ordinal_position`
		}
		if err := f.store.RawScan(f.ctx, &table, q); err != nil {
			t.Fatal(err)
		}
		if got := strings.Split(models.EventColumns, ", "); !slices.Equal(got, table) {
			t.Errorf("the store writes events' columns %v; the table has %v", got, table)
		}

		ann := f.User("ann")
		f.bulkPitches(ann, 2)
		jobs, err := f.store.ClaimDue(f.ctx, 2, lease, "test", 0)
		if err != nil || len(jobs) != 2 {
			t.Fatalf("claimed %d, %v", len(jobs), err)
		}
		full := func(job models.Job, outcome models.EventOutcome) models.Event {
			why, verdict := models.WhyUpstream, models.VerdictBlock
			status, runs, ms, bytes, admin := 503, 3, int64(37), int64(512), int64(1)
			conf, art, msg, note := 0.8125, 0.25, `it said "no" \ twice`, "a note ✓"
			return models.Event{At: time.UnixMilli(f.NowMs() - 5).UTC(), Event: models.TaskScreen, Kind: job.Kind, ItemID: job.ItemID,
				UserID: ann, Outcome: outcome, Why: &why, Status: &status, UpstreamMs: &ms, Attempt: 2, Confidence: &conf,
				Art: &art, RequestBytes: &bytes, Runs: &runs, Error: &msg, AdminID: &admin, Note: &note, Verdict: &verdict}
		}
		alone, batched := full(jobs[0], models.OutcomePending), full(jobs[1], models.OutcomeBlock)
		if ok, err := f.store.Reschedule(f.ctx, jobs[0], f.clk.Now().Add(time.Minute), models.WhyUpstream, nil, alone); err != nil || !ok {
			t.Fatalf("reschedule: %v %v", ok, err)
		}
		if ok, err := f.store.RecordScreen(f.ctx, jobs[1].Kind, jobs[1].ItemID, models.VerdictBlock, 0.8125, batched); err != nil || !ok {
			t.Fatalf("record: %v %v", ok, err)
		}
		events, err := f.store.ListEvents(f.ctx, models.EventFilter{UserID: ann}, 0, 10)
		if err != nil || len(events) != 2 {
			t.Fatalf("events %d, %v", len(events), err)
		}
		for _, got := range events {
			want := alone
			if got.ItemID == batched.ItemID {
				want = batched
			}
			want.ID = got.ID
			if !reflect.DeepEqual(got, want) {
				t.Errorf("event of item %d\n got %+v\nwant %+v", got.ItemID, got, want)
			}
		}
	})
}
