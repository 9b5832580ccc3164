package api_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/owed/owed/app"
	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/owedtest"
)

// shadowWorld is a world whose live model and candidate (critic-2, rubric art-v2) disagree on
// known items: the live model blocks "rude" text at 0.95 and allows the rest at 0.9, the
// candidate blocks "rude" and "spam" at 0.7 and allows the rest at 0.8; song "s1" … "s4" score
// 0.1 … 0.4 live and 0.8, 0.6, 0.7, 0.5 under the candidate.
func shadowWorld(t *testing.T, db string) (*world, *modeltest.Fake) {
	cand := modeltest.New(t)
	w := newWorld(t, db, func(c *app.Config) {
		c.ShadowModelURL, c.ShadowModelName, c.ShadowRubric = cand.URL(), "critic-2", "art-v2"
	})
	w.env.Model.AnswerBy(func(text string) (string, float64) {
		if strings.Contains(text, "rude") {
			return "block", 0.95
		}
		return "allow", 0.9
	}, func(title string) float64 {
		return map[string]float64{"s1": 0.1, "s2": 0.2, "s3": 0.3, "s4": 0.4}[title]
	})
	cand.AnswerBy(func(text string) (string, float64) {
		if strings.Contains(text, "rude") || strings.Contains(text, "spam") {
			return "block", 0.7
		}
		return "allow", 0.8
	}, func(title string) float64 {
		return map[string]float64{"s1": 0.8, "s2": 0.6, "s3": 0.7, "s4": 0.5}[title]
	})
	return w, cand
}

// shadowItems writes the known items through the store and settles them live: four songs, a
// comment and three pitches. It returns the songs' ids and the pitch the candidate flips.
func shadowItems(w *world) (songs [4]int64, flipped int64) {
	w.t.Helper()
	ctx, st, ann := context.Background(), w.store(), w.uid[asAuthor]
	for i := range songs {
		s, _, err := st.CreateSong(ctx, ann, fmt.Sprintf("s%d", i+1), `s("bd sd")`)
		if err != nil {
			w.t.Fatal(err)
		}
		songs[i] = s.ID
	}
	if _, err := st.CreateComment(ctx, ann, songs[0], "nice"); err != nil {
		w.t.Fatal(err)
	}
	for _, body := range []string{"hello", "spam here", "rude words"} {
		p, err := st.CreatePitch(ctx, ann, body)
		if err != nil {
			w.t.Fatal(err)
		}
		if body == "spam here" {
			flipped = p.ID
		}
	}
	if n := w.sweep(); n != 12 { // eight screens, four scores
		w.t.Fatalf("live sweep ran %d, want 12", n)
	}
	return songs, flipped
}

type shadowAnswer struct {
	Live      struct{ Model, API, Rubric string }
	Candidate *struct{ Model, API, Rubric, Since string }
	Promoted  bool
	From, To  *string
	Calls     struct{ Today, DailyLimit, Owed int64 }
	Screens   struct {
		Compared  int64
		Agreement *float64
		ByKind    []struct {
			Kind     string
			Compared int64
			Table    map[string]map[string]int64
		}
		Flips []struct {
			Kind, Live, Candidate               string
			ID                                  int64
			LiveConfidence, CandidateConfidence float64
		}
		Confidence struct {
			Bins            []float64
			Live, Candidate []int64
		}
	}
	Scores struct {
		Compared                       int64
		MeanDiff, SpreadDiff, Spearman *float64
		Points                         []struct {
			SongID          int64
			Live, Candidate float64
		}
		Movers []struct {
			SongID                         int64
			Title                          string
			LiveRank, CandidateRank, Shift int
		}
	}
	Rescore struct {
		Rubric      string
		Total, Done int64
	}
}

func (w *world) shadow() shadowAnswer {
	w.t.Helper()
	r := w.do(http.MethodGet, "/api/admin/shadow", asAdmin, nil)
	if r.Status != http.StatusOK {
		w.t.Fatalf("GET /api/admin/shadow: %d %s", r.Status, r.Body)
	}
	var out shadowAnswer
	r.Decode(w.t, &out)
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// untouched is what the author sees and is charged, which no shadow call may change: the
// view's ETag, today's spend, the events and the webhook deliveries.
func (w *world) untouched() string {
	w.t.Helper()
	mine := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil)
	d := w.env.Data()
	return fmt.Sprintf("etag %s spent %d events %d deliveries %d", mine.Header.Get("ETag"), d.Spent(w.uid[asAuthor]),
		d.Count(`SELECT COUNT(*) FROM events`), d.Count(`SELECT COUNT(*) FROM webhook_deliveries`))
}

func TestShadowAgreement(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w, cand := shadowWorld(t, db)
		if a := w.shadow(); a.Candidate == nil || a.Candidate.Model != "critic-2" || a.Candidate.Rubric != "art-v2" ||
			a.Screens.Compared != 0 || a.Screens.Agreement != nil || a.Scores.Spearman != nil || a.From != nil {
			t.Fatalf("before any shadow call: %+v", a)
		}
		w.do(http.MethodPost, "/api/admin/webhooks", asAdmin, map[string]any{"url": "https://hooks.example/x", "events": []string{"*"}})
		songs, flipped := shadowItems(w)
		before := w.untouched()
		if n, err := w.env.App.Content.SweepShadow(context.Background()); err != nil || n != 12 {
			t.Fatalf("shadow sweep ran %d (%v), want 12", n, err)
		}
		if after := w.untouched(); after != before {
			t.Errorf("the shadow changed what the author sees or is charged:\n%s\nwas\n%s", after, before)
		}
		if cand.Calls() != 8+4*3 {
			t.Errorf("candidate called %d times, want 20", cand.Calls())
		}
		a := w.shadow()
		if a.Live.Model != "critic" || a.Live.Rubric != "art-v1" || a.Promoted || a.Calls.Today != 20 || a.Calls.DailyLimit != 1000 ||
			a.Calls.Owed != 0 || a.From == nil || a.To == nil {
			t.Errorf("live %+v promoted %v calls %+v range %v–%v", a.Live, a.Promoted, a.Calls, a.From, a.To)
		}
		s := a.Screens
		tables := map[string]string{}
		for _, k := range s.ByKind {
			tables[k.Kind] = fmt.Sprintf("%d %v", k.Compared, k.Table)
		}
		want := map[string]string{
			"revision": "4 map[allow:map[allow:4 block:0] block:map[allow:0 block:0]]",
			"comment":  "1 map[allow:map[allow:1 block:0] block:map[allow:0 block:0]]",
			"pitch":    "3 map[allow:map[allow:1 block:1] block:map[allow:0 block:1]]",
		}
		if fmt.Sprint(tables) != fmt.Sprint(want) || s.Compared != 8 || s.Agreement == nil || !near(*s.Agreement, 7.0/8) {
			t.Errorf("screens: compared %d agreement %v tables %v; want 8, 0.875, %v", s.Compared, s.Agreement, tables, want)
		}
		if len(s.Flips) != 1 || s.Flips[0].Kind != "pitch" || s.Flips[0].ID != flipped || s.Flips[0].Live != "allow" ||
			s.Flips[0].Candidate != "block" || s.Flips[0].LiveConfidence != 0.9 || s.Flips[0].CandidateConfidence != 0.7 {
			t.Errorf("flips %+v, want pitch %d allow 0.9 → block 0.7", s.Flips, flipped)
		}
		if fmt.Sprint(s.Confidence.Live) != "[0 0 0 0 0 0 0 0 0 8]" || fmt.Sprint(s.Confidence.Candidate) != "[0 0 0 0 0 0 0 2 6 0]" ||
			len(s.Confidence.Bins) != 11 {
			t.Errorf("confidence %+v", s.Confidence)
		}
		sc := a.Scores
		if sc.Compared != 4 || sc.MeanDiff == nil || !near(*sc.MeanDiff, 0.4) || !near(*sc.SpreadDiff, math.Sqrt(0.045)) ||
			sc.Spearman == nil || !near(*sc.Spearman, -0.8) || len(sc.Points) != 4 {
			t.Errorf("scores: compared %d mean %v spread %v spearman %v points %d; want 4, 0.4, 0.212, -0.8, 4",
				sc.Compared, sc.MeanDiff, sc.SpreadDiff, sc.Spearman, len(sc.Points))
		}
		// Live order s4 s3 s2 s1; the candidate's s1 s3 s2 s4.
		if got := fmt.Sprint(sc.Movers); got != fmt.Sprintf("[{%d s1 4 1 3} {%d s4 1 4 -3}]", songs[0], songs[3]) {
			t.Errorf("movers %s", got)
		}
		metrics := string(w.env.Do(http.MethodGet, "/metrics", "", nil).Body)
		for _, line := range []string{"owed_shadow_agreement 0.875", "owed_shadow_owed 0",
			`owed_shadow_calls_total{outcome="recorded",task="screen"} 8`, `owed_shadow_calls_total{outcome="recorded",task="score"} 4`} {
			if !strings.Contains(metrics, "\n"+line+"\n") {
				t.Errorf("/metrics lacks %q", line)
			}
		}
	})
}

// songOrder is the public list by art, paged by limit: each song as title@rubric.
func (w *world) songOrder(limit int) string {
	w.t.Helper()
	var out []string
	for path := fmt.Sprintf("/api/songs?limit=%d", limit); ; {
		r := w.do(http.MethodGet, path, asAnon, nil)
		var page struct {
			NextCursor *string
			Songs      []struct {
				Title       string
				ScoreRubric *string
			}
		}
		r.Decode(w.t, &page)
		for _, s := range page.Songs {
			out = append(out, s.Title+"@"+*s.ScoreRubric)
		}
		if page.NextCursor == nil {
			return strings.Join(out, " ")
		}
		path = fmt.Sprintf("/api/songs?limit=%d&cursor=%s", limit, *page.NextCursor)
	}
}

func TestShadowPromotionRescoresEverySongOnce(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w, cand := shadowWorld(t, db)
		songs, _ := shadowItems(w)
		if _, err := w.env.App.Content.SweepShadow(context.Background()); err != nil {
			t.Fatal(err)
		}
		d, ann := w.env.Data(), w.uid[asAuthor]
		spent, liveCalls, candCalls := d.Spent(ann), w.env.Model.Calls(), cand.Calls()
		if r := w.do(http.MethodPost, "/api/admin/shadow/rollback", asAdmin, nil); r.Status != http.StatusConflict || r.ErrorCode() != "not_promoted" {
			t.Fatalf("rollback before a promotion: %d %s", r.Status, r.Body)
		}
		r := w.do(http.MethodPost, "/api/admin/shadow/promote", asAdmin, nil)
		var a shadowAnswer
		r.Decode(t, &a)
		if r.Status != http.StatusOK || !a.Promoted || a.Live.Model != "critic-2" || a.Live.Rubric != "art-v2" ||
			a.Rescore.Total != 4 || a.Rescore.Done != 0 {
			t.Fatalf("promote: %d %s", r.Status, r.Body)
		}
		if r := w.do(http.MethodPost, "/api/admin/shadow/promote", asAdmin, nil); r.Status != http.StatusConflict || r.ErrorCode() != "promoted" {
			t.Errorf("a second promotion: %d %s", r.Status, r.Body)
		}
		if n := d.Count(`SELECT COUNT(*) FROM audit WHERE action = 'model.promote' AND target = 'model'`); n != 1 {
			t.Errorf("%d audit entries of the promotion, want 1", n)
		}
		if n := d.Count(`SELECT COUNT(*) FROM content_jobs WHERE task = 'score'`); n != 4 {
			t.Fatalf("%d re-scores owed, want one per song (4)", n)
		}
		if got := w.songOrder(2); got != "s4@art-v1 s3@art-v1 s2@art-v1 s1@art-v1" {
			t.Errorf("before the re-score: %s", got)
		}
		// One song re-scored: it leads under the live rubric, the rest keep their own order.
		s1rev := d.Count(`SELECT id FROM revisions WHERE song_id = ?`, songs[0])
		if out := <-w.env.App.Content.RunItem("score", "revision", s1rev); out != "done" {
			t.Fatalf("re-score of s1: %s", out)
		}
		if got := w.songOrder(2); got != "s1@art-v2 s4@art-v1 s3@art-v1 s2@art-v1" {
			t.Errorf("mid re-score: %s", got)
		}
		if n := w.sweep(); n != 3 {
			t.Errorf("the rest of the re-score ran %d jobs, want 3", n)
		}
		if n := w.sweep(); n != 0 {
			t.Errorf("a second sweep ran %d, want none", n)
		}
		if got := w.songOrder(3); got != "s1@art-v2 s3@art-v2 s2@art-v2 s4@art-v2" {
			t.Errorf("after the re-score: %s", got)
		}
		if got, want := cand.Calls()-candCalls, 4*3; got != want || w.env.Model.Calls() != liveCalls {
			t.Errorf("the re-score asked the candidate %d times (want %d, every song once) and the old model %d",
				got, want, w.env.Model.Calls()-liveCalls)
		}
		if d.Spent(ann) != spent || d.Count(`SELECT COUNT(*) FROM shadow_jobs`) != 0 {
			t.Errorf("the re-score was charged to the author (%d, was %d), or owed shadow calls", d.Spent(ann), spent)
		}
		if a := w.shadow(); a.Rescore.Total != 4 || a.Rescore.Done != 4 {
			t.Errorf("re-score progress %+v, want 4 of 4", a.Rescore)
		}
		// While promoted, the drift run asks the live model: the candidate, under its rubric.
		w.created("/api/admin/anchors", asAdmin, map[string]any{"kind": "revision", "itemId": s1rev, "art": 0.5})
		candCalls, liveCalls = cand.Calls(), w.env.Model.Calls()
		if out, err := w.env.App.Drift.Run(context.Background()); err != nil || out.Run == nil || out.Run.Compared != 1 {
			t.Fatalf("drift run while promoted: %+v, %v", out, err)
		}
		if cand.Calls()-candCalls != 3 || w.env.Model.Calls() != liveCalls {
			t.Errorf("the drift run asked the candidate %d times (want 3) and the configured model %d (want 0)",
				cand.Calls()-candCalls, w.env.Model.Calls()-liveCalls)
		}
		liveCalls = w.env.Model.Calls()
		// The rollback re-scores under the configured model and rubric.
		if r := w.do(http.MethodPost, "/api/admin/shadow/rollback", asAdmin, nil); r.Status != http.StatusOK {
			t.Fatalf("rollback: %d %s", r.Status, r.Body)
		}
		if n := w.sweep(); n != 4 {
			t.Errorf("the rollback's re-score ran %d, want 4", n)
		}
		if got := w.songOrder(50); got != "s4@art-v1 s3@art-v1 s2@art-v1 s1@art-v1" || w.env.Model.Calls()-liveCalls != 4*3 {
			t.Errorf("after the rollback: %s, the configured model asked %d times", got, w.env.Model.Calls()-liveCalls)
		}
	})
}
