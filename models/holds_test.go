package models_test

import (
	"slices"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/webhooks"
)

// Held work is claimed by no claimer on any replica: a second store on the same database (a
// replica) sees the hold one set, at its next claim, and sees it lifted the same way; held
// jobs keep their rows, so the lift makes them due at once.
func TestHoldsStopEveryClaimOnEveryReplica(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		replica := owedtest.Store(t, db, f.clk)
		ann := f.User("ann")
		_, rev := f.rawSong(ann, "Tide", `s("bd")`)
		pitch := f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, 'hear me', ?)`, ann, f.NowMs())
		// The revision is allowed: it owes a score, the pitch a screen.
		if ok, err := f.store.RecordScreen(f.ctx, models.KindRevision, rev, models.VerdictAllow, 0.9,
			models.Event{Event: models.TaskScreen, Kind: models.KindRevision, ItemID: rev, UserID: ann, Outcome: models.OutcomeAllow}); err != nil || !ok {
			t.Fatalf("record: %v %v", ok, err)
		}
		if _, err := f.store.CreateWebhook(f.ctx, "https://93.184.215.14/hook", []string{"*"}, webhooks.NewSecret()); err != nil {
			t.Fatal(err)
		}
		if err := f.store.EnqueueWebhook(f.ctx, models.EventItemScreened, map[string]any{"x": 1}); err != nil {
			t.Fatal(err)
		}

		if err := f.store.SetHolds(f.ctx, models.Holds{Screen: true, Deliveries: true}, 1); err != nil {
			t.Fatal(err)
		}
		if h, err := replica.Holds(f.ctx); err != nil || h != (models.Holds{Screen: true, Deliveries: true}) {
			t.Fatalf("the replica reads holds %+v %v", h, err)
		}
		// Screens held: the replica's sweep takes the score alone, its inline claim nothing.
		got, err := replica.ClaimDue(f.ctx, 10, lease, "replica", 0)
		if err != nil || len(got) != 1 || got[0].Task != models.TaskScore || got[0].ItemID != rev {
			t.Fatalf("claim while screens are held = %+v %v, want the score alone", got, err)
		}
		if _, ok, err := replica.ClaimItem(f.ctx, models.TaskScreen, models.KindPitch, pitch, lease, "replica"); err != nil || ok {
			t.Fatalf("inline claim of a held screen: %v %v", ok, err)
		}
		if got, err := replica.ClaimDue(f.ctx, 10, lease, "replica", ann); err != nil || len(got) != 0 {
			t.Fatalf("the author's claim while held = %+v %v", got, err)
		}
		if ds, err := replica.ClaimDeliveries(f.ctx, 10, lease, "replica"); err != nil || len(ds) != 0 {
			t.Fatalf("deliveries claimed while held: %+v %v", ds, err)
		}
		if next, err := replica.NextDeliveryDue(f.ctx); err != nil || next != nil {
			t.Fatalf("next delivery while held = %v %v, want none", next, err)
		}
		screen := f.Jobs(models.KindPitch, pitch)[0]
		if screen.Attempts != 0 || screen.Why != nil || screen.LeaseUntil != nil {
			t.Fatalf("held job = %+v, want its row untouched", screen)
		}
		if n, err := f.store.CountJobs(f.ctx, models.JobFilter{Why: models.WhyHeld}); err != nil || n != 1 {
			t.Fatalf("jobs why held = %d %v, want the screen", n, err)
		}

		// Lifted by the replica: the first store claims the screen and the delivery at once.
		if err := replica.SetHolds(f.ctx, models.Holds{}, 1); err != nil {
			t.Fatal(err)
		}
		got, err = f.store.ClaimDue(f.ctx, 10, lease, "first", 0)
		if err != nil || len(got) != 1 || got[0].ID != screen.ID {
			t.Fatalf("claim after the lift = %+v %v, want the screen", got, err)
		}
		if ds, err := f.store.ClaimDeliveries(f.ctx, 10, lease, "first"); err != nil || len(ds) != 1 {
			t.Fatalf("deliveries after the lift = %+v %v", ds, err)
		}
		if n, err := f.store.CountJobs(f.ctx, models.JobFilter{Why: models.WhyHeld}); err != nil || n != 0 {
			t.Fatalf("jobs why held after the lift = %d %v", n, err)
		}
	})
}

// An open breaker puts due jobs off to its next probe, but not held ones: held work is not
// asked either way, and keeps its row, so lifting the hold makes it due at its own time with
// its own why.
func TestBreakerLeavesHeldJobsAlone(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		held := f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, 'held', ?)`, ann, f.NowMs())
		_, rev := f.rawSong(ann, "Tide", `s("bd")`)
		if ok, err := f.store.RecordScreen(f.ctx, models.KindRevision, rev, models.VerdictAllow, 0.9,
			models.Event{Event: models.TaskScreen, Kind: models.KindRevision, ItemID: rev, UserID: ann, Outcome: models.OutcomeAllow}); err != nil || !ok {
			t.Fatalf("record: %v %v", ok, err)
		}
		if err := f.store.SetHolds(f.ctx, models.Holds{Screen: true}, 1); err != nil {
			t.Fatal(err)
		}
		probe := f.clk.Now().Add(5 * time.Minute)
		status := 503
		if _, ok, err := f.store.OpenBreaker(f.ctx, 10, models.WhyUpstream, &status, nil, probe); err != nil || !ok {
			t.Fatalf("open the breaker: %v %v", ok, err)
		}
		n, err := f.store.ParkDue(f.ctx, probe, 0)
		if err != nil || n != 1 {
			t.Fatalf("ParkDue moved %d jobs (%v), want the score alone", n, err)
		}
		screen := f.Jobs(models.KindPitch, held)[0]
		if screen.Why != nil || screen.DueAt.UnixMilli() != f.NowMs() || screen.Status != nil {
			t.Errorf("held screen after the breaker parked = %+v, want its row untouched", screen)
		}
		score := f.Jobs(models.KindRevision, rev)
		if len(score) != 1 || score[0].DueAt.UnixMilli() != probe.UnixMilli() || score[0].Why != nil || score[0].Attempts != 0 {
			t.Errorf("score after the breaker parked = %+v, want it put off to the probe, untried, its why its own", score)
		}
	})
}

// A job filter given the holds as read before (JobFilter.Held, what the admin's list passes so
// that a filter by why reads only the why index) selects exactly the jobs the same filter
// selects with the holds read in the statement, for every why and every hold.
func TestJobFilterWithHoldsKnownSelectsTheSame(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		_, rev := f.rawSong(ann, "Tide", `s("bd")`)
		if ok, err := f.store.RecordScreen(f.ctx, models.KindRevision, rev, models.VerdictAllow, 0.9,
			models.Event{Event: models.TaskScreen, Kind: models.KindRevision, ItemID: rev, UserID: ann, Outcome: models.OutcomeAllow}); err != nil || !ok {
			t.Fatalf("record: %v %v", ok, err)
		}
		// Screens of pitches: one ready, two waiting for the budget, one upstream; the score ready.
		var pitches []int64
		for i := range 4 {
			pitches = append(pitches, f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`, ann, "p"+string(rune('a'+i)), f.NowMs()))
		}
		f.Exec(`UPDATE content_jobs SET why = 'budget' WHERE kind = 'pitch' AND item_id IN (?, ?)`, pitches[1], pitches[2])
		f.Exec(`UPDATE content_jobs SET why = 'upstream' WHERE kind = 'pitch' AND item_id = ?`, pitches[3])
		f.Exec(`UPDATE content_jobs SET why = 'budget' WHERE task = 'score'`)

		for _, h := range []models.Holds{{}, {Screen: true}, {Score: true}, {Screen: true, Score: true}} {
			if err := f.store.SetHolds(f.ctx, h, 1); err != nil {
				t.Fatal(err)
			}
			for _, why := range []models.Why{"", models.WhyHeld, "none", "budget", "upstream"} {
				for _, task := range []models.Task{"", models.TaskScreen} {
					inSQL := models.JobFilter{Why: why, Task: task}
					known := inSQL
					known.Held = &h
					want, err := f.store.CountJobs(f.ctx, inSQL)
					if err != nil {
						t.Fatal(err)
					}
					got, err := f.store.CountJobs(f.ctx, known)
					if err != nil || got != want {
						t.Errorf("holds %+v, why %q, task %q: %d jobs with the holds known, %d read in SQL (%v)", h, why, task, got, want, err)
					}
					wantRows, err := owedtest.ListJobs(f.ctx, f.store, inSQL, 0, 100)
					if err != nil {
						t.Fatal(err)
					}
					gotRows, err := owedtest.ListJobs(f.ctx, f.store, known, 0, 100)
					if err != nil || len(gotRows) != len(wantRows) || int64(len(wantRows)) != want {
						t.Errorf("holds %+v, why %q, task %q: lists %d with the holds known, %d in SQL, count %d (%v)", h, why, task, len(gotRows), len(wantRows), want, err)
					}
				}
			}
		}
		// And the expected numbers for one case, so the two cannot agree on nothing.
		if err := f.store.SetHolds(f.ctx, models.Holds{Score: true}, 1); err != nil {
			t.Fatal(err)
		}
		h := models.Holds{Score: true}
		for why, want := range map[models.Why]int64{models.WhyHeld: 1, "budget": 2, "upstream": 1, "none": 1} {
			if n, err := f.store.CountJobs(f.ctx, models.JobFilter{Why: why, Held: &h}); err != nil || n != want {
				t.Errorf("scores held: why %s counts %d (%v), want %d", why, n, err, want)
			}
		}
	})
}

// The held rule has one home (Holds.Task): the SQL written from it holds the same tasks for
// every combination of holds, in a claim's condition, in the counts' condition and in the
// author's view's version.
func TestHeldRuleInSQLAgreesWithGo(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		f.jobOfEachTask(ann)
		for bits := range 1 << len(models.Tasks) {
			h := models.Holds{Screen: bits&1 != 0, Score: bits&2 != 0}
			if err := f.store.SetHolds(f.ctx, h, 1); err != nil {
				t.Fatal(err)
			}
			var free, held []string
			if err := f.store.RawScan(f.ctx, &free, `SELECT task FROM content_jobs WHERE 1 = 1`+models.HeldTasksSQL+` ORDER BY task`); err != nil {
				t.Fatal(err)
			}
			if err := f.store.RawScan(f.ctx, &held, `SELECT task FROM content_jobs WHERE `+models.HeldTaskSQL+` ORDER BY task`); err != nil {
				t.Fatal(err)
			}
			var wantFree, wantHeld []string
			for _, task := range []models.Task{models.TaskScore, models.TaskScreen} { // by name, as ORDER BY task
				if h.Task(task) {
					wantHeld = append(wantHeld, string(task))
				} else {
					wantFree = append(wantFree, string(task))
				}
			}
			if !slices.Equal(free, wantFree) || !slices.Equal(held, wantHeld) {
				t.Errorf("holds %+v: SQL leaves %v free and holds %v; Holds.Task: %v and %v", h, free, held, wantFree, wantHeld)
			}
			v, err := f.store.MineVersion(f.ctx, ann, f.clk.Now())
			if err != nil {
				t.Fatal(err)
			}
			if v.Held != h {
				t.Errorf("holds %+v: the view's version reads %+v", h, v.Held)
			}
		}
	})
}

// The calls a task costs have one home (Task.Calls): the SQL that judges a budget's room
// charges the same.
func TestTaskCallsInSQLAgreeWithGo(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		f.jobOfEachTask(ann)
		for _, task := range models.Tasks {
			var calls []int64
			if err := f.store.RawScan(f.ctx, &calls, `SELECT `+models.TaskCallsSQL+` FROM content_jobs WHERE task = ?`, task); err != nil {
				t.Fatal(err)
			}
			if len(calls) != 1 || calls[0] != int64(task.Calls()) || task.Calls() < 1 {
				t.Errorf("%s: SQL charges %v calls, Task.Calls %d", task, calls, task.Calls())
			}
		}
	})
}

// jobOfEachTask owes one due job of each task, of the author's pitch 1000+i (rows no trigger
// made: the jobs are what the test reads).
func (f *fixture) jobOfEachTask(userID int64) {
	f.t.Helper()
	for i, task := range models.Tasks {
		f.Exec(`INSERT INTO content_jobs (task, kind, item_id, user_id, due_at, created_at) VALUES (?, 'pitch', ?, ?, ?, ?)`,
			task, 1000+i, userID, f.NowMs(), f.NowMs())
	}
}
