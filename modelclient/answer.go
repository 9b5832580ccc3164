package modelclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
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

// parseVerdict reads a screening answer in dialect api. It refuses anything but a verdict of
// exactly "allow" or "block" with a confidence in [0, 1] (a half-valid answer is not recorded
// as a verdict), saying what is wrong in words an operator can act on (never the whole
// answer: it may be large).
func parseVerdict(api string, raw []byte) (Verdict, error) {
	el, err := answerElement(api, raw)
	if err != nil {
		return Verdict{}, err
	}
	var w struct {
		Verdict    *string  `json:"verdict"`
		Confidence *float64 `json:"confidence"`
	}
	switch {
	case json.Unmarshal(el, &w) != nil:
		return Verdict{}, errors.New("answer is not a JSON object with a verdict")
	case w.Verdict == nil:
		return Verdict{}, errors.New("answer has no verdict")
	case *w.Verdict != "allow" && *w.Verdict != "block":
		return Verdict{}, fmt.Errorf("answer's verdict %s is neither allow nor block", quoteShort(*w.Verdict))
	case w.Confidence == nil:
		return Verdict{}, errors.New("answer has no confidence")
	case !unit(*w.Confidence):
		return Verdict{}, fmt.Errorf("answer's confidence %g is not between 0 and 1", *w.Confidence)
	}
	return Verdict{Verdict: *w.Verdict, Confidence: *w.Confidence}, nil
}

// parseArt reads one score run's answer in dialect api: art in [0, 1] and criteria (absent or
// null: none) either as the relay's {"name": score} map or as the openai schema's
// [{"name", "score"}] list, every score in [0, 1], names non-empty and, in a list, unique. It
// says what is wrong with an answer it refuses.
func parseArt(api string, raw []byte) (ArtRun, error) {
	el, err := answerElement(api, raw)
	if err != nil {
		return ArtRun{}, err
	}
	var w struct {
		Art      *float64        `json:"art"`
		Criteria json.RawMessage `json:"criteria"`
	}
	switch {
	case json.Unmarshal(el, &w) != nil:
		return ArtRun{}, errors.New("answer is not a JSON object with an art score")
	case w.Art == nil:
		return ArtRun{}, errors.New("answer has no art score")
	case !unit(*w.Art):
		return ArtRun{}, fmt.Errorf("answer's art %g is not between 0 and 1", *w.Art)
	}
	criteria, err := parseCriteria(w.Criteria)
	if err != nil {
		return ArtRun{}, err
	}
	return ArtRun{Art: *w.Art, Criteria: criteria}, nil
}

// errCriteria is the fault of criteria that are not named scores in [0, 1].
var errCriteria = errors.New("answer's criteria are not named scores between 0 and 1")

// parseCriteria reads an art answer's criteria: absent or null (none), a {"name": score} map or
// a [{"name", "score"}] list.
func parseCriteria(raw json.RawMessage) (map[string]float64, error) {
	c := bytes.TrimSpace(raw)
	switch {
	case len(c) == 0 || bytes.Equal(c, []byte("null")):
		return map[string]float64{}, nil
	case c[0] == '{':
		return criteriaMap(c)
	case c[0] == '[':
		return criteriaList(c)
	}
	return nil, errCriteria
}

// criteriaMap reads criteria given as the relay's {"name": score} map.
func criteriaMap(c []byte) (map[string]float64, error) {
	var m map[string]*float64
	if json.Unmarshal(c, &m) != nil {
		return nil, errCriteria
	}
	criteria := make(map[string]float64, len(m))
	for name, v := range m {
		if name == "" || v == nil || !unit(*v) {
			return nil, errCriteria
		}
		criteria[name] = *v
	}
	return criteria, nil
}

// criteriaList reads criteria given as the openai schema's [{"name", "score"}] list, each name
// once.
func criteriaList(c []byte) (map[string]float64, error) {
	var list []struct {
		Name  *string  `json:"name"`
		Score *float64 `json:"score"`
	}
	if json.Unmarshal(c, &list) != nil {
		return nil, errCriteria
	}
	criteria := make(map[string]float64, len(list))
	for _, item := range list {
		if item.Name == nil || *item.Name == "" || item.Score == nil || !unit(*item.Score) {
			return nil, errCriteria
		}
		if _, dup := criteria[*item.Name]; dup {
			return nil, fmt.Errorf("answer names criterion %s twice", quoteShort(*item.Name))
		}
		criteria[*item.Name] = *item.Score
	}
	return criteria, nil
}

// answerElement returns the answer element of a 2xx body: answers[0] of a relay
// answer, or the content of a chat completion; or what is missing.
func answerElement(api string, raw []byte) ([]byte, error) {
	if api == APIOpenAI {
		el, ok := chatContent(raw)
		if !ok {
			return nil, errors.New("answer is not a chat completion with content")
		}
		return el, nil
	}
	var w struct {
		Answers []json.RawMessage `json:"answers"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, errors.New("answer is not JSON")
	}
	if len(w.Answers) == 0 {
		return nil, errors.New("answer has no answers")
	}
	return w.Answers[0], nil
}

// quoteShort quotes a value taken from an answer for an error message, cut to a few dozen
// characters: the message is kept and shown, the answer is the model's.
func quoteShort(s string) string {
	if r := []rune(s); len(r) > 40 {
		s = string(r[:40]) + "…"
	}
	return strconv.Quote(s)
}

// unit reports whether x is a finite number in [0, 1].
func unit(x float64) bool { return !math.IsNaN(x) && x >= 0 && x <= 1 }
