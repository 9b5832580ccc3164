package outbound_test

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/owed/owed/outbound"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		h    map[string]string
		want time.Duration
		ok   bool
	}{
		{"none", nil, 0, false},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second, true},
		{"decimal seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond, true},
		{"zero", map[string]string{"Retry-After": "0"}, 0, true},
		{"spaces", map[string]string{"Retry-After": " 3 "}, 3 * time.Second, true},
		{"ms", map[string]string{"retry-after-ms": "1500"}, 1500 * time.Millisecond, true},
		{"ms decimal", map[string]string{"retry-after-ms": "0.5"}, 500 * time.Microsecond, true},
		{"ms wins", map[string]string{"retry-after-ms": "1500", "Retry-After": "7"}, 1500 * time.Millisecond, true},
		{"bad ms falls back", map[string]string{"retry-after-ms": "soon", "Retry-After": "7"}, 7 * time.Second, true},
		{"negative ms falls back", map[string]string{"retry-after-ms": "-5", "Retry-After": "2"}, 2 * time.Second, true},
		{"empty ms falls back", map[string]string{"retry-after-ms": "", "Retry-After": "2"}, 2 * time.Second, true},
		{"bad ms alone", map[string]string{"retry-after-ms": "NaN"}, 0, false},
		{"negative", map[string]string{"Retry-After": "-1"}, 0, false},
		{"word", map[string]string{"Retry-After": "soon"}, 0, false},
		{"empty", map[string]string{"Retry-After": ""}, 0, false},
		{"NaN", map[string]string{"Retry-After": "NaN"}, 0, false},
		{"Inf", map[string]string{"Retry-After": "Inf"}, 0, false},
		{"overflowing float", map[string]string{"Retry-After": "1e400"}, 0, false},
		{"hex", map[string]string{"Retry-After": "0x10"}, 0, false},
		{"huge", map[string]string{"Retry-After": "1e300"}, time.Duration(math.MaxInt64), true},
		{"date", map[string]string{"Retry-After": "Sun, 01 Mar 2026 12:00:30 GMT"}, 30 * time.Second, true},
		{"date past", map[string]string{"Retry-After": "Sun, 01 Mar 2026 11:00:00 GMT"}, 0, true},
		{"date rfc850", map[string]string{"Retry-After": "Sunday, 01-Mar-26 12:01:00 GMT"}, time.Minute, true},
		{"bad date", map[string]string{"Retry-After": "Sun, 99 Mar 2026 12:00:30 GMT"}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.h {
				h.Set(k, v)
			}
			got, ok := outbound.RetryAfter(h, now)
			if got != tc.want || ok != tc.ok {
				t.Errorf("RetryAfter(%v) = %v, %v; want %v, %v", tc.h, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// FuzzRetryAfter: no panic, and an accepted wait is never negative.
func FuzzRetryAfter(f *testing.F) {
	f.Add("1500", "7", true, true)
	f.Add("", "Wed, 21 Oct 2015 07:28:00 GMT", false, true)
	f.Add("-1", "1e300", true, true)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, ms, seconds string, hasMs, hasSeconds bool) {
		h := http.Header{}
		if hasMs {
			h.Set("retry-after-ms", ms)
		}
		if hasSeconds {
			h.Set("Retry-After", seconds)
		}
		d, ok := outbound.RetryAfter(h, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("RetryAfter(%q, %q) = %v, %v", ms, seconds, d, ok)
		}
		if !hasMs && !hasSeconds && ok {
			t.Fatalf("no headers, yet ok")
		}
	})
}
