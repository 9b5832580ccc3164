package outbound

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryAfter returns the wait a response asked for: the one reader of Retry-After for the
// model, the CDN and webhook receivers. It reads
// retry-after-ms (milliseconds, a finite number >= 0, the precise form LLM
// gateways send) first; when that is absent or invalid, Retry-After, either
// seconds (a finite number >= 0, decimals allowed) or an HTTP-date, taken
// relative to now (a date already past asks for no wait: 0, true). ok is
// false when neither header holds a valid value. Waits too long for a
// time.Duration are capped at its maximum rather than wrapping.
func RetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if v, has := header(h, "Retry-After-Ms"); has {
		if ms, ok := nonNegative(v); ok {
			return duration(ms * float64(time.Millisecond)), true
		}
	}
	v, has := header(h, "Retry-After")
	if !has {
		return 0, false
	}
	if s, ok := nonNegative(v); ok {
		return duration(s * float64(time.Second)), true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

func header(h http.Header, name string) (string, bool) {
	vs := h.Values(name)
	if len(vs) == 0 {
		return "", false
	}
	return strings.TrimSpace(vs[0]), true
}

// nonNegative parses a finite decimal number >= 0. ParseFloat alone would
// also take "NaN", "Inf" and hexadecimal floats, which no server means.
func nonNegative(v string) (float64, bool) {
	if v == "" || strings.ContainsAny(v, "xXpPnNiI_") {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || f < 0 {
		return 0, false
	}
	return f, true
}

func duration(ns float64) time.Duration {
	if ns >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ns)
}
