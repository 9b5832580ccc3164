package api

import (
	"math/rand/v2"
	"testing"
	"time"
)

// msTime writes exactly what time.Format writes, for any millisecond.
func TestMsTimeIsFormat(t *testing.T) {
	t.Parallel()
	cases := []int64{0, -1, -999, -1000, 1, 999, 1764493200123, 253402300799999, 253402300800000,
		-62135596800000, -62135596800001, (1 << 62) / 1000000}
	rng := rand.New(rand.NewPCG(7, 7))
	for range 100000 {
		cases = append(cases, rng.Int64N(400_000_000_000_000)-100_000_000_000_000)
	}
	for _, ms := range cases {
		if got, want := string(msTime(ms)), time.UnixMilli(ms).UTC().Format(timeFormat); got != want {
			t.Fatalf("msTime(%d) = %q, want %q", ms, got, want)
		}
	}
}
