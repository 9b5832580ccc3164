package models

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// scoreJSONSeeds are texts of each shape scoreRuns and scoreCriteria read, and of the shapes
// they must leave to json.Unmarshal.
var scoreJSONSeeds = []string{
	`[]`, `{}`, `[7,8,8]`, ` [ 7.5 , -0.25e2 , 1E+3 ] `, `{"colour":7,"form":8.5}`, "{\n \"a\" : 1 ,\"b\":2}",
	`null`, ``, `[`, `[1,]`, `[01]`, `[1.]`, `[.5]`, `[-]`, `[1e]`, `[1e400]`, `["7"]`, `[true]`, `[1] x`, `[1][2]`,
	`{"a":1,"a":2}`, `{"a\u00e9":1}`, `{"a\"b":1}`, `{"é":1}`, `{"a":}`, `{"a":1,}`, `{a:1}`, `{"a":"1"}`, `{"a":1e999}`,
	`{"a":null}`, `[null]`, `{"a":[1]}`, "[1\t,2]", `[-0]`, `[0.000001]`, `[123456789012345678901234567890]`,
}

// TestScoreJSONReadsAsUnmarshal: whatever a score's runs and criteria hold, the fast readers
// either give what json.Unmarshal gives or leave the text to it; on texts owed writes they
// read it themselves.
func TestScoreJSONReadsAsUnmarshal(t *testing.T) {
	t.Parallel()
	for _, s := range scoreJSONSeeds {
		checkScoreJSON(t, s)
	}
	parts := []string{"[", "]", "{", "}", ",", ":", " ", `"a"`, `"b"`, "1", "-2.5", "3e2", "0", "07", "null", `"x`, "\\"}
	rng := rand.New(rand.NewPCG(3, 9))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(9) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		checkScoreJSON(t, b.String())
	}
	for _, s := range []string{`[7,8,8]`, `{"colour":7,"form":8.5}`} {
		runs, ok1 := scoreRuns(s)
		criteria, ok2 := scoreCriteria(s)
		if !ok1 && !ok2 || runs == nil && criteria == nil {
			t.Errorf("%s, as owed writes it, was left to json.Unmarshal", s)
		}
	}
}

// FuzzScoreJSON: any text reads as json.Unmarshal reads it, or is left to it.
func FuzzScoreJSON(f *testing.F) {
	for _, s := range scoreJSONSeeds {
		f.Add(s)
	}
	f.Fuzz(checkScoreJSON)
}

func checkScoreJSON(t *testing.T, s string) {
	if runs, ok := scoreRuns(s); ok {
		var want []float64
		if err := json.Unmarshal([]byte(s), &want); err != nil || !reflect.DeepEqual(runs, want) || want == nil {
			t.Fatalf("runs %q: read %v; json.Unmarshal %v, %v", s, runs, want, err)
		}
	}
	if criteria, ok := scoreCriteria(s); ok {
		var want map[string]float64
		if err := json.Unmarshal([]byte(s), &want); err != nil || !reflect.DeepEqual(criteria, want) || want == nil {
			t.Fatalf("criteria %q: read %v; json.Unmarshal %v, %v", s, criteria, want, err)
		}
	}
}
