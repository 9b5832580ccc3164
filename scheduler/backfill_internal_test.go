package scheduler

import (
	"math"
	"testing"
	"time"
)

// A zero or negative setting takes its default; a set one is kept (a negative rate window is
// a setting: the plain rate), and a missing owner is made up.
func TestBackfillConfigDefaultsAndKeeps(t *testing.T) {
	t.Parallel()
	for _, unset := range []time.Duration{0, -time.Second} {
		c := BackfillConfig{WalkIdle: unset, Lease: unset, Every: unset, Poll: unset}
		c.applyDefaults()
		if c.WalkIdle != DefaultWalkIdle || c.Lease != DefaultLease || c.Every != DefaultBackfillEvery || c.Poll != 5*time.Second {
			t.Errorf("unset as %v: %+v, want the defaults", unset, c)
		}
		if c.Owner == "" || c.RateWindow != DefaultRateWindow || c.smoothed() {
			t.Errorf("no owner or window: owner %q, window %v, smoothed %v; want one made up, the plain rate", c.Owner, c.RateWindow, c.smoothed())
		}
	}
	set := BackfillConfig{WalkIdle: time.Millisecond, Lease: 2 * time.Millisecond, Every: 3 * time.Millisecond, Poll: 4 * time.Millisecond,
		Owner: "proc-a", RateWindow: 5 * time.Millisecond}
	c := set
	c.applyDefaults()
	if c != set || !c.smoothed() {
		t.Errorf("set: %+v, want kept as %+v, smoothed", c, set)
	}
	c = BackfillConfig{RateWindow: -time.Millisecond}
	c.applyDefaults()
	if c.RateWindow != -time.Millisecond || c.smoothed() {
		t.Errorf("a negative window: %v, smoothed %v; want kept, the plain rate", c.RateWindow, c.smoothed())
	}
}

// A batch of d running time moves the smoothed rate by 1 - e^(-d/window): a window's worth of
// time by 63 %, none by nothing; with the plain rate reported, by the default window's weight.
func TestBackfillRecentWeight(t *testing.T) {
	t.Parallel()
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	w := BackfillConfig{RateWindow: 10 * time.Second}
	if got := w.recentWeight(10 * time.Second); !near(got, 1-1/math.E) {
		t.Errorf("a window's time: %v, want %v", got, 1-1/math.E)
	}
	if got := w.recentWeight(5 * time.Second); !near(got, 1-math.Exp(-0.5)) {
		t.Errorf("half a window: %v, want %v", got, 1-math.Exp(-0.5))
	}
	if got := w.recentWeight(0); got != 0 {
		t.Errorf("no time: %v, want 0", got)
	}
	plain := BackfillConfig{RateWindow: DefaultRateWindow}
	if got := plain.recentWeight(defaultSmoothingWindow); !near(got, 1-1/math.E) {
		t.Errorf("plain rate, the default window's time: %v, want %v", got, 1-1/math.E)
	}
}
