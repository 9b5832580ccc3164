package scheduler_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// screenResult is the screen result in the answer to a write.
type screenResult struct {
	State         string
	Verdict       *string
	Confidence    *float64
	Why           *string
	Attempts      int
	NextAttemptAt *string
}

type mineAnswer struct {
	Items []struct {
		Kind    string
		ID      int64
		State   string
		Verdict *string
		Score   *struct {
			Art      float64
			ArtRuns  []float64
			Criteria map[string]float64
			Model    string
			Rubric   string
		}
		Jobs []struct {
			Task          string
			Why           *string
			Attempts      int
			NextAttemptAt string
		}
	}
	Budget struct {
		Limit, Spent int64
		ResetsAt     string
	}
}

func mine(t *testing.T, env *owedtest.Env, token string) mineAnswer {
	t.Helper()
	r := env.Do(http.MethodGet, "/api/listeners/mine", token, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("mine: %d %s", r.Status, r.Body)
	}
	var m mineAnswer
	r.Decode(t, &m)
	return m
}

// stop waits for the app's background work (inline screens that outlived their answer, scores,
// authors' sweeps), cancelling it after d.
func stop(t *testing.T, env *owedtest.Env, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := env.App.Content.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// The write is the first claimer: the answer carries the verdict, and a song's score follows in
// the background.
func TestWriteScreensInlineAndScoreFollows(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		env := owedtest.NewEnv(t, db)
		_, tok := env.User("ann", "author")

		r := env.Do(http.MethodPost, "/api/listeners/songs", tok, map[string]string{"title": "Tide", "code": `s("bd")`})
		if r.Status != http.StatusCreated {
			t.Fatalf("publish: %d %s", r.Status, r.Body)
		}
		var song struct {
			Song     struct{ ID int64 }
			Revision struct{ ID int64 }
			Screen   screenResult
		}
		r.Decode(t, &song)
		if s := song.Screen; s.State != "public" || s.Verdict == nil || *s.Verdict != "allow" || s.Confidence == nil || *s.Confidence != 0.9 ||
			s.Why != nil || s.Attempts != 0 || s.NextAttemptAt != nil {
			t.Fatalf("song screen = %+v, want public/allow with nothing owed: %s", s, r.Body)
		}

		// The score follows in the background, nobody asking (waited for before the model changes).
		wait.Until(t, "the score in the background", func() bool {
			jobs, _ := owedtest.ListJobs(context.Background(), env.App.Store, models.JobFilter{Task: models.TaskScore}, 0, 10)
			return len(jobs) == 0
		})

		env.Model.SetVerdict("block", 0.8)
		r = env.Do(http.MethodPost, "/api/listeners/pitches", tok, map[string]string{"body": "spam"})
		var pitch struct{ Screen screenResult }
		r.Decode(t, &pitch)
		if r.Status != http.StatusCreated || pitch.Screen.State != "blocked" || *pitch.Screen.Verdict != "block" {
			t.Fatalf("pitch: %d %s", r.Status, r.Body)
		}
		env.Model.SetVerdict("allow", 0.9)
		r = env.Do(http.MethodPost, "/api/listeners/songs/"+itoa(song.Song.ID)+"/comments", tok, map[string]string{"body": "nice"})
		var comment struct{ Screen screenResult }
		r.Decode(t, &comment)
		if r.Status != http.StatusCreated || comment.Screen.State != "public" {
			t.Fatalf("comment: %d %s", r.Status, r.Body)
		}

		// The model failing: the answer says why the item waits and until when.
		env.Model.Fail(503, map[string]string{"retry-after-ms": "120000"})
		r = env.Do(http.MethodPost, "/api/listeners/pitches", tok, map[string]string{"body": "later"})
		var failed struct{ Screen screenResult }
		r.Decode(t, &failed)
		wantNext := owedtest.Start.Add(2 * time.Minute)
		if s := failed.Screen; s.State != "pending" || s.Verdict != nil || s.Why == nil || *s.Why != "upstream" || s.Attempts != 1 ||
			s.NextAttemptAt == nil || !sameTime(*s.NextAttemptAt, wantNext) {
			t.Fatalf("failed pitch screen = %s, want pending, upstream, 1 attempt, next at %v", r.Body, wantNext)
		}
		env.Model.Reset()

		stop(t, env, 10*time.Second)
		m := mine(t, env, tok)
		var scored bool
		for _, it := range m.Items {
			if it.Kind == "revision" && it.ID == song.Revision.ID {
				scored = it.Score != nil && len(it.Score.ArtRuns) == 3 && it.Score.Model == "critic" && it.Score.Rubric == "art-v1" && len(it.Jobs) == 0
			}
		}
		if !scored {
			t.Errorf("the revision was not scored in the background: %+v", m.Items)
		}
		if m.Budget.Spent != 1+1+1+1+3 || m.Budget.Limit != 100 || !sameTime(m.Budget.ResetsAt, models.BudgetReset(owedtest.Start)) {
			t.Errorf("budget = %+v, want 7 of 100 spent, resetting at midnight", m.Budget)
		}
	})
}

func sameTime(s string, want time.Time) bool {
	got, err := time.Parse(time.RFC3339Nano, s)
	return err == nil && got.Equal(want)
}

// With a slow model the write answers pending when its inline wait runs out; the screen goes
// on in the background and is recorded.
func TestWriteSlowModelAnswersPendingAndScreensInBackground(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		env := owedtest.NewEnv(t, db, func(c *app.Config) { c.InlineWait = 50 * time.Millisecond })
		annID, tok := env.User("ann", "author")
		release := make(chan struct{})
		env.Model.Handle(func(w http.ResponseWriter, r *http.Request) bool {
			<-release // the model answers only when the test says so
			return false
		})

		start := time.Now()
		r := env.Do(http.MethodPost, "/api/listeners/songs", tok, map[string]string{"title": "Slow", "code": "c"})
		took := time.Since(start)
		var got struct {
			Revision struct{ ID int64 }
			Screen   screenResult
		}
		r.Decode(t, &got)
		if r.Status != http.StatusCreated || got.Screen.State != "pending" || got.Screen.Why != nil || got.Screen.Attempts != 0 ||
			got.Screen.NextAttemptAt == nil || !sameTime(*got.Screen.NextAttemptAt, owedtest.Start) {
			t.Fatalf("answer = %d %s, want 201 pending, nothing failed yet", r.Status, r.Body)
		}
		if took > 3*time.Second {
			t.Errorf("the write took %v with a 50ms inline wait", took)
		}
		// The screen is in flight: its call reaches the model (on a loaded machine, maybe only
		// after the write answered), and it is the only one.
		wait.Until(t, "the screen's call to reach the model", func() bool { return env.Model.Calls() >= 1 })
		if n := env.Model.Calls(); n != 1 {
			t.Errorf("model calls = %d, want the one screen in flight", n)
		}
		close(release)
		// The screen ends in the background, and the score follows it there.
		wait.Until(t, "the screen and the score in the background", func() bool {
			items, _ := owedtest.Mine(context.Background(), env.App.Store, annID)
			return len(items) == 1 && items[0].Verdict != nil && items[0].Score != nil
		})
		stop(t, env, 10*time.Second)
		m := mine(t, env, tok)
		if len(m.Items) != 1 || m.Items[0].State != "public" || m.Items[0].Score == nil {
			t.Errorf("after the background screen: %+v, want public and scored", m.Items)
		}
	})
}

// The author's view runs their due jobs in the background: it never waits for them, runs the
// author's jobs only, and never runs two sweeps at once for one author.
func TestMineSweepsTheAuthorsJobsInBackground(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		env := owedtest.NewEnv(t, db)
		annID, ann := env.User("ann", "author")
		bobID, bob := env.User("bob", "author")
		ctx := context.Background()
		for _, who := range []struct {
			id   int64
			body string
		}{{annID, "ann-1"}, {annID, "ann-2"}, {bobID, "bob-1"}} {
			if _, err := env.App.Store.CreatePitch(ctx, who.id, who.body); err != nil { // written, not yet screened
				t.Fatal(err)
			}
		}
		m := mine(t, env, ann)
		if len(m.Items) != 2 {
			t.Fatalf("ann sees %d items, want her 2", len(m.Items))
		}
		// The sweep runs in the background: wait for its two calls (a stop before it claimed
		// anything would rightly claim nothing), then stop, which waits for the sweep to end.
		wait.Until(t, "ann's background sweep to ask for her two items", func() bool { return env.Model.Calls() >= 2 })
		stop(t, env, 10*time.Second)
		for _, q := range env.Model.Requests() {
			if !strings.HasPrefix(q.Subject.Text, "ann-") {
				t.Errorf("ann's view screened %q", q.Subject.Text)
			}
		}
		if env.Model.Calls() != 2 {
			t.Errorf("calls = %d, want ann's 2", env.Model.Calls())
		}
		for _, it := range mine(t, env, ann).Items {
			if it.State != "public" || len(it.Jobs) != 0 {
				t.Errorf("ann's item after her sweep: %+v", it)
			}
		}
		bobs := mine(t, env, bob).Items // (stopped: this view starts nothing)
		if len(bobs) != 1 || bobs[0].State != "pending" || len(bobs[0].Jobs) != 1 || bobs[0].Jobs[0].Task != "screen" {
			t.Errorf("bob's item = %+v, want still pending", bobs)
		}
	})
}

func TestMineNeverWaitsForTheModelNorSweepsTwice(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		env := owedtest.NewEnv(t, db, func(c *app.Config) { c.SweepConcurrency = 1 })
		annID, ann := env.User("ann", "author")
		for _, body := range []string{"one", "two", "three"} {
			if _, err := env.App.Store.CreatePitch(context.Background(), annID, body); err != nil {
				t.Fatal(err)
			}
		}
		var arrived atomic.Int64
		env.Model.Handle(func(w http.ResponseWriter, r *http.Request) bool {
			arrived.Add(1)
			return false
		})
		env.Model.Hang()

		start := time.Now()
		m := mine(t, env, ann)
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("mine took %v while the model hangs", took)
		}
		if len(m.Items) != 3 {
			t.Fatalf("items = %d", len(m.Items))
		}
		wait.Until(t, "the background sweep to ask the model", func() bool { return arrived.Load() == 1 })

		// More views while the sweep hangs: each answers at once, and none starts a second sweep
		// (which, with one job at a time per sweep, would ask for another job).
		for range 5 {
			start := time.Now()
			env.Do(http.MethodGet, "/api/listeners/mine", ann, nil)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("mine took %v while a sweep hangs", took)
			}
		}
		// Each view has answered, so any sweep it started is under way: only the first is.
		if n := env.App.Content.AuthorSweepsUnderWay(); n != 1 {
			t.Errorf("%d author sweeps under way, want the first one alone", n)
		}
		if n := arrived.Load(); n != 1 {
			t.Errorf("%d model requests, want the first sweep's one: a second sweep ran for the same author", n)
		}
		stop(t, env, 200*time.Millisecond) // cancels the hung sweep and frees its lease

		jobs, _ := owedtest.ListJobs(context.Background(), env.App.Store, models.JobFilter{UserID: annID}, 0, 10)
		if len(jobs) != 3 {
			t.Fatalf("jobs = %d, want 3 still owed", len(jobs))
		}
		for _, j := range jobs {
			if j.LeaseUntil != nil || j.Attempts != 0 {
				t.Errorf("job after stop = %+v, want free with no attempt counted", j)
			}
		}
	})
}

// After an author's sweep ends, their next view starts another.
func TestMineSweepsAgainAfterTheLastSweepEnded(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		env := owedtest.NewEnv(t, db)
		annID, ann := env.User("ann", "author")
		ctx := context.Background()
		env.App.Store.CreatePitch(ctx, annID, "first")
		mine(t, env, ann)
		wait.Until(t, "the first sweep", func() bool {
			jobs, _ := owedtest.ListJobs(ctx, env.App.Store, models.JobFilter{UserID: annID}, 0, 10)
			return len(jobs) == 0
		})
		env.App.Store.CreatePitch(ctx, annID, "second")
		// The first sweep may still be finishing; views keep coming until one sweeps again.
		wait.Until(t, "a second sweep", func() bool {
			env.Do(http.MethodGet, "/api/listeners/mine", ann, nil)
			jobs, _ := owedtest.ListJobs(ctx, env.App.Store, models.JobFilter{UserID: annID}, 0, 10)
			return len(jobs) == 0
		})
		if env.Model.Calls() != 2 {
			t.Errorf("calls = %d, want 2", env.Model.Calls())
		}
	})
}

// The global sweep (the cron's) settles everyone's jobs, including the scores its screens make.
func TestGlobalSweepSettlesEveryone(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		env := owedtest.NewEnv(t, db, func(c *app.Config) { c.SweepConcurrency = 4 })
		ctx := context.Background()
		var ids []int64
		for _, name := range []string{"ann", "bob", "cat"} {
			id, _ := env.User(name, "author")
			ids = append(ids, id)
			env.App.Store.CreateSong(ctx, id, "S", "c")
			env.App.Store.CreatePitch(ctx, id, "p")
		}
		if n := env.Sweep(); n != 3*3 {
			t.Errorf("swept %d, want 3 screens of revisions, 3 of pitches, 3 scores", n)
		}
		if st, _ := env.App.Store.Stats(ctx); st.Total != 0 {
			t.Errorf("jobs left: %+v", st)
		}
		if got := env.Model.MaxInFlight(); got > 4*3 {
			t.Errorf("max in flight %d, above 4 jobs of 3 runs", got)
		}
		for _, id := range ids {
			if spent, _ := env.App.Store.Spent(ctx, id, env.Clock.Now()); spent != 5 {
				t.Errorf("user %d spent %d, want 5", id, spent)
			}
		}
	})
}

// An operator who raises the model cap gets that many jobs of a backlog asked at once without
// also raising the sweep's own bound: at the defaults the cap, not the sweep, is the limit.
func TestSweepRunsAsManyAsARaisedModelCapAllows(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		const pending = 150
		env := owedtest.NewEnv(t, db, func(c *app.Config) {
			c.ModelConcurrency = 400
			c.DailyBudget = 1000
			c.ModelTimeout = 5 * time.Second // a sweep that never reaches 150 at once fails in 5 s
		})
		annID, _ := env.User("ann", "author")
		for range pending {
			if _, err := env.App.Store.CreatePitch(context.Background(), annID, "p"); err != nil {
				t.Fatal(err)
			}
		}
		env.Model.HoldUntil(pending) // no answer until every pending screen has been asked
		if n := env.Sweep(); n != pending {
			t.Errorf("swept %d, want %d", n, pending)
		}
		if got := env.Model.MaxInFlight(); got != pending {
			t.Errorf("at most %d asked at once, want all %d: the sweep's default bound is below the cap", got, pending)
		}
		if st, _ := env.App.Store.Stats(context.Background()); st.Total != 0 {
			t.Errorf("jobs left: %+v", st)
		}
	})
}
