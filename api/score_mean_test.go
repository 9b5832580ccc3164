package api_test

import (
	"math"
	"net/http"
	"slices"
	"testing"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/owedtest"
)

// TestScoreIsTheMeanOfThreeLopsidedRuns: a song's art, in the author's view and in the public
// list, is the mean of its three runs. The runs are lopsided (0.1, 0.2, 0.9: mean 0.4, median
// 0.2), so a median, or any single run, fails here; the other tests' runs are all alike.
func TestScoreIsTheMeanOfThreeLopsidedRuns(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		runs := []modelclient.ArtRun{
			{Art: 0.1, Criteria: map[string]float64{"melody": 0.9, "rhythm": 0.3}},
			{Art: 0.2, Criteria: map[string]float64{"melody": 0.2, "rhythm": 0.3}},
			{Art: 0.9, Criteria: map[string]float64{"melody": 0.1, "rhythm": 0.3}},
		}
		w.env.Model.SetArt(func(run int) modelclient.ArtRun { return runs[run%3] })
		r := w.created("/api/listeners/songs", asAuthor, map[string]string{"title": "Lopsided", "code": `s("bd")`})
		songID, revID := num(obj(r["song"])["id"]), num(obj(r["revision"])["id"])
		w.scored(revID)

		near := func(v any, want float64) bool { f, ok := v.(float64); return ok && math.Abs(f-want) < 1e-9 }
		var score map[string]any
		for _, it := range list(w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).JSON()["items"]) {
			if m := obj(it); m["kind"] == "revision" && num(m["id"]) == revID {
				score = obj(m["score"])
			}
		}
		if score == nil {
			t.Fatal("the author's view has no score for the revision")
		}
		var got []float64
		for _, v := range list(score["artRuns"]) {
			f, _ := v.(float64)
			got = append(got, f)
		}
		slices.Sort(got)
		if !near(score["art"], 0.4) || !slices.Equal(got, []float64{0.1, 0.2, 0.9}) {
			t.Errorf("score art %v from runs %v, want 0.4 (the mean, not the median 0.2) from 0.1/0.2/0.9", score["art"], got)
		}
		if cr := obj(score["criteria"]); !near(cr["melody"], 0.4) || !near(cr["rhythm"], 0.3) {
			t.Errorf("criteria = %v, want melody 0.4 (the mean), rhythm 0.3", cr)
		}

		ans := w.do(http.MethodGet, "/api/songs", asOther, nil)
		if ans.Status != http.StatusOK {
			t.Fatalf("songs: %d %s", ans.Status, ans.Body)
		}
		found := false
		for _, s := range list(ans.JSON()["songs"]) {
			if m := obj(s); num(m["id"]) == songID {
				found = true
				if !near(m["art"], 0.4) {
					t.Errorf("public song art = %v, want 0.4", m["art"])
				}
			}
		}
		if !found {
			t.Error("the scored song is not in the public list")
		}
	})
}
