package api

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/owed/owed/models"
)

// TestMineJSONEncodesAsEncodingJSON: the view's hand-written encoding writes, for random
// answers, exactly the bytes json.Marshal writes, so a client cannot tell them apart; and it
// refuses what json.Marshal refuses (a score that is not a number).
func TestMineJSONEncodesAsEncodingJSON(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 25))
	for i := range 3000 {
		m := randomMine(rng)
		want, werr := json.Marshal(m)
		got, gerr := m.appendJSON(nil)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("answer %d: encoding/json's error %v, ours %v", i, werr, gerr)
		}
		if werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("answer %d differs:\nencoding/json %s\nours          %s", i, want, got)
		}
	}
}

// FuzzMineJSONString: any string, in any of the view's text fields, encodes as encoding/json
// encodes it.
func FuzzMineJSONString(f *testing.F) {
	for _, s := range []string{"", "song 1", `"quoted"\`, "<b>&amp;</b>", "tab\tnew\nline\x00\x1f\x7f", "caf\u00e9 \u2028\u2029 \U0001F3B5", "\xff\xfe bad utf-8 \xc3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: encoding/json %s, ours %s", s, want, got)
		}
	})
}

// randomMine is an answer with every field's forms: nil and empty lists, absent and present
// pointers, strings that need escaping, and floats of every size, NaN and the infinities
// among them now and then.
func randomMine(rng *rand.Rand) mineJSON {
	strs := []string{"", "revision", "song 90005", `a "quote" and \ back`, "<script>&</script>", "line\nbreak\ttab\x01",
		"caf\u00e9", "\u2028sep\u2029", "\xff\xc3(", "\U0001F3B5 music", "\x7f"}
	str := func() string { return strs[rng.IntN(len(strs))] }
	strp := func() *string {
		if rng.IntN(3) == 0 {
			return nil
		}
		s := str()
		return &s
	}
	tsp := func() *timestamp {
		if rng.IntN(2) == 0 {
			return nil
		}
		s := msTime(rng.Int64N(1 << 45))
		return &s
	}
	floats := []float64{0, 1, -1, 0.5, 7.666666666666667, 1e-7, 1e-6, 9.99e-7, 1e20, 1e21, 1.5e300, -2.5e-10, 123456789.125, math.Copysign(0, -1)}
	float := func() float64 {
		switch rng.IntN(60) {
		case 0:
			return math.NaN()
		case 1:
			return math.Inf(1 - 2*rng.IntN(2))
		}
		if rng.IntN(2) == 0 {
			return floats[rng.IntN(len(floats))]
		}
		return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(50)-25))
	}
	m := mineJSON{Budget: budgetJSON{Limit: rng.Int64N(1000) - 10, Spent: rng.Int64(), ResetsAt: msTime(rng.Int64N(1 << 42))}, NextCursor: strp()}
	if rng.IntN(10) > 0 {
		m.Items = make([]mineItem, rng.IntN(6))
	}
	for i := range m.Items {
		it := mineItem{Kind: models.Kind(str()), ID: rng.Int64() - rng.Int64(), Title: str(), CreatedAt: msTime(rng.Int64N(1 << 44)),
			State: models.ItemState(str()), Verdict: (*models.Verdict)(strp())}
		if rng.IntN(2) == 0 {
			id := rng.Int64N(1 << 40)
			it.SongID = &id
		}
		if rng.IntN(2) == 0 {
			c := float()
			it.Confidence = &c
		}
		if rng.IntN(2) == 0 {
			sc := &scoreJSON{Art: float(), Model: str(), Rubric: str()}
			if rng.IntN(5) > 0 {
				sc.ArtRuns = make([]float64, rng.IntN(4))
				for k := range sc.ArtRuns {
					sc.ArtRuns[k] = float()
				}
			}
			if rng.IntN(5) > 0 {
				sc.Criteria = map[string]float64{}
				for range rng.IntN(5) {
					sc.Criteria[str()] = float()
				}
			}
			it.Score = sc
		}
		if rng.IntN(5) > 0 {
			it.Jobs = make([]jobBrief, rng.IntN(3))
			for k := range it.Jobs {
				it.Jobs[k] = jobBrief{Task: models.Task(str()), Why: (*models.Why)(strp()), Attempts: rng.IntN(20), NextAttemptAt: tsp()}
			}
		}
		if rng.IntN(3) == 0 {
			it.Appeal = &appealJSON{State: str(), Note: strp(), At: msTime(rng.Int64N(1 << 44)), DecidedAt: tsp()}
		}
		m.Items[i] = it
	}
	return m
}
