package models_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// Many verdicts recorded at once (so they share batches), each item's twice: every item gets
// exactly one verdict and one event, exactly one of its two calls reports it recorded, a
// deleted item gets none, and every screen job is settled.
func TestConcurrentVerdictsRecordedOnceEach(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		const authors, each = 8, 25
		for i := range authors {
			f.bulkPitches(f.User("author"+string(rune('a'+i))), each)
		}
		jobs, err := f.store.ClaimDue(f.ctx, authors*each, lease, "test", 0)
		if err != nil || len(jobs) != authors*each {
			t.Fatalf("claimed %d, %v", len(jobs), err)
		}
		gone := jobs[7]
		f.Exec(`DELETE FROM pitches WHERE id = ?`, gone.ItemID)

		recorded := make([]atomic.Int32, len(jobs))
		var wg sync.WaitGroup
		for range 2 {
			for i, j := range jobs {
				wg.Go(func() {
					ev := models.Event{Event: models.TaskScreen, Kind: j.Kind, ItemID: j.ItemID, UserID: j.UserID, Outcome: models.OutcomeAllow}
					ok, err := f.store.RecordScreen(f.ctx, j.Kind, j.ItemID, models.VerdictAllow, 0.9, ev)
					if err != nil {
						t.Errorf("record %d: %v", j.ItemID, err)
					}
					if ok {
						recorded[i].Add(1)
					}
				})
			}
		}
		wg.Wait()
		for i, j := range jobs {
			want := int32(1)
			if j.ItemID == gone.ItemID {
				want = 0
			}
			if got := recorded[i].Load(); got != want {
				t.Errorf("pitch %d reported recorded %d times, want %d", j.ItemID, got, want)
			}
		}
		var screens, events, perItem int64
		f.store.RawScan(f.ctx, &screens, `SELECT count(*) FROM screens`)
		f.store.RawScan(f.ctx, &events, `SELECT count(*) FROM events`)
		f.store.RawScan(f.ctx, &perItem, `SELECT count(*) FROM (SELECT item_id FROM events GROUP BY item_id HAVING count(*) > 1) d`)
		if want := int64(len(jobs) - 1); screens != want || events != want || perItem != 0 {
			t.Errorf("screens %d, events %d, items with two events %d; want %d, %d, 0", screens, events, perItem, want, want)
		}
		if n := f.CountJobs(); n != 0 {
			t.Errorf("%d jobs left, want every one settled", n)
		}
	})
}

// Charges of many authors at once (so they share batches), some of them for an author who
// does not exist: each author is charged exactly their calls up to their limit, and the
// failing charges fail alone.
func TestConcurrentChargesOfManyAuthors(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		const authors, calls, limit = 12, 15, 10
		f := newFixture(t, db, owedtest.DailyLimit(limit))
		ids := make([]int64, authors)
		for i := range ids {
			ids[i] = f.User("author" + string(rune('a'+i)))
		}
		now := f.clk.Now()
		accepted := make([]atomic.Int64, authors)
		spentSeen := make([][]int64, authors) // the spend each accepted charge was told
		var mu sync.Mutex
		var failed atomic.Int64
		var wg sync.WaitGroup
		for c := range calls {
			for i, id := range ids {
				wg.Go(func() {
					if spent, ok, err := f.store.Charge(f.ctx, id, 1, now); err != nil {
						t.Errorf("charge of author %d: %v", id, err)
					} else if ok {
						accepted[i].Add(1)
						mu.Lock()
						spentSeen[i] = append(spentSeen[i], spent)
						mu.Unlock()
					}
				})
			}
			if c%5 == 0 {
				wg.Go(func() {
					if _, ok, err := f.store.Charge(f.ctx, 1<<40, 1, now); err == nil && ok {
						t.Error("a charge of an author who does not exist was accepted")
					} else {
						failed.Add(1)
					}
				})
			}
		}
		wg.Wait()
		for i, id := range ids {
			spent, err := f.store.Spent(f.ctx, id, now)
			if err != nil || spent != limit || accepted[i].Load() != limit {
				t.Errorf("author %d: spent %d (%v), accepted %d; want %d each", id, spent, err, accepted[i].Load(), limit)
			}
			// As if one after another: the accepted charges were told 1, 2, … limit.
			slices.Sort(spentSeen[i])
			for k, got := range spentSeen[i] {
				if got != int64(k+1) {
					t.Errorf("author %d: charges were told spends %v, want 1 to %d once each", id, spentSeen[i], limit)
					break
				}
			}
		}
		if failed.Load() != 3 {
			t.Errorf("%d charges of the missing author failed, want 3", failed.Load())
		}
	})
}

// A verdict's event is kept exactly as the caller gave it, absent values as NULL, whether the
// verdict is written alone or with others, with a webhook to owe or without.
func TestRecordedEventKeepsEveryField(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		for _, subscribed := range []bool{false, true} {
			t.Run(fmt.Sprint("subscribed=", subscribed), func(t *testing.T) { recordTwoEvents(t, db, subscribed) })
		}
	})
}

func recordTwoEvents(t *testing.T, db string, subscribed bool) {
	f := newFixture(t, db)
	if subscribed {
		if _, err := f.store.CreateWebhook(f.ctx, "http://hooks.example/owed", []string{models.EventItemScreened}, "whsec_dGVzdA=="); err != nil {
			t.Fatal(err)
		}
	}
	ann := f.User(fmt.Sprint("ann-", subscribed)) // both runs share the database
	f.bulkPitches(ann, 2)
	jobs, err := f.store.ClaimDue(f.ctx, 2, lease, "test", 0)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claimed %d, %v", len(jobs), err)
	}
	status, ms, bytes, conf, attempt := 200, int64(37), int64(512), 0.8125, 3
	full := models.Event{At: time.UnixMilli(f.NowMs() - 5).UTC(), Event: models.TaskScreen, Kind: jobs[0].Kind, ItemID: jobs[0].ItemID,
		UserID: ann, Outcome: models.OutcomeBlock, Status: &status, UpstreamMs: &ms, Attempt: attempt,
		Confidence: &conf, RequestBytes: &bytes}
	bare := models.Event{Event: models.TaskScreen, Kind: jobs[1].Kind, ItemID: jobs[1].ItemID, UserID: ann, Outcome: models.OutcomeAllow}
	var wg sync.WaitGroup
	for i, ev := range []models.Event{full, bare} {
		wg.Go(func() {
			if ok, err := f.store.RecordScreen(f.ctx, ev.Kind, ev.ItemID, models.Verdict(ev.Outcome), 0.8125, ev); !ok || err != nil {
				t.Errorf("record %d: %v, %v", i, ok, err)
			}
		})
	}
	wg.Wait()
	events, err := f.store.ListEvents(f.ctx, models.EventFilter{UserID: ann}, 0, 10)
	if err != nil || len(events) != 2 {
		t.Fatalf("events %d, %v: %+v", len(events), err, events)
	}
	for _, got := range events {
		want := bare
		if got.ItemID == full.ItemID {
			want = full
		} else {
			want.At = time.UnixMilli(f.NowMs()).UTC() // an event given no time is stamped with the store's clock
		}
		want.ID = got.ID
		if fmt.Sprint(eventFields(got)) != fmt.Sprint(eventFields(want)) {
			t.Errorf("event\n got %v\nwant %v", eventFields(got), eventFields(want))
		}
	}
	var deliveries int64
	f.store.RawScan(f.ctx, &deliveries, `SELECT count(*) FROM webhook_deliveries`)
	if want := map[bool]int64{false: 0, true: 2}[subscribed]; deliveries != want {
		t.Errorf("%d deliveries, want %d", deliveries, want)
	}
}

// eventFields shows an event's optional fields by value, so two events compare by what they hold.
func eventFields(ev models.Event) []any {
	show := func(p any) any {
		switch v := p.(type) {
		case *int:
			if v != nil {
				return *v
			}
		case *int64:
			if v != nil {
				return *v
			}
		case *float64:
			if v != nil {
				return *v
			}
		case *string:
			if v != nil {
				return *v
			}
		}
		return nil
	}
	return []any{ev.ID, ev.At, ev.Event, ev.Kind, ev.ItemID, ev.UserID, ev.Outcome, show(ev.Why), show(ev.Status),
		show(ev.UpstreamMs), ev.Attempt, show(ev.Confidence), show(ev.Art), show(ev.RequestBytes), show(ev.Runs)}
}
