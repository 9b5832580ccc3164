package modelclient

import (
	"testing"
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
		if v, err := parseVerdict(api, raw); err == nil {
			if (v.Verdict != "allow" && v.Verdict != "block") || !unit(v.Confidence) {
				t.Fatalf("accepted %+v from %q", v, raw)
			}
		}
		if a, err := parseArt(api, raw); err == nil {
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
