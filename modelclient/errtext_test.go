package modelclient_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/models"
)

// Every reason to wait comes with what went wrong, in words, from real faults: a refused
// connection, a failing upstream, answers that are not verdicts; the key never appears.
func TestErrorText(t *testing.T) {
	t.Parallel()
	const key = "sk-secret-model-key"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String() + "/relay"
	l.Close()
	for _, tc := range []struct {
		name  string
		setup func(f *modeltest.Fake) modelclient.Config
		why   models.Why
		want  string // the error, or its start when it ends in …
	}{
		{"refused", func(f *modeltest.Fake) modelclient.Config {
			return modelclient.Config{URL: refused, Key: key}
		}, models.WhyUnreachable, "dial tcp " + strings.TrimPrefix(strings.TrimSuffix(refused, "/relay"), "http://") + ": connect: connection refused"},
		{"503 json", func(f *modeltest.Fake) modelclient.Config {
			f.Handle(func(w http.ResponseWriter, r *http.Request) bool {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(503)
				w.Write([]byte(`{"error":{"message":"upstream overloaded","type":"overloaded"}}`))
				return true
			})
			return f.Config()
		}, models.WhyUpstream, "HTTP 503: upstream overloaded"},
		{"502 text", func(f *modeltest.Fake) modelclient.Config {
			f.Handle(func(w http.ResponseWriter, r *http.Request) bool {
				w.WriteHeader(502)
				w.Write([]byte("bad gateway\n  from the relay\x00"))
				return true
			})
			return f.Config()
		}, models.WhyUpstream, "HTTP 502: Bad Gateway"}, // a text body is never kept
		{"500 html", func(f *modeltest.Fake) modelclient.Config {
			f.Handle(func(w http.ResponseWriter, r *http.Request) bool {
				w.WriteHeader(500)
				w.Write([]byte("<html><body>oops</body></html>"))
				return true
			})
			return f.Config()
		}, models.WhyUpstream, "HTTP 500: Internal Server Error"},
		{"echoes the key", func(f *modeltest.Fake) modelclient.Config {
			f.Handle(func(w http.ResponseWriter, r *http.Request) bool {
				w.WriteHeader(401)
				w.Write([]byte(`{"error":"bad key: ` + r.Header.Get("Authorization") + `"}`))
				return true
			})
			cfg := f.Config()
			cfg.Key = key
			return cfg
		}, models.WhyUpstream, "HTTP 401: bad key: Bearer [redacted]"},
		{"long body", func(f *modeltest.Fake) modelclient.Config {
			f.Handle(func(w http.ResponseWriter, r *http.Request) bool {
				w.WriteHeader(503)
				w.Write([]byte(`{"error":"` + strings.Repeat("overloaded ", 150) + `"}`))
				return true
			})
			return f.Config()
		}, models.WhyUpstream, "HTTP 503: overloaded overloaded…"},
		{"garbage", func(f *modeltest.Fake) modelclient.Config { f.Garbage(); return f.Config() },
			models.WhyUnanswered, "answer is not JSON"},
		{"no verdict", func(f *modeltest.Fake) modelclient.Config {
			f.SetAnswer(map[string]any{"confidence": 0.5})
			return f.Config()
		}, models.WhyUnanswered, "answer has no verdict"},
		{"maybe", func(f *modeltest.Fake) modelclient.Config {
			f.SetAnswer(map[string]any{"verdict": "maybe", "confidence": 0.5})
			return f.Config()
		}, models.WhyUnanswered, `answer's verdict "maybe" is neither allow nor block`},
		{"not configured", func(f *modeltest.Fake) modelclient.Config { return modelclient.Config{} },
			models.WhyUnreachable, "no model configured"},
		{"timeout", func(f *modeltest.Fake) modelclient.Config {
			f.Hang()
			cfg := f.Config()
			cfg.Timeout = 50 * time.Millisecond
			return cfg
		}, models.WhyUnreachable, "no answer within 50ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := modeltest.New(t)
			cfg := tc.setup(f)
			if cfg.Timeout == 0 {
				cfg.Timeout = 5 * time.Second
			}
			r := modelclient.New(cfg).Screen(t.Context(), song)
			if r.Why != tc.why {
				t.Fatalf("why = %q (%q), want %q", r.Why, r.Error, tc.why)
			}
			if prefix, cut := strings.CutSuffix(tc.want, "…"); cut {
				if !strings.HasPrefix(r.Error, prefix) || !strings.HasSuffix(r.Error, "…") || len([]rune(r.Error)) != modelclient.MaxStatusErrorChars {
					t.Errorf("error = %q (%d chars), want %q… cut at %d", r.Error, len([]rune(r.Error)), prefix, modelclient.MaxStatusErrorChars)
				}
			} else if r.Error != tc.want {
				t.Errorf("error = %q, want %q", r.Error, tc.want)
			}
			if strings.Contains(r.Error, key) {
				t.Errorf("error %q holds the key", r.Error)
			}
		})
	}
}
