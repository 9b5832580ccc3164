package models_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// MineVersion reads what the author's view is made of: item counts and id sums, the author's
// jobs (and whether one is due, as a claim would judge it), today's spend; nobody else's.
func TestMineVersion(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann, bob := f.user("ann"), f.user("bob")
		version := func() models.MineVersion {
			t.Helper()
			v, err := f.store.MineVersion(f.ctx, ann, f.clk.Now())
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		if v := version(); v.Items != [3]models.ItemCount{} || len(v.Jobs) != 0 || v.Due || v.Spent != 0 || v.Day != "2026-11-30" {
			t.Fatalf("an empty author's version = %+v", v)
		}

		song, rev, _ := f.store.CreateSong(f.ctx, ann, "S", "v1")
		rev2, _ := f.store.CreateRevision(f.ctx, ann, song.ID, "", "v2")
		c, _ := f.store.CreateComment(f.ctx, ann, song.ID, "hi")
		p1, _ := f.store.CreatePitch(f.ctx, ann, "one")
		p2, _ := f.store.CreatePitch(f.ctx, ann, "two")
		f.store.CreatePitch(f.ctx, bob, "bob's")
		f.store.RecordScreen(f.ctx, models.KindPitch, p2.ID, models.VerdictAllow, 0.9, models.Event{Event: "screen", Outcome: "allow"})
		f.store.Charge(f.ctx, bob, 2, f.clk.Now())

		v := version()
		want := [3]models.ItemCount{{N: 2, IDSum: rev.ID + rev2.ID}, {N: 1, IDSum: c.ID}, {N: 2, IDSum: p1.ID + p2.ID}}
		if v.Items != want {
			t.Errorf("items = %+v, want %+v", v.Items, want)
		}
		// Screens owed: two revisions, the comment, the first pitch; by id, whole rows.
		jobs, err := f.store.JobsOfUser(f.ctx, ann)
		if err != nil || len(jobs) != 4 {
			t.Fatalf("ann's jobs: %+v %v", jobs, err)
		}
		if !reflect.DeepEqual(v.Jobs, jobs) {
			t.Errorf("version's jobs = %+v, want %+v", v.Jobs, jobs)
		}
		if !v.Due || v.Spent != 0 {
			t.Errorf("version = %+v; want due (new jobs are due at once), nothing spent", v)
		}
		items, err := f.store.MineWithJobs(f.ctx, ann, v.Jobs)
		if err != nil {
			t.Fatal(err)
		}
		if mine, err := f.store.Mine(f.ctx, ann); err != nil || !reflect.DeepEqual(items, mine) {
			t.Errorf("MineWithJobs(version's jobs) = %+v, Mine = %+v, %v", items, mine, err)
		}

		// Leased jobs are not due; when the leases run out, they are again.
		claimed, err := f.store.ClaimDue(f.ctx, 10, lease, "w", ann)
		if err != nil || len(claimed) != 4 {
			t.Fatalf("claim: %d %v", len(claimed), err)
		}
		if v := version(); v.Due {
			t.Errorf("every job leased, yet due: %+v", v.Jobs)
		}
		f.clk.Advance(lease)
		if v := version(); !v.Due {
			t.Errorf("every lease run out, yet nothing due: %+v", v.Jobs)
		}
		// Rescheduled for later: nothing due until then.
		for _, j := range claimed {
			if ok, err := f.store.Reschedule(f.ctx, j, f.clk.Now().Add(time.Hour), models.WhyBudget, nil, models.Event{Event: "screen", Outcome: "pending"}); err != nil || !ok {
				t.Fatalf("reschedule: %v %v", ok, err)
			}
		}
		v = version()
		if v.Due || len(v.Jobs) != 4 || v.Jobs[0].Attempts != 1 || v.Jobs[0].Why == nil || *v.Jobs[0].Why != models.WhyBudget {
			t.Errorf("after the reschedules: due %v, jobs %+v", v.Due, v.Jobs)
		}
		f.clk.Advance(time.Hour)
		if v := version(); !v.Due {
			t.Errorf("an hour later, nothing due: %+v", v.Jobs)
		}

		// Today's spend, and only today's.
		f.store.Charge(f.ctx, ann, 3, f.clk.Now())
		if v := version(); v.Spent != 3 {
			t.Errorf("spent = %d, want 3", v.Spent)
		}
		if v, err := f.store.MineVersion(f.ctx, ann, f.clk.Now().Add(24*time.Hour)); err != nil || v.Spent != 0 || v.Day != "2026-12-01" {
			t.Errorf("tomorrow's version = %+v, %v", v, err)
		}

		// A deletion takes the item from the counts and its jobs with it.
		if err := f.store.DeleteItem(f.ctx, ann, models.KindComment, c.ID); err != nil {
			t.Fatal(err)
		}
		if v := version(); v.Items[1] != (models.ItemCount{}) || len(v.Jobs) != 3 {
			t.Errorf("after deleting the comment: %+v", v)
		}
	})
}
