package modeltest

import (
	"encoding/json"
	"net/http"
)

// AnswerBy makes the fake's relay answers depend on what is asked: screen gives a screen's
// verdict and confidence from its subject's text, art a score's art (every run, every
// criterion) from its song's title; a nil function leaves that task to the fake's other
// settings. It is a Handle hook: it answers before Fail and the rest; Handle(nil) removes it.
func (f *Fake) AnswerBy(screen func(text string) (verdict string, confidence float64), art func(title string) float64) {
	f.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		var req struct {
			Task    string  `json:"task"`
			Subject Subject `json:"subject"`
			Song    Song    `json:"song"`
		}
		if r.URL.Path != RelayPath || json.NewDecoder(r.Body).Decode(&req) != nil {
			return false
		}
		var answer any
		switch {
		case req.Task == "screen" && screen != nil:
			v, c := screen(req.Subject.Text)
			answer = map[string]any{"verdict": v, "confidence": c}
		case req.Task == "score" && art != nil:
			a := art(req.Song.Title)
			answer = map[string]any{"art": a, "criteria": map[string]float64{"craft": a}}
		default:
			return false
		}
		writeJSON(w, http.StatusOK, map[string]any{"answers": []any{answer}})
		return true
	})
}
