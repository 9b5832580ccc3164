package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
	"github.com/owed/owed/scheduler"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	for attempts, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute,
		16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour} {
		if got := scheduler.Backoff(attempts); got != want {
			t.Errorf("Backoff(%d) = %v, want %v", attempts, got, want)
		}
	}
	for _, attempts := range []int{40, 63, 64, 1000, math.MaxInt32} {
		if got := scheduler.Backoff(attempts); got != time.Hour {
			t.Errorf("Backoff(%d) = %v, want 1h", attempts, got)
		}
	}
}

// A screen asks the model once, charged one call first, and records the verdict with its event;
// an allowed revision then owes its score, a blocked item nothing.
func TestRunScreenRecordsVerdict(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		_, rev := r.song(ann, "Tide", `s("bd sd")`)

		if out := r.run(models.TaskScreen, models.KindRevision, rev); out != scheduler.Done {
			t.Fatalf("outcome = %s, want done", out)
		}
		reqs := r.model.Requests()
		if len(reqs) != 1 || reqs[0].Task != "screen" || reqs[0].Kind != "revision" ||
			reqs[0].Subject.Title != "Tide" || reqs[0].Subject.Text != `s("bd sd")` {
			t.Fatalf("model requests = %+v, want one screen of the revision", reqs)
		}
		r.noJob(models.TaskScreen, models.KindRevision, rev)
		score := r.mustJob(models.TaskScore, models.KindRevision, rev)
		if score.DueAt.UnixMilli() != r.nowMs() || score.Attempts != 0 {
			t.Errorf("score job = %+v, want due now", score)
		}
		if got := r.spent(ann); got != 1 {
			t.Errorf("spent = %d, want 1", got)
		}
		ev := r.lastEvent(models.KindRevision, rev)
		wantEvent(t, ev, models.Event{Event: "screen", Kind: models.KindRevision, ItemID: rev, UserID: ann, Outcome: "allow",
			Status: ptr(200), Attempt: 0, Confidence: ptr(0.9), RequestBytes: ptr(int64(len(reqs[0].Body))), At: time.UnixMilli(r.nowMs())})
		if ev.UpstreamMs == nil {
			t.Error("event upstreamMs is null")
		}
		screen, _ := r.store.ScreenOf(r.ctx, models.KindRevision, rev)
		if screen.Verdict == nil || *screen.Verdict != "allow" || *screen.Confidence != 0.9 {
			t.Errorf("recorded screen = %+v", screen)
		}

		// A blocked pitch on its third attempt: the event carries the attempt, nothing more is owed.
		r.model.SetVerdict("block", 0.75)
		p := r.pitch(ann, "buy now")
		r.exec(`UPDATE content_jobs SET attempts = 2 WHERE kind = 'pitch' AND item_id = ?`, p)
		if out := r.run(models.TaskScreen, models.KindPitch, p); out != scheduler.Done {
			t.Fatalf("outcome = %s", out)
		}
		r.noJob(models.TaskScreen, models.KindPitch, p)
		r.noJob(models.TaskScore, models.KindPitch, p)
		wantEvent(t, r.lastEvent(models.KindPitch, p), models.Event{Event: "screen", Kind: models.KindPitch, ItemID: p, UserID: ann,
			Outcome: "block", Status: ptr(200), Attempt: 2, Confidence: ptr(0.75), RequestBytes: ptr(int64(len(r.model.Requests()[1].Body)))})
		if got := r.spent(ann); got != 2 {
			t.Errorf("spent = %d, want 2", got)
		}
	})
}

// A score asks three separate times, charged three calls first, and records the mean: art, each
// run's art, the mean of each criterion, the model and the rubric. The runs are lopsided
// (0.1, 0.2, 0.9: mean 0.4, median 0.2), so a median, or any one run, fails this test.
func TestRunScoreRecordsMeanOfThreeRuns(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelName = "critic-9" }))
		ann := r.user("ann")
		song, rev := r.allowedRevision(ann, "Tide", "code")
		r.model.SetArt(func(run int) modelclient.ArtRun {
			return []modelclient.ArtRun{
				{Art: 0.1, Criteria: map[string]float64{"melody": 0.9, "rhythm": 0.4}},
				{Art: 0.2, Criteria: map[string]float64{"melody": 0.2, "rhythm": 0.4}},
				{Art: 0.9, Criteria: map[string]float64{"melody": 0.1, "rhythm": 0.4}},
			}[run%3]
		})
		r.model.HoldUntil(3) // the three runs go out together, or this never answers

		if out := r.run(models.TaskScore, models.KindRevision, rev); out != scheduler.Done {
			t.Fatalf("outcome = %s, want done", out)
		}
		reqs := r.model.Requests()
		if len(reqs) != 3 || r.model.MaxInFlight() != 3 {
			t.Fatalf("%d requests, %d at once; want 3 in parallel", len(reqs), r.model.MaxInFlight())
		}
		for _, q := range reqs {
			if q.Task != "score" || q.Model != "critic-9" || q.Rubric != scheduler.RubricID || q.Song.Title != "Tide" ||
				q.Song.Code != "code" || q.Spec != scheduler.RubricSpec {
				t.Errorf("score request = %+v", q)
			}
		}
		r.noJob(models.TaskScore, models.KindRevision, rev)
		if got := r.spent(ann); got != 3 {
			t.Errorf("spent = %d, want 3", got)
		}
		items, _ := owedtest.Mine(r.ctx, r.store, ann)
		if len(items) != 1 || items[0].Score == nil {
			t.Fatalf("mine = %+v", items)
		}
		sc := items[0].Score
		runs := slices.Clone(sc.ArtRuns)
		slices.Sort(runs)
		if !near(sc.Art, 0.4) || !slices.Equal(runs, []float64{0.1, 0.2, 0.9}) || !near(sc.Criteria["melody"], 0.4) ||
			!near(sc.Criteria["rhythm"], 0.4) || len(sc.Criteria) != 2 || sc.Model != "critic-9" || sc.Rubric != scheduler.RubricID {
			t.Errorf("score = %+v, want art 0.4 (the mean, not the median 0.2) from runs 0.1/0.2/0.9, melody 0.4, rhythm 0.4, critic-9, %s", sc, scheduler.RubricID)
		}
		if s, _ := r.store.SongByID(r.ctx, song); s.Art == nil || !near(*s.Art, 0.4) {
			t.Errorf("song art = %v, want 0.4", s.Art)
		}
		ev := r.lastEvent(models.KindRevision, rev)
		if ev.Art == nil || !near(*ev.Art, 0.4) {
			t.Errorf("event art = %v, want 0.4", ev.Art)
		}
		wantEvent(t, ev, models.Event{Event: "score", Kind: models.KindRevision, ItemID: rev, UserID: ann,
			Outcome: "scored", Status: ptr(200), Art: ev.Art, Runs: ptr(3), RequestBytes: ptr(int64(len(reqs[0].Body)))})
	})
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// An item deleted after its job was claimed is gone: nothing asked, charged or recorded. One
// deleted during the ask is gone too.
func TestRunDeletedItemIsGone(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		p := r.pitch(ann, "p")
		_, rev := r.allowedRevision(ann, "S", "c")
		pj := r.claim(models.TaskScreen, models.KindPitch, p)
		sj := r.claim(models.TaskScore, models.KindRevision, rev)
		if err := r.store.DeleteItem(r.ctx, ann, models.KindPitch, p); err != nil {
			t.Fatal(err)
		}
		r.exec(`DELETE FROM revisions WHERE id = ?`, rev)
		for _, j := range []models.Job{pj, sj} {
			out, err := r.content.Run(r.ctx, j)
			if err != nil || out != scheduler.Gone {
				t.Errorf("%s of a deleted item = %s, %v; want gone", j.Task, out, err)
			}
		}
		if r.model.Calls() != 0 || r.spent(ann) != 0 || r.countJobs() != 0 {
			t.Errorf("calls %d, spent %d, jobs %d; want nothing", r.model.Calls(), r.spent(ann), r.countJobs())
		}
		if evs, _ := r.store.ListEvents(r.ctx, models.EventFilter{}, 0, 10); len(evs) != 0 {
			t.Errorf("events = %+v, want none", evs)
		}

		// Deleted while the model is asked about it: the ask was made, so it stays charged, but
		// neither the answer nor its event is recorded, and no job is left.
		p = r.pitch(ann, "p2")
		_, rev = r.allowedRevision(ann, "S2", "c2")
		for _, c := range []struct {
			job    models.Job
			delete func() error
			calls  int
		}{
			{r.claim(models.TaskScreen, models.KindPitch, p), func() error { return r.store.DeleteItem(r.ctx, ann, models.KindPitch, p) }, 1},
			{r.claim(models.TaskScore, models.KindRevision, rev), func() error {
				_, err := r.store.RawExec(r.ctx, `DELETE FROM revisions WHERE id = ?`, rev)
				return err
			}, scheduler.ScoreRuns},
		} {
			var once sync.Once
			var deleted error
			r.model.Reset()
			r.model.Handle(func(http.ResponseWriter, *http.Request) bool {
				once.Do(func() { deleted = c.delete() })
				return false
			})
			before := r.spent(ann)
			out, err := r.content.Run(r.ctx, c.job)
			once.Do(func() {}) // the hook's delete happens before what follows
			if deleted != nil {
				t.Fatalf("delete the %s: %v", c.job.Kind, deleted)
			}
			if err != nil || out != scheduler.Gone {
				t.Errorf("%s of an item deleted during the ask = %s, %v; want gone", c.job.Task, out, err)
			}
			if r.model.Calls() != c.calls || r.spent(ann) != before+int64(c.calls) {
				t.Errorf("%s: calls %d, spent %d more; want %d of each", c.job.Task, r.model.Calls(), r.spent(ann)-before, c.calls)
			}
			r.noJob(c.job.Task, c.job.Kind, c.job.ItemID)
			if evs := r.events(c.job.Kind, c.job.ItemID); len(evs) != 0 {
				t.Errorf("%s: events = %+v, want none", c.job.Task, evs)
			}
		}
	})
}

// Poison work: a request the model client would refuse (an item past its limits, written by
// raw SQL) is an attempt with why refused and the backoff, nothing asked or charged, its lease
// freed. Sweep after sweep it is tried again only when its backoff has passed, the backoff
// growing with each attempt: never dropped, never looping unseen, never asked.
func TestRunRefusedIsAnAttemptWithGrowingBackoff(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		now := r.nowMs()
		// Raw SQL writes past the API's limits.
		bigPitch := r.insertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, ?, ?)`, ann, strings.Repeat("x", modelclient.MaxTextBytes+1), now)
		song := r.insertID(`INSERT INTO songs (user_id, title, created_at) VALUES (?, 'S', ?)`, ann, now)
		bigRev := r.insertID(`INSERT INTO revisions (song_id, user_id, title, code, created_at) VALUES (?, ?, 'S', ?, ?)`,
			song, ann, strings.Repeat("x", modelclient.MaxCodeBytes+1), now)
		// The same revision allowed by raw SQL owes a score that is too large as well.
		bigScored := r.insertID(`INSERT INTO revisions (song_id, user_id, title, code, created_at) VALUES (?, ?, 'S', ?, ?)`,
			song, ann, strings.Repeat("y", modelclient.MaxCodeBytes+1), now)
		r.exec(`INSERT INTO screens (kind, item_id, verdict, confidence, screened_at) VALUES ('revision', ?, 'allow', 0.9, ?)`, bigScored, now)
		items := []struct {
			task models.Task
			kind models.Kind
			id   int64
		}{{models.TaskScreen, models.KindPitch, bigPitch}, {models.TaskScreen, models.KindRevision, bigRev}, {models.TaskScore, models.KindRevision, bigScored}}

		for attempt := range 4 {
			if n, err := r.content.Sweep(r.ctx, 0); n != len(items) || err != nil {
				t.Fatalf("sweep %d ran %d, %v; want the %d refused jobs", attempt, n, err, len(items))
			}
			for _, it := range items {
				j := r.mustJob(it.task, it.kind, it.id)
				wantPending(t, j, models.WhyRefused, attempt+1, r.clk.Now().Add(scheduler.Backoff(attempt)), nil)
				if j.LastError == nil || !strings.Contains(*j.LastError, "refused before sending") {
					t.Errorf("%s %s: last error %v, want what was refused", it.task, it.kind, str(j.LastError))
				}
				ev := r.lastEvent(it.kind, it.id)
				if ev.Event != it.task || ev.Outcome != models.OutcomePending || str(ev.Why) != "refused" || ev.Attempt != attempt || ev.Error == nil {
					t.Errorf("%s %s: event %s, want a refused attempt %d", it.task, it.kind, fmtEvent(ev), attempt)
				}
			}
			// Not due again until the backoff has passed: a sweep a moment before runs nothing.
			r.clk.Advance(scheduler.Backoff(attempt) - time.Millisecond)
			if n, err := r.content.Sweep(r.ctx, 0); n != 0 || err != nil {
				t.Fatalf("sweep before the backoff ran %d, %v; want none", n, err)
			}
			r.clk.Advance(time.Millisecond)
		}
		if r.model.Calls() != 0 || r.spent(ann) != 0 {
			t.Errorf("calls %d, spent %d; want nothing asked or charged", r.model.Calls(), r.spent(ann))
		}
		// The admin's count by why shows them.
		if n, err := r.store.CountJobs(r.ctx, models.JobFilter{Why: models.WhyRefused}); err != nil || n != int64(len(items)) {
			t.Errorf("jobs with why refused = %d, %v; want %d", n, err, len(items))
		}
	})
}

// Without a model every job waits as unreachable, with the backoff growing per attempt; nothing
// is charged.
func TestRunNoModelIsUnreachableWithBackoff(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withoutModel())
		ann := r.user("ann")
		p := r.pitch(ann, "p")
		for attempt := range 4 {
			start := r.clk.Now()
			if out := r.run(models.TaskScreen, models.KindPitch, p); out != scheduler.Pending {
				t.Fatalf("attempt %d: outcome %s, want pending", attempt, out)
			}
			j := r.mustJob(models.TaskScreen, models.KindPitch, p)
			wantPending(t, j, models.WhyUnreachable, attempt+1, start.Add(time.Minute<<attempt), nil)
			wantEvent(t, r.lastEvent(models.KindPitch, p), models.Event{Event: "screen", Kind: models.KindPitch, ItemID: p, UserID: ann,
				Outcome: "pending", Why: ptr(models.WhyUnreachable), Attempt: attempt, At: start})
			r.clk.Set(j.DueAt)
		}
		if got := len(r.events(models.KindPitch, p)); got != 4 {
			t.Errorf("events = %d, want one per attempt", got)
		}
		// Far along, the wait is capped at an hour.
		r.exec(`UPDATE content_jobs SET attempts = 40`)
		r.run(models.TaskScreen, models.KindPitch, p)
		wantPending(t, r.mustJob(models.TaskScreen, models.KindPitch, p), models.WhyUnreachable, 41, r.clk.Now().Add(time.Hour), nil)

		_, rev := r.allowedRevision(ann, "S", "c")
		r.run(models.TaskScore, models.KindRevision, rev)
		wantPending(t, r.mustJob(models.TaskScore, models.KindRevision, rev), models.WhyUnreachable, 1, r.clk.Now().Add(time.Minute), nil)
		wantEvent(t, r.lastEvent(models.KindRevision, rev), models.Event{Event: "score", Kind: models.KindRevision, ItemID: rev, UserID: ann,
			Outcome: "pending", Why: ptr(models.WhyUnreachable), Runs: ptr(3)})
		if r.spent(ann) != 0 || r.model.Calls() != 0 {
			t.Errorf("spent %d, calls %d; want nothing", r.spent(ann), r.model.Calls())
		}
	})
}

// The model unreachable (connection dropped, or no answer in time): unreachable with the
// backoff, and the call is still spent, since it was charged before asking.
func TestRunNetworkFailureIsUnreachableAndSpent(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withModelTimeout(300*time.Millisecond))
		ann := r.user("ann")
		r.model.DropConnections()
		p := r.pitch(ann, "p")
		if out := r.run(models.TaskScreen, models.KindPitch, p); out != scheduler.Pending {
			t.Fatalf("outcome %s", out)
		}
		wantPending(t, r.mustJob(models.TaskScreen, models.KindPitch, p), models.WhyUnreachable, 1, r.clk.Now().Add(time.Minute), nil)
		ev := r.lastEvent(models.KindPitch, p)
		wantEvent(t, ev, models.Event{Event: "screen", Kind: models.KindPitch, ItemID: p, UserID: ann, Outcome: "pending",
			Why: ptr(models.WhyUnreachable), Attempt: 0})
		if ev.UpstreamMs == nil {
			t.Error("event upstreamMs is null for an attempt that reached for the model")
		}
		if got := r.spent(ann); got != 1 {
			t.Errorf("spent = %d, want 1 (charged before asking)", got)
		}

		// A score whose runs cannot connect: three calls spent.
		_, rev := r.allowedRevision(ann, "S", "c")
		r.run(models.TaskScore, models.KindRevision, rev)
		wantPending(t, r.mustJob(models.TaskScore, models.KindRevision, rev), models.WhyUnreachable, 1, r.clk.Now().Add(time.Minute), nil)
		if got := r.spent(ann); got != 4 {
			t.Errorf("spent = %d, want 4", got)
		}

		// A model that never answers times out: unreachable too.
		r.model.Reset()
		r.model.Hang()
		p2 := r.pitch(ann, "p2")
		r.run(models.TaskScreen, models.KindPitch, p2)
		wantPending(t, r.mustJob(models.TaskScreen, models.KindPitch, p2), models.WhyUnreachable, 1, r.clk.Now().Add(time.Minute), nil)
		if got := r.spent(ann); got != 5 {
			t.Errorf("spent = %d, want 5", got)
		}
	})
}

// A non-2xx answer is upstream, waiting the longer of the backoff and what the model asked for
// (retry-after-ms before Retry-After), with the status recorded.
func TestRunUpstreamWaitsLongerOfBackoffAndRetryAfter(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withDailyLimit(1000))
		ann := r.user("ann")
		for _, c := range []struct {
			name     string
			status   int
			headers  map[string]string
			attempts int
			wait     time.Duration
		}{
			{"no header", 503, nil, 0, time.Minute},
			{"retry-after-ms longer", 429, map[string]string{"retry-after-ms": "90500"}, 0, 90500 * time.Millisecond},
			{"Retry-After longer", 429, map[string]string{"Retry-After": "600"}, 0, 10 * time.Minute},
			{"Retry-After shorter", 503, map[string]string{"Retry-After": "30"}, 0, time.Minute},
			{"retry-after-ms wins over Retry-After", 429, map[string]string{"retry-after-ms": "1500", "Retry-After": "600"}, 0, time.Minute},
			{"backoff longer on a later attempt", 500, map[string]string{"Retry-After": "300"}, 3, 8 * time.Minute},
			{"retry-after beyond the backoff cap", 429, map[string]string{"retry-after-ms": "7200000"}, 9, 2 * time.Hour},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := r.with(t)
				r.model.Fail(c.status, c.headers)
				p := r.pitch(ann, c.name)
				r.exec(`UPDATE content_jobs SET attempts = ? WHERE kind = 'pitch' AND item_id = ?`, c.attempts, p)
				before := r.spent(ann)
				if out := r.run(models.TaskScreen, models.KindPitch, p); out != scheduler.Pending {
					t.Fatalf("outcome %s", out)
				}
				wantPending(t, r.mustJob(models.TaskScreen, models.KindPitch, p), models.WhyUpstream, c.attempts+1, r.clk.Now().Add(c.wait), ptr(c.status))
				ev := r.lastEvent(models.KindPitch, p)
				wantEvent(t, ev, models.Event{Event: "screen", Kind: models.KindPitch, ItemID: p, UserID: ann, Outcome: "pending",
					Why: ptr(models.WhyUpstream), Status: ptr(c.status), Attempt: c.attempts})
				if ev.UpstreamMs == nil {
					t.Error("upstreamMs is null")
				}
				if got := r.spent(ann); got != before+1 {
					t.Errorf("spent %d, want %d", got, before+1)
				}
			})
		}

		// One of a score's three runs failing makes the whole attempt upstream; all three are spent.
		r.model.Reset()
		r.model.FailNext(1, 429, map[string]string{"retry-after-ms": "120000"})
		_, rev := r.allowedRevision(ann, "S", "c")
		before := r.spent(ann)
		r.run(models.TaskScore, models.KindRevision, rev)
		wantPending(t, r.mustJob(models.TaskScore, models.KindRevision, rev), models.WhyUpstream, 1, r.clk.Now().Add(2*time.Minute), ptr(429))
		wantEvent(t, r.lastEvent(models.KindRevision, rev), models.Event{Event: "score", Kind: models.KindRevision, ItemID: rev, UserID: ann,
			Outcome: "pending", Why: ptr(models.WhyUpstream), Status: ptr(429), Runs: ptr(3)})
		if got := r.spent(ann); got != before+3 {
			t.Errorf("spent %d, want %d", got, before+3)
		}
		if items, _ := owedtest.Mine(r.ctx, r.store, ann); slices.ContainsFunc(items, func(it models.MineItem) bool { return it.Score != nil }) {
			t.Error("a score was recorded from a failed attempt")
		}
	})
}

// An answer that is not the expected JSON is unanswered, with the backoff.
func TestRunBadAnswerIsUnanswered(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		for _, c := range []struct {
			name  string
			setup func(*modeltest.Fake)
		}{
			{"garbage", func(f *modeltest.Fake) { f.Garbage() }},
			{"no verdict", func(f *modeltest.Fake) { f.SetAnswer(map[string]any{"verdict": "maybe", "confidence": 0.5}) }},
			{"confidence out of range", func(f *modeltest.Fake) { f.SetAnswer(map[string]any{"verdict": "allow", "confidence": 7}) }},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := r.with(t)
				r.model.Reset()
				c.setup(r.model)
				p := r.pitch(ann, c.name)
				before := r.spent(ann)
				if out := r.run(models.TaskScreen, models.KindPitch, p); out != scheduler.Pending {
					t.Fatalf("outcome %s", out)
				}
				wantPending(t, r.mustJob(models.TaskScreen, models.KindPitch, p), models.WhyUnanswered, 1, r.clk.Now().Add(time.Minute), ptr(200))
				wantEvent(t, r.lastEvent(models.KindPitch, p), models.Event{Event: "screen", Kind: models.KindPitch, ItemID: p, UserID: ann,
					Outcome: "pending", Why: ptr(models.WhyUnanswered), Status: ptr(200)})
				if s, _ := r.store.ScreenOf(r.ctx, models.KindPitch, p); s.Verdict != nil {
					t.Errorf("a verdict was recorded: %v", *s.Verdict)
				}
				if got := r.spent(ann); got != before+1 {
					t.Errorf("spent %d, want %d", got, before+1)
				}
			})
		}
		// A score where one run answers out of range.
		r.model.Reset()
		r.model.SetArt(func(run int) modelclient.ArtRun {
			if run == 1 {
				return modelclient.ArtRun{Art: 1.5}
			}
			return modeltest.DefaultArt(run)
		})
		_, rev := r.allowedRevision(ann, "S", "c")
		r.run(models.TaskScore, models.KindRevision, rev)
		wantPending(t, r.mustJob(models.TaskScore, models.KindRevision, rev), models.WhyUnanswered, 1, r.clk.Now().Add(time.Minute), ptr(200))
	})
}

// A model that keeps answering junk is asked again only after a backoff that doubles with each
// unanswered reply (1, 2, then 4 minutes, as written here rather than read from Backoff), so it
// is not asked and charged every minute for ever.
func TestUnansweredBackoffGrowsOverThreeReplies(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		r.model.Garbage()
		p := r.pitch(ann, "junk answers")
		for i, backoff := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute} {
			if out := r.run(models.TaskScreen, models.KindPitch, p); out != scheduler.Pending {
				t.Fatalf("attempt %d: outcome %s", i+1, out)
			}
			wantPending(t, r.mustJob(models.TaskScreen, models.KindPitch, p), models.WhyUnanswered, i+1, r.clk.Now().Add(backoff), ptr(200))
			r.clk.Advance(backoff)
		}
		if r.model.Calls() != 3 || r.spent(ann) != 3 {
			t.Errorf("calls %d, spent %d; want 3 of each", r.model.Calls(), r.spent(ann))
		}
	})
}

// A charge the rest of the day cannot cover is refused whole: nothing asked, nothing spent, and
// the job waits for 00:00 UTC, when it runs.
func TestRunBudgetRefusedWaitsForMidnight(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		if _, err := r.store.SetDailyLimit(r.ctx, ann, ptr(int64(4))); err != nil {
			t.Fatal(err)
		}
		_, rev := r.song(ann, "S", "c")
		r.run(models.TaskScreen, models.KindRevision, rev) // allowed: 1 spent, the score is owed
		p := r.pitch(ann, "p")
		r.run(models.TaskScreen, models.KindPitch, p) // 2 spent
		calls := r.model.Calls()

		// The score needs 3 with 2 left: refused whole.
		if out := r.run(models.TaskScore, models.KindRevision, rev); out != scheduler.Pending {
			t.Fatalf("outcome %s", out)
		}
		midnight := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		wantPending(t, r.mustJob(models.TaskScore, models.KindRevision, rev), models.WhyBudget, 1, midnight, nil)
		wantEvent(t, r.lastEvent(models.KindRevision, rev), models.Event{Event: "score", Kind: models.KindRevision, ItemID: rev, UserID: ann,
			Outcome: "pending", Why: ptr(models.WhyBudget), Runs: ptr(3)})
		if r.model.Calls() != calls || r.spent(ann) != 2 {
			t.Fatalf("calls %d (want %d), spent %d (want 2): a refused charge must not ask or spend", r.model.Calls(), calls, r.spent(ann))
		}

		r.clk.Set(midnight.Add(-time.Millisecond))
		if n, _ := r.content.Sweep(r.ctx, 0); n != 0 {
			t.Fatalf("swept %d jobs before midnight", n)
		}
		r.clk.Set(midnight)
		if n, err := r.content.Sweep(r.ctx, 0); n != 1 || err != nil {
			t.Fatalf("midnight sweep ran %d, %v; want the score", n, err)
		}
		r.noJob(models.TaskScore, models.KindRevision, rev)
		if got := r.spent(ann); got != 3 {
			t.Errorf("spent on the new day = %d, want 3", got)
		}
	})
}

// A budget that cannot be counted is neither charged nor asked: budget-unavailable, with the
// backoff. The budget is made uncountable for real, by taking its table away.
func TestRunBudgetUnavailable(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		p := r.pitch(ann, "p")
		_, rev := r.allowedRevision(ann, "S", "c")
		r.exec(`ALTER TABLE budgets RENAME TO budgets_gone`)
		for _, it := range []struct {
			task, event models.Task
			kind        models.Kind
			id          int64
			runs        *int
		}{{models.TaskScreen, "screen", models.KindPitch, p, nil}, {models.TaskScore, "score", models.KindRevision, rev, ptr(3)}} {
			if out := r.run(it.task, it.kind, it.id); out != scheduler.Pending {
				t.Fatalf("%s outcome %s", it.task, out)
			}
			wantPending(t, r.mustJob(it.task, it.kind, it.id), models.WhyBudgetUnavailable, 1, r.clk.Now().Add(time.Minute), nil)
			wantEvent(t, r.lastEvent(it.kind, it.id), models.Event{Event: it.event, Kind: it.kind, ItemID: it.id, UserID: ann,
				Outcome: "pending", Why: ptr(models.WhyBudgetUnavailable), Runs: it.runs})
		}
		r.exec(`ALTER TABLE budgets_gone RENAME TO budgets`)
		if r.model.Calls() != 0 || r.spent(ann) != 0 {
			t.Fatalf("calls %d, spent %d; want nothing asked or charged", r.model.Calls(), r.spent(ann))
		}
		// Once the budget counts again, the jobs run after their backoff.
		r.clk.Advance(time.Minute)
		if n, err := r.content.Sweep(r.ctx, 0); n != 2 || err != nil {
			t.Fatalf("sweep = %d, %v", n, err)
		}
		if r.countJobs() != 0 || r.spent(ann) != 4 {
			t.Errorf("jobs %d, spent %d; want all done, 4 spent", r.countJobs(), r.spent(ann))
		}
	})
}

// The budget holds under a concurrent sweep: exactly the limit's worth of calls are made, the
// rest wait for midnight and run then.
func TestSweepBudgetNeverAboveLimitAndResetsAtMidnight(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.Concurrency = 16 }), withDailyLimit(25))
		ann, bob := r.user("ann"), r.user("bob")
		if _, err := r.store.SetDailyLimit(r.ctx, bob, ptr(int64(5))); err != nil {
			t.Fatal(err)
		}
		for range 40 {
			r.pitch(ann, "a")
		}
		for range 8 {
			r.pitch(bob, "b")
		}
		r.model.Delay(time.Millisecond) // keep many charges in flight together
		if n, err := r.content.Sweep(r.ctx, 0); n != 48 || err != nil {
			t.Fatalf("sweep = %d, %v", n, err)
		}
		if r.spent(ann) != 25 || r.spent(bob) != 5 || r.model.Calls() != 30 {
			t.Fatalf("spent ann %d bob %d, calls %d; want 25, 5 and 30", r.spent(ann), r.spent(bob), r.model.Calls())
		}
		midnight := models.BudgetReset(r.clk.Now())
		waiting, _ := owedtest.ListJobs(r.ctx, r.store, models.JobFilter{Why: models.WhyBudget}, 0, 100)
		if len(waiting) != 18 {
			t.Fatalf("%d jobs wait for the budget, want 15 + 3", len(waiting))
		}
		for _, j := range waiting {
			if j.DueAt.UnixMilli() != midnight.UnixMilli() || j.Attempts != 1 {
				t.Errorf("waiting job %+v, want due at midnight after one attempt", j)
			}
		}
		r.clk.Set(midnight)
		if n, err := r.content.Sweep(r.ctx, 0); n != 18 || err != nil {
			t.Fatalf("midnight sweep = %d, %v", n, err)
		}
		if r.countJobs() != 0 || r.spent(ann) != 15 || r.spent(bob) != 3 {
			t.Errorf("jobs %d, spent ann %d bob %d; want 0, 15, 3", r.countJobs(), r.spent(ann), r.spent(bob))
		}
	})
}

// The sweep drains every due job with at most Concurrency at once, filling every slot.
func TestSweepDrainsWithBoundedConcurrency(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		const jobs, concurrency = 300, 8
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.Concurrency = concurrency }), withDailyLimit(1000))
		for i := range 3 {
			u := r.user("u" + itoa(int64(i)))
			r.exec(`WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?)
				INSERT INTO pitches (user_id, body, created_at) SELECT ?, 'pitch', ? FROM seq`, jobs/3, u, r.nowMs())
		}
		// The first requests are held until Concurrency of them arrive together.
		r.model.HoldUntil(concurrency)
		r.model.KeepRequests(false)
		n, err := r.content.Sweep(r.ctx, 0)
		if err != nil || n != jobs {
			t.Fatalf("sweep = %d, %v; want %d", n, err, jobs)
		}
		if r.countJobs() != 0 || r.model.Calls() != jobs {
			t.Fatalf("jobs left %d, calls %d", r.countJobs(), r.model.Calls())
		}
		if got := r.model.MaxInFlight(); got != concurrency {
			t.Errorf("at most %d requests at once, want exactly %d", got, concurrency)
		}
		var screens int64
		r.store.RawScan(r.ctx, &screens, `SELECT COUNT(*) FROM screens WHERE verdict = 'allow'`)
		if screens != jobs {
			t.Errorf("%d verdicts recorded, want %d", screens, jobs)
		}
	})
}

// The sweep runs the score jobs its own screens create, and one author's sweep runs theirs only.
func TestSweepRunsScoresItCreatesAndScopesToAuthor(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann, bob := r.user("ann"), r.user("bob")
		for range 4 {
			r.song(ann, "S", "c")
		}
		bp := r.pitch(bob, "b")
		n, err := r.content.Sweep(r.ctx, ann)
		if err != nil || n != 8 {
			t.Fatalf("ann's sweep = %d, %v; want 4 screens and 4 scores", n, err)
		}
		if r.model.Calls() != 4+4*3 {
			t.Errorf("calls = %d, want 16", r.model.Calls())
		}
		r.mustJob(models.TaskScreen, models.KindPitch, bp)
		if r.countJobs() != 1 {
			t.Errorf("jobs = %d, want bob's one", r.countJobs())
		}
		if n, _ := r.content.Sweep(r.ctx, 0); n != 1 || r.countJobs() != 0 {
			t.Errorf("global sweep = %d, jobs left %d", n, r.countJobs())
		}
	})
}

// Jobs a sweep reschedules are not run again in it: it ends, each job tried once. (With no
// breaker: twenty failures in a row would open it; TestBreaker* show that.)
func TestSweepEndsWhenEverythingWaits(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelBreaker = -1 }))
		ann := r.user("ann")
		for range 20 {
			r.pitch(ann, "p")
		}
		r.model.Fail(500, nil)
		n, err := r.content.Sweep(r.ctx, 0)
		if err != nil || n != 20 || r.model.Calls() != 20 {
			t.Fatalf("sweep = %d, %v, calls %d; want 20 each", n, err, r.model.Calls())
		}
		jobs, _ := owedtest.ListJobs(r.ctx, r.store, models.JobFilter{Why: models.WhyUpstream}, 0, 100)
		if len(jobs) != 20 {
			t.Fatalf("%d jobs wait upstream, want 20", len(jobs))
		}
		for _, j := range jobs {
			wantPending(t, j, models.WhyUpstream, 1, r.clk.Now().Add(time.Minute), ptr(500))
		}
		// A sweep with a cancelled context stops at once.
		ctx, cancel := context.WithCancel(r.ctx)
		cancel()
		r.clk.Advance(time.Minute)
		if n, err := r.content.Sweep(ctx, 0); n != 0 || !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled sweep = %d, %v", n, err)
		}
	})
}

// RunItem claims one item's job at once; an allowed revision's score follows in the background.
func TestRunItemScreensThenScores(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		_, rev := r.song(ann, "S", "c")
		if out, ok := <-r.content.RunItem(models.TaskScreen, models.KindRevision, rev); !ok || out != scheduler.Done {
			t.Fatalf("RunItem = %s, %v; want done", out, ok)
		}
		// The score follows in the background, nobody asking.
		wait.Until(t, "the score in the background", func() bool {
			_, owed := r.job(models.TaskScore, models.KindRevision, rev)
			return !owed
		})
		ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
		defer cancel()
		if err := r.content.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		r.noJob(models.TaskScore, models.KindRevision, rev)
		if items, _ := owedtest.Mine(r.ctx, r.store, ann); len(items) != 1 || items[0].Score == nil || len(items[0].Score.ArtRuns) != 3 {
			t.Fatalf("mine = %+v, want the revision scored from 3 runs", items)
		}
		// Once stopped, nothing more starts.
		p := r.pitch(ann, "late")
		if _, ok := <-r.content.RunItem(models.TaskScreen, models.KindPitch, p); ok {
			t.Error("RunItem ran after Stop")
		}
		r.mustJob(models.TaskScreen, models.KindPitch, p)
	})
}

// RunItem leaves a job alone that is not due or is leased elsewhere.
func TestRunItemSkipsJobsNotDueOrLeased(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withoutModel())
		ann := r.user("ann")
		p := r.pitch(ann, "p")
		r.run(models.TaskScreen, models.KindPitch, p) // unreachable: due in a minute
		if _, ok := <-r.content.RunItem(models.TaskScreen, models.KindPitch, p); ok {
			t.Error("RunItem ran a job not due")
		}
		p2 := r.pitch(ann, "p2")
		if _, ok, _ := r.store.ClaimItem(r.ctx, models.TaskScreen, models.KindPitch, p2, time.Minute, "elsewhere"); !ok {
			t.Fatal("claim failed")
		}
		if _, ok := <-r.content.RunItem(models.TaskScreen, models.KindPitch, p2); ok {
			t.Error("RunItem ran a job leased elsewhere")
		}
		if j := r.mustJob(models.TaskScreen, models.KindPitch, p); j.Attempts != 1 {
			t.Errorf("attempts = %d, want 1", j.Attempts)
		}
	})
}

// Stop lets running work end within its deadline, then cancels it and frees every lease the
// process holds: the jobs are due again at once, with no attempt counted for the interruption.
func TestStopReleasesLeases(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		r.model.Hang()
		var running []int64
		for range 3 {
			p := r.pitch(ann, "p")
			running = append(running, p)
			r.content.RunItem(models.TaskScreen, models.KindPitch, p)
		}
		wait.Until(t, "three requests at the model", func() bool { return r.model.Calls() == 3 })
		// Claimed by this process but not started.
		idle := r.pitch(ann, "idle")
		r.claim(models.TaskScreen, models.KindPitch, idle)
		other := r.pitch(ann, "other")
		if _, ok, _ := r.store.ClaimItem(r.ctx, models.TaskScreen, models.KindPitch, other, time.Minute, "another-process"); !ok {
			t.Fatal("claim failed")
		}

		ctx, cancel := context.WithTimeout(r.ctx, 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		r.content.Stop(ctx)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Stop took %v with a 100ms deadline", d)
		}
		due, err := r.store.ClaimDue(r.ctx, 10, time.Minute, "next", 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, j := range due {
			ids = append(ids, j.ItemID)
			if j.Attempts != 0 || j.Why != nil {
				t.Errorf("job %+v: an interrupted attempt was counted", j)
			}
		}
		slices.Sort(ids)
		if want := append(slices.Clone(running), idle); !slices.Equal(ids, want) {
			t.Errorf("due after Stop: %v, want this process's %v (not another process's)", ids, want)
		}
	})
}

// syncBuffer is a log destination safe for concurrent writers, read as JSON lines.
type syncBuffer struct{ owedtest.LogBuffer }

func (b *syncBuffer) lines() []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// Every attempt is one structured log line with the event's fields, as well as a row.
func TestEveryAttemptIsOneLogLine(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		c, logs := r.contentLogging(scheduler.ContentConfig{Owner: "test-worker"})
		ann := r.user("ann")
		p := r.pitch(ann, "p")
		r.model.FailNext(1, 503, nil)
		for range 2 {
			if _, err := c.Run(r.ctx, r.claim(models.TaskScreen, models.KindPitch, p)); err != nil {
				t.Fatal(err)
			}
			r.clk.Advance(time.Minute)
		}
		var attempts []map[string]any
		for _, l := range logs.lines() {
			if l["msg"] == "screen" {
				attempts = append(attempts, l)
			}
		}
		if len(attempts) != 2 {
			t.Fatalf("log lines for attempts = %v, want 2", attempts)
		}
		first, second := attempts[0], attempts[1]
		if first["outcome"] != "pending" || first["why"] != "upstream" || first["status"] != float64(503) || first["attempt"] != float64(0) ||
			first["kind"] != "pitch" || first["itemId"] != float64(p) || first["userId"] != float64(ann) || first["nextAttemptAt"] == nil {
			t.Errorf("first attempt's line = %v", first)
		}
		if second["outcome"] != "allow" || second["why"] != "" || second["status"] != float64(200) || second["attempt"] != float64(1) ||
			second["confidence"] != 0.9 || second["requestBytes"] == nil || second["upstreamMs"] == nil {
			t.Errorf("second attempt's line = %v", second)
		}
		if evs := r.events(models.KindPitch, p); len(evs) != 2 {
			t.Errorf("event rows = %d, want 2", len(evs))
		}
	})
}

// Stopping during a sweep: the jobs it holds (running or claimed) are free again at once, with
// no attempt counted, and the sweep claims nothing more.
func TestStopDuringSweepReleasesItsJobs(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.Concurrency = 2 }))
		ann := r.user("ann")
		for range 6 {
			r.pitch(ann, "p")
		}
		r.model.Hang()
		swept := make(chan int, 1)
		r.content.Go(func(ctx context.Context) {
			n, _ := r.content.Sweep(ctx, 0)
			swept <- n
		})
		wait.Until(t, "two requests at the model", func() bool { return r.model.Calls() == 2 })
		ctx, cancel := context.WithTimeout(r.ctx, 100*time.Millisecond)
		defer cancel()
		r.content.Stop(ctx)
		if n := <-swept; n != 2 {
			t.Errorf("the sweep ran %d jobs, want the 2 it had started", n)
		}
		if r.model.Calls() != 2 {
			t.Errorf("calls = %d: the sweep went on after Stop", r.model.Calls())
		}
		due, _ := r.store.ClaimDue(r.ctx, 10, time.Minute, "next", 0)
		if len(due) != 6 {
			t.Fatalf("%d jobs due after Stop, want all 6", len(due))
		}
		for _, j := range due {
			if j.Attempts != 0 || j.Why != nil {
				t.Errorf("job %+v: the interruption counted as an attempt", j)
			}
		}
	})
}

// A run never outlives its lease: a model slower than the lease left (OWED_MODEL_TIMEOUT may be
// as long as OWED_LEASE) is given up on as unreachable, a tenth of the lease before it runs out,
// so no other worker can claim the job while this one still waits for the model.
func TestRunGivesUpBeforeItsLeaseRunsOut(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		const lease = time.Second
		r := newRig(t, db, withModelTimeout(time.Minute), withConfig(func(c *scheduler.ContentConfig) { c.Lease = lease }))
		ann := r.user("ann")
		r.model.Hang()
		p := r.pitch(ann, "p")
		_, rev := r.allowedRevision(ann, "S", "c")
		for _, it := range []struct {
			task models.Task
			kind models.Kind
			id   int64
		}{{models.TaskScreen, models.KindPitch, p}, {models.TaskScore, models.KindRevision, rev}} {
			job := r.claim(it.task, it.kind, it.id)
			r.clk.Advance(lease / 2) // half the lease gone: 400ms left to ask, 100ms to record
			start := time.Now()
			out, err := r.content.Run(r.ctx, job)
			took := time.Since(start)
			if err != nil || out != scheduler.Pending {
				t.Fatalf("%s = %s, %v", it.task, out, err)
			}
			if took < 300*time.Millisecond || took > 5*time.Second {
				t.Errorf("%s gave up after %v, want about 400ms (the lease left), not the 1m model timeout", it.task, took)
			}
			wantPending(t, r.mustJob(it.task, it.kind, it.id), models.WhyUnreachable, 1, r.clk.Now().Add(time.Minute), nil)
		}
	})
}
