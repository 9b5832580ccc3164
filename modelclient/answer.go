package modelclient

import (
	"bytes"
	"encoding/json"
	"math"
)

// Verdict is a screening answer.
type Verdict struct {
	Verdict    string  // "allow" or "block"
	Confidence float64 // in [0, 1]
}

// ArtRun is one score run's answer.
type ArtRun struct {
	Art      float64            // in [0, 1]
	Criteria map[string]float64 // each in [0, 1]; never nil, empty when the model named none
}

// Score is the combination of several runs (see Mean).
type Score struct {
	Art      float64            // mean of the runs' art
	ArtRuns  []float64          // each run's art, in run order
	Criteria map[string]float64 // per criterion, the mean over the runs that named it
}

// Mean combines score runs. A criterion missing from some runs is averaged
// over the runs that have it, so one terse run does not drag it towards 0.
// With no runs, Art is 0 and ArtRuns and Criteria are empty (not nil).
func Mean(runs []ArtRun) Score {
	s := Score{ArtRuns: make([]float64, 0, len(runs)), Criteria: map[string]float64{}}
	if len(runs) == 0 {
		return s
	}
	var sum float64
	counts := map[string]int{}
	for _, r := range runs {
		sum += r.Art
		s.ArtRuns = append(s.ArtRuns, r.Art)
		for name, v := range r.Criteria {
			s.Criteria[name] += v
			counts[name]++
		}
	}
	s.Art = sum / float64(len(runs))
	for name, n := range counts {
		s.Criteria[name] /= float64(n)
	}
	return s
}

// decodeVerdict reads a screening answer in dialect api. ok is false for
// anything but a verdict of exactly "allow" or "block" with a confidence in
// [0, 1]: a half-valid answer is not recorded as a verdict.
func decodeVerdict(api string, raw []byte) (v Verdict, ok bool) {
	el, ok := element(api, raw)
	if !ok {
		return Verdict{}, false
	}
	var w struct {
		Verdict    *string  `json:"verdict"`
		Confidence *float64 `json:"confidence"`
	}
	if json.Unmarshal(el, &w) != nil || w.Verdict == nil || w.Confidence == nil {
		return Verdict{}, false
	}
	if (*w.Verdict != "allow" && *w.Verdict != "block") || !unit(*w.Confidence) {
		return Verdict{}, false
	}
	return Verdict{Verdict: *w.Verdict, Confidence: *w.Confidence}, true
}

// decodeArt reads one score run's answer in dialect api: art in [0, 1] and
// criteria (absent or null: none) either as the relay's {"name": score} map
// or as the openai schema's [{"name", "score"}] list, every score in [0, 1],
// names non-empty and, in a list, unique.
func decodeArt(api string, raw []byte) (ArtRun, bool) {
	el, ok := element(api, raw)
	if !ok {
		return ArtRun{}, false
	}
	var w struct {
		Art      *float64        `json:"art"`
		Criteria json.RawMessage `json:"criteria"`
	}
	if json.Unmarshal(el, &w) != nil || w.Art == nil || !unit(*w.Art) {
		return ArtRun{}, false
	}
	run := ArtRun{Art: *w.Art, Criteria: map[string]float64{}}
	c := bytes.TrimSpace(w.Criteria)
	switch {
	case len(c) == 0 || bytes.Equal(c, []byte("null")):
	case c[0] == '{':
		var m map[string]*float64
		if json.Unmarshal(c, &m) != nil {
			return ArtRun{}, false
		}
		for name, v := range m {
			if name == "" || v == nil || !unit(*v) {
				return ArtRun{}, false
			}
			run.Criteria[name] = *v
		}
	case c[0] == '[':
		var list []struct {
			Name  *string  `json:"name"`
			Score *float64 `json:"score"`
		}
		if json.Unmarshal(c, &list) != nil {
			return ArtRun{}, false
		}
		for _, item := range list {
			if item.Name == nil || *item.Name == "" || item.Score == nil || !unit(*item.Score) {
				return ArtRun{}, false
			}
			if _, dup := run.Criteria[*item.Name]; dup {
				return ArtRun{}, false
			}
			run.Criteria[*item.Name] = *item.Score
		}
	default:
		return ArtRun{}, false
	}
	return run, true
}

// element returns the answer element of a 2xx body: answers[0] of a relay
// answer, or the content of a chat completion.
func element(api string, raw []byte) ([]byte, bool) {
	if api == APIOpenAI {
		return chatContent(raw)
	}
	var w struct {
		Answers []json.RawMessage `json:"answers"`
	}
	if json.Unmarshal(raw, &w) != nil || len(w.Answers) == 0 {
		return nil, false
	}
	return w.Answers[0], true
}

// unit reports whether x is a finite number in [0, 1].
func unit(x float64) bool { return !math.IsNaN(x) && x >= 0 && x <= 1 }
