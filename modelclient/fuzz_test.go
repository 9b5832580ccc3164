package modelclient

import (
	"net/http"
	"testing"
	"time"
)

// FuzzParseAnswer feeds arbitrary bodies to both decoders of both dialects.
// They must not panic, and whatever they accept must be within the contract.
func FuzzParseAnswer(f *testing.F) {
	f.Add([]byte(`{"answers":[{"verdict":"allow","confidence":0.9}]}`), false)
	f.Add([]byte(`{"answers":[{"art":0.5,"criteria":{"form":0.4}}]}`), false)
	f.Add([]byte(`{"choices":[{"message":{"content":"{\"art\":0.5,\"criteria\":[{\"name\":\"form\",\"score\":0.4}]}"}}]}`), true)
	f.Add([]byte("{\"choices\":[{\"message\":{\"content\":\"```json\\n{\\\"verdict\\\":\\\"block\\\",\\\"confidence\\\":1}\\n```\"}}]}"), true)
	f.Fuzz(func(t *testing.T, raw []byte, openai bool) {
		api := APIRelay
		if openai {
			api = APIOpenAI
		}
		if v, ok := decodeVerdict(api, raw); ok {
			if (v.Verdict != "allow" && v.Verdict != "block") || !unit(v.Confidence) {
				t.Fatalf("accepted %+v from %q", v, raw)
			}
		}
		if a, ok := decodeArt(api, raw); ok {
			if !unit(a.Art) || a.Criteria == nil {
				t.Fatalf("accepted %+v from %q", a, raw)
			}
			for name, v := range a.Criteria {
				if name == "" || !unit(v) {
					t.Fatalf("accepted criterion %q=%v from %q", name, v, raw)
				}
			}
		}
		_ = unwrapContent(string(raw))
	})
}

// FuzzParseRetryAfter: no panic, and an accepted wait is never negative.
func FuzzParseRetryAfter(f *testing.F) {
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
		d, ok := ParseRetryAfter(h, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfter(%q, %q) = %v, %v", ms, seconds, d, ok)
		}
		if !hasMs && !hasSeconds && ok {
			t.Fatalf("no headers, yet ok")
		}
	})
}
