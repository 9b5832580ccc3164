package modelclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/models"
)

var (
	song   = modelclient.ScreenRequest{Kind: modelclient.KindRevision, Subject: modelclient.Subject{Title: "Night <drive>", Text: `s("bd sd") & "hh"`}}
	critic = modelclient.ScoreRequest{Model: "critic", Rubric: "art-v1", Title: "Night drive", Code: `s("bd sd")`, Spec: "judge the groove"}
)

// client returns a relay client for f with a timeout short enough that a
// test waiting on something that never comes fails quickly.
func client(f *modeltest.Fake) *modelclient.Client {
	cfg := f.Config()
	cfg.Timeout = 5 * time.Second
	return modelclient.New(cfg)
}

func TestScreenRelay(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	f.RequireKey("sekret")
	r := client(f).Screen(t.Context(), song)
	if r.Why != "" || r.Status != 200 || r.Verdict == nil || *r.Verdict != (modelclient.Verdict{Verdict: "allow", Confidence: 0.9}) {
		t.Fatalf("reply = %+v, verdict %+v", r, r.Verdict)
	}
	reqs := f.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	q := reqs[0]
	if q.Err != nil || q.Task != "screen" || q.Kind != "revision" || q.Subject != (modeltest.Subject{Title: song.Subject.Title, Text: song.Subject.Text}) {
		t.Fatalf("request = %+v", q)
	}
	if got := q.Header.Get("Authorization"); got != "Bearer sekret" {
		t.Errorf("Authorization = %q", got)
	}
	if got := q.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
	if r.RequestBytes != len(q.Body) {
		t.Errorf("RequestBytes = %d, body is %d", r.RequestBytes, len(q.Body))
	}
	// Code is sent as written: no \u003c inflation.
	if !strings.Contains(string(q.Body), `"Night <drive>"`) || !strings.Contains(string(q.Body), `& \"hh\"`) {
		t.Errorf("body = %s", q.Body)
	}
	if r.Runs != nil {
		t.Errorf("Runs = %v on a screen", r.Runs)
	}
}

func TestScreenBlock(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	f.SetVerdict("block", 0.75)
	r := client(f).Screen(t.Context(), modelclient.ScreenRequest{Kind: modelclient.KindComment, Subject: modelclient.Subject{Text: "buy now"}})
	if r.Why != "" || *r.Verdict != (modelclient.Verdict{Verdict: "block", Confidence: 0.75}) {
		t.Fatalf("reply = %+v", r)
	}
}

func TestBearerKey(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	f.RequireKey("right")
	cfg := f.Config()
	cfg.Key = "wrong"
	if r := modelclient.New(cfg).Screen(t.Context(), song); r.Why != models.WhyUpstream || r.Status != 401 {
		t.Errorf("wrong key: %+v", r)
	}
	cfg.Key = ""
	if r := modelclient.New(cfg).Screen(t.Context(), song); r.Why != models.WhyUpstream || r.Status != 401 {
		t.Errorf("no key: %+v", r)
	}
	f.RequireKey("")
	modelclient.New(cfg).Screen(t.Context(), song)
	reqs := f.Requests()
	if h := reqs[len(reqs)-1].Header; h.Values("Authorization") != nil {
		t.Errorf("no key configured, yet Authorization = %q", h.Values("Authorization"))
	}
}

func TestScoreRelay(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	r := client(f).Score(t.Context(), critic, 3)
	if r.Why != "" || r.Status != 200 || len(r.Runs) != 3 {
		t.Fatalf("reply = %+v", r)
	}
	for _, run := range r.Runs {
		if run.Art != 0.5 || run.Criteria["melody"] != 0.5 || run.Criteria["rhythm"] != 0.5 {
			t.Errorf("run = %+v", run)
		}
	}
	if r.Verdict != nil {
		t.Errorf("Verdict set on a score")
	}
	reqs := f.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for _, q := range reqs {
		if q.Err != nil || q.Task != "score" || q.Model != "critic" || q.Rubric != "art-v1" || q.Spec != "judge the groove" ||
			q.Song != (modeltest.Song{Title: critic.Title, Code: critic.Code}) {
			t.Errorf("request = %+v", q)
		}
		if string(q.Body) != string(reqs[0].Body) || len(q.Body) != r.RequestBytes {
			t.Errorf("runs sent different bodies or RequestBytes %d is not one body's %d", r.RequestBytes, len(q.Body))
		}
	}
}

// The runs are separate requests in flight at once: the fake holds every
// request until three have arrived, which sequential runs would never do.
func TestScoreRunsInParallel(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	f.HoldUntil(3)
	r := client(f).Score(t.Context(), critic, 3)
	if r.Why != "" || len(r.Runs) != 3 {
		t.Fatalf("reply = %+v", r)
	}
	if f.Calls() != 3 || f.MaxInFlight() != 3 {
		t.Fatalf("calls %d, max in flight %d; want 3 and 3", f.Calls(), f.MaxInFlight())
	}
}

func TestScoreRunsDiffer(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	answers := []modelclient.ArtRun{
		{Art: 0.2, Criteria: map[string]float64{"form": 0.2, "feel": 0.4}},
		{Art: 0.5, Criteria: map[string]float64{"form": 0.4}},
		{Art: 0.8, Criteria: map[string]float64{"form": 0.6, "feel": 0.8}},
	}
	f.SetArt(func(run int) modelclient.ArtRun { return answers[run%3] })
	r := client(f).Score(t.Context(), critic, 3)
	if r.Why != "" || len(r.Runs) != 3 {
		t.Fatalf("reply = %+v", r)
	}
	// Which request got which answer depends on arrival; each run must
	// still carry its own answer, whole.
	var arts []float64
	for _, run := range r.Runs {
		arts = append(arts, run.Art)
		i := slices.IndexFunc(answers, func(a modelclient.ArtRun) bool { return a.Art == run.Art })
		if i < 0 || len(run.Criteria) != len(answers[i].Criteria) || run.Criteria["form"] != answers[i].Criteria["form"] {
			t.Errorf("run %+v is no answer given", run)
		}
	}
	slices.Sort(arts)
	if !slices.Equal(arts, []float64{0.2, 0.5, 0.8}) {
		t.Fatalf("arts = %v", arts)
	}
	m := modelclient.Mean(r.Runs)
	near(t, "art", m.Art, 0.5)
	near(t, "form", m.Criteria["form"], 0.4)
	near(t, "feel", m.Criteria["feel"], 0.6) // over the two runs that named it
	for i, run := range r.Runs {
		if m.ArtRuns[i] != run.Art {
			t.Errorf("ArtRuns = %v, not in run order of %+v", m.ArtRuns, r.Runs)
		}
	}
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-12 {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestMean(t *testing.T) {
	t.Parallel()
	m := modelclient.Mean([]modelclient.ArtRun{
		{Art: 0.3, Criteria: map[string]float64{"a": 0.1}},
		{Art: 0.6, Criteria: map[string]float64{"a": 0.3, "b": 1}},
		{Art: 0.9, Criteria: map[string]float64{}},
	})
	near(t, "art", m.Art, 0.6)
	near(t, "a", m.Criteria["a"], 0.2)
	near(t, "b", m.Criteria["b"], 1)
	if !slices.Equal(m.ArtRuns, []float64{0.3, 0.6, 0.9}) || len(m.Criteria) != 2 {
		t.Errorf("mean = %+v", m)
	}
	empty := modelclient.Mean(nil)
	if empty.Art != 0 || empty.ArtRuns == nil || len(empty.ArtRuns) != 0 || empty.Criteria == nil || len(empty.Criteria) != 0 {
		t.Errorf("Mean(nil) = %#v", empty)
	}
}

func TestUpstream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		status  int
		headers map[string]string
		retry   time.Duration
	}{
		{"5xx", 503, nil, 0},
		{"429 Retry-After seconds", 429, map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{"retry-after-ms wins", 429, map[string]string{"Retry-After": "7", "retry-after-ms": "1500"}, 1500 * time.Millisecond},
		{"invalid Retry-After ignored", 503, map[string]string{"Retry-After": "soon"}, 0},
		{"invalid retry-after-ms falls back", 429, map[string]string{"Retry-After": "2", "retry-after-ms": "-1"}, 2 * time.Second},
		{"4xx", 400, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := modeltest.New(t)
			f.Fail(tc.status, tc.headers)
			r := client(f).Screen(t.Context(), song)
			want := modelclient.Reply{Why: models.WhyUpstream, Status: tc.status, RetryAfter: tc.retry, RequestBytes: r.RequestBytes, UpstreamMs: r.UpstreamMs}
			if r.Verdict != nil || r.Err != nil || r.RequestBytes == 0 || r.Why != want.Why || r.Status != want.Status || r.RetryAfter != want.RetryAfter {
				t.Errorf("screen reply = %+v, want %+v", r, want)
			}
			r = client(f).Score(t.Context(), critic, 3)
			if r.Runs != nil || r.Why != want.Why || r.Status != want.Status || r.RetryAfter != want.RetryAfter {
				t.Errorf("score reply = %+v, want %+v", r, want)
			}
		})
	}
}

// One failed run decides the score, and the runs still waiting are cancelled
// rather than waited for.
func TestScoreOneRunFails(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	var n atomic.Int32
	all := make(chan struct{})
	f.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		i := n.Add(1)
		if i == 3 {
			close(all)
		}
		if i == 2 {
			<-all // fail once every run is in flight
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
			return true
		}
		<-r.Context().Done() // the others hang: only cancellation ends them
		return true
	})
	start := time.Now()
	r := client(f).Score(t.Context(), critic, 3)
	if r.Why != models.WhyUpstream || r.Status != 429 || r.RetryAfter != 3*time.Second || r.Runs != nil {
		t.Fatalf("reply = %+v", r)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("took %v: the hanging runs were not cancelled", time.Since(start))
	}
	if f.Calls() != 3 {
		t.Errorf("calls = %d, want 3", f.Calls())
	}
}

func TestScoreOneRunUnanswered(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	var n atomic.Int32
	f.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		if n.Add(1) == 3 {
			w.Write([]byte(`{"answers":[{"art":"high"}]}`))
			return true
		}
		return false
	})
	r := client(f).Score(t.Context(), critic, 3)
	if r.Why != models.WhyUnanswered || r.Status != 200 || r.Runs != nil {
		t.Fatalf("reply = %+v", r)
	}
}

func TestUnanswered(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 1<<20)
	for _, tc := range []struct {
		name   string
		answer any // for SetAnswer; string: the whole body
		score  bool
	}{
		{"not JSON", "this is not json", false},
		{"truncated", `{"answers":[{"verdict":"allow"`, false},
		{"no answers", `{"answers":[]}`, false},
		{"answers missing", `{"verdict":"allow","confidence":0.9}`, false},
		{"answers not a list", `{"answers":{"verdict":"allow","confidence":0.9}}`, false},
		{"null answer", `{"answers":[null]}`, false},
		{"empty body", "", false},
		{"oversized", `{"answers":[{"verdict":"allow","confidence":0.9,"pad":"` + big + `"}]}`, false},
		{"verdict maybe", map[string]any{"verdict": "maybe", "confidence": 0.5}, false},
		{"verdict case", map[string]any{"verdict": "Allow", "confidence": 0.5}, false},
		{"confidence 1.5", map[string]any{"verdict": "allow", "confidence": 1.5}, false},
		{"confidence negative", map[string]any{"verdict": "block", "confidence": -0.01}, false},
		{"confidence string", map[string]any{"verdict": "allow", "confidence": "0.9"}, false},
		{"confidence NaN", map[string]any{"verdict": "allow", "confidence": "NaN"}, false},
		{"confidence overflow", json.RawMessage(`{"verdict":"allow","confidence":1e999}`), false},
		{"confidence missing", map[string]any{"verdict": "allow"}, false},
		{"confidence null", map[string]any{"verdict": "allow", "confidence": nil}, false},
		{"verdict missing", map[string]any{"confidence": 0.9}, false},
		{"answer a list", []any{"allow", 0.9}, false},
		{"art missing", map[string]any{"criteria": map[string]float64{"a": 0.5}}, true},
		{"art 1.2", map[string]any{"art": 1.2}, true},
		{"art string", map[string]any{"art": "0.5"}, true},
		{"criterion 2", map[string]any{"art": 0.5, "criteria": map[string]float64{"a": 2}}, true},
		{"criterion null", map[string]any{"art": 0.5, "criteria": map[string]any{"a": nil}}, true},
		{"criteria string", map[string]any{"art": 0.5, "criteria": "good"}, true},
		{"criteria list duplicate", json.RawMessage(`{"art":0.5,"criteria":[{"name":"a","score":0.1},{"name":"a","score":0.2}]}`), true},
		{"criteria list unnamed", json.RawMessage(`{"art":0.5,"criteria":[{"score":0.1}]}`), true},
		{"verdict to a score", map[string]any{"verdict": "allow", "confidence": 0.9}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := modeltest.New(t)
			if body, ok := tc.answer.(string); ok {
				f.Handle(func(w http.ResponseWriter, _ *http.Request) bool {
					w.Write([]byte(body))
					return true
				})
			} else {
				f.SetAnswer(tc.answer)
			}
			c := client(f)
			var r modelclient.Reply
			if tc.score {
				r = c.Score(t.Context(), critic, 3)
			} else {
				r = c.Screen(t.Context(), song)
			}
			if r.Why != models.WhyUnanswered || r.Status != 200 || r.Verdict != nil || r.Runs != nil || r.Err != nil {
				t.Errorf("reply = %+v", r)
			}
		})
	}
}

func TestGarbage(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	f.Garbage()
	if r := client(f).Screen(t.Context(), song); r.Why != models.WhyUnanswered || r.Status != 200 {
		t.Errorf("screen = %+v", r)
	}
	if r := client(f).Score(t.Context(), critic, 3); r.Why != models.WhyUnanswered || r.Status != 200 {
		t.Errorf("score = %+v", r)
	}
}

func TestCriteriaOptional(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	for _, answer := range []string{`{"art":0.25}`, `{"art":0.25,"criteria":null}`, `{"art":0.25,"criteria":{}}`, `{"art":0.25,"criteria":[]}`} {
		f.SetAnswer(json.RawMessage(answer))
		r := client(f).Score(t.Context(), critic, 1)
		if r.Why != "" || len(r.Runs) != 1 || r.Runs[0].Art != 0.25 || r.Runs[0].Criteria == nil || len(r.Runs[0].Criteria) != 0 {
			t.Errorf("%s: reply = %+v", answer, r)
		}
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	f.Hang()
	cfg := f.Config()
	cfg.Timeout = 50 * time.Millisecond
	c := modelclient.New(cfg)
	start := time.Now()
	r := c.Screen(t.Context(), song)
	if r.Why != models.WhyUnreachable || r.Status != 0 || r.Verdict != nil {
		t.Errorf("screen = %+v", r)
	}
	if r.UpstreamMs < 50 || time.Since(start) > 2*time.Second {
		t.Errorf("UpstreamMs = %d, took %v", r.UpstreamMs, time.Since(start))
	}
	if r := c.Score(t.Context(), critic, 3); r.Why != models.WhyUnreachable || r.Status != 0 || r.Runs != nil {
		t.Errorf("score = %+v", r)
	}
}

// A body that stalls after the headers is cut by the same deadline.
func TestTimeoutInBody(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	f.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		w.Write([]byte(`{"answers":[`))
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		return true
	})
	cfg := f.Config()
	cfg.Timeout = 50 * time.Millisecond
	if r := modelclient.New(cfg).Screen(t.Context(), song); r.Why != models.WhyUnreachable || r.Status != 0 {
		t.Errorf("reply = %+v", r)
	}
}

func TestCallerCancels(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	f.Hang()
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(20*time.Millisecond, cancel)
	if r := client(f).Score(ctx, critic, 3); r.Why != models.WhyUnreachable {
		t.Errorf("reply = %+v", r)
	}
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := modelclient.New(modelclient.Config{URL: "http://" + addr + "/relay", Timeout: 5 * time.Second})
	if r := c.Screen(t.Context(), song); r.Why != models.WhyUnreachable || r.Status != 0 || r.RequestBytes == 0 {
		t.Errorf("screen = %+v", r)
	}
	if r := c.Score(t.Context(), critic, 3); r.Why != models.WhyUnreachable || r.Status != 0 {
		t.Errorf("score = %+v", r)
	}
}

func TestDroppedConnection(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	f.DropConnections()
	if r := client(f).Screen(t.Context(), song); r.Why != models.WhyUnreachable || r.Status != 0 {
		t.Errorf("screen = %+v", r)
	}
	if r := client(f).Score(t.Context(), critic, 3); r.Why != models.WhyUnreachable || r.Status != 0 {
		t.Errorf("score = %+v", r)
	}
}

// Unreachable outranks a sibling run's upstream failure: no run reached the
// model means nothing about the model's limits is known from that run.
func TestScoreUnreachableWins(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	var n atomic.Int32
	f.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		if n.Add(1) == 1 {
			conn, _, _ := http.NewResponseController(w).Hijack()
			conn.Close()
			return true
		}
		time.Sleep(30 * time.Millisecond) // after the drop is seen
		w.WriteHeader(503)
		return true
	})
	if r := client(f).Score(t.Context(), critic, 3); r.Why != models.WhyUnreachable {
		t.Errorf("reply = %+v", r)
	}
}

func TestNotConfigured(t *testing.T) {
	t.Parallel()
	for _, cfg := range []modelclient.Config{
		{},
		{Key: "k", API: modelclient.APIOpenAI},
	} {
		c := modelclient.New(cfg)
		if c.Configured() {
			t.Errorf("%+v: Configured", cfg)
		}
		want := modelclient.Reply{Why: models.WhyUnreachable}
		if r := c.Screen(t.Context(), song); !replyEqual(r, want) {
			t.Errorf("screen = %+v", r)
		}
		if r := c.Score(t.Context(), critic, 3); !replyEqual(r, want) {
			t.Errorf("score = %+v", r)
		}
	}
}

func TestInvalidConfig(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	for _, cfg := range []modelclient.Config{
		{URL: f.URL(), API: "anthropic"},
		{URL: "localhost:8080/relay"},
		{URL: f.URL(), Timeout: -time.Second},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("%+v: Validate passed", cfg)
		}
		c := modelclient.New(cfg)
		if c.Configured() {
			t.Errorf("%+v: Configured", cfg)
		}
		if r := c.Screen(t.Context(), song); r.Why != models.WhyUnreachable {
			t.Errorf("%+v: screen = %+v", cfg, r)
		}
	}
	if f.Calls() != 0 {
		t.Errorf("%d requests sent by invalid clients", f.Calls())
	}
	for _, cfg := range []modelclient.Config{{}, f.Config(), f.OpenAIConfig(), {URL: "https://models.example/v1/chat/completions", API: "openai"}} {
		if err := cfg.Validate(); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

func replyEqual(a, b modelclient.Reply) bool {
	return a.Why == b.Why && a.Status == b.Status && a.UpstreamMs == b.UpstreamMs && a.RetryAfter == b.RetryAfter &&
		a.RequestBytes == b.RequestBytes && a.Verdict == nil && b.Verdict == nil && a.Runs == nil && b.Runs == nil && a.Err == nil && b.Err == nil
}

func TestRefusedNotSent(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	c := client(f)
	r := c.Screen(t.Context(), modelclient.ScreenRequest{Kind: modelclient.KindPitch, Subject: modelclient.Subject{Text: strings.Repeat("a", modelclient.MaxTextBytes+1)}})
	var le *modelclient.LimitError
	if r.Why != models.WhyUnanswered || !errors.As(r.Err, &le) || le.Field != "body" {
		t.Errorf("screen = %+v", r)
	}
	r = c.Score(t.Context(), modelclient.ScoreRequest{Title: strings.Repeat("t", modelclient.MaxTitleChars+1)}, 3)
	if r.Why != models.WhyUnanswered || !errors.As(r.Err, &le) || le.Field != "title" {
		t.Errorf("score = %+v", r)
	}
	if f.Calls() != 0 {
		t.Errorf("%d requests sent", f.Calls())
	}
}

// Answers are read to the end and failures drained, so sequential asks,
// failed ones included, share one connection.
func TestConnectionReuse(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	c := client(f)
	for i := range 10 {
		if i%3 == 1 {
			f.FailNext(1, 503, map[string]string{"Retry-After": "1"})
		}
		c.Screen(t.Context(), song)
	}
	if f.Calls() != 10 || f.Conns() != 1 {
		t.Errorf("calls %d over %d connections; want 10 over 1", f.Calls(), f.Conns())
	}
}

func TestOpenAIScreen(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	f.RequireKey("sk-test")
	f.SetVerdict("block", 0.6)
	cfg := f.OpenAIConfig()
	cfg.Timeout = 5 * time.Second
	r := modelclient.New(cfg).Screen(t.Context(), song)
	if r.Why != "" || r.Status != 200 || *r.Verdict != (modelclient.Verdict{Verdict: "block", Confidence: 0.6}) {
		t.Fatalf("reply = %+v", r)
	}
	q := f.Requests()[0]
	if q.Dialect != modeltest.OpenAI || q.Err != nil || q.Chat == nil {
		t.Fatalf("request = %+v", q)
	}
	checkChat(t, q, modeltest.OpenAIModel, "verdict")
	if q.Task != "screen" || q.Kind != "revision" || q.Subject.Text != song.Subject.Text {
		t.Errorf("relay request in the user message = %+v", q)
	}
	if q.Header.Get("Authorization") != "Bearer sk-test" || r.RequestBytes != len(q.Body) {
		t.Errorf("Authorization %q, RequestBytes %d of %d", q.Header.Get("Authorization"), r.RequestBytes, len(q.Body))
	}
}

func TestOpenAIScore(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	f.SetArt(func(run int) modelclient.ArtRun {
		return modelclient.ArtRun{Art: 0.1 * float64(run+1), Criteria: map[string]float64{"form": 0.3, "feel": 0.1 * float64(run+1)}}
	})
	cfg := f.OpenAIConfig()
	cfg.Timeout = 5 * time.Second
	r := modelclient.New(cfg).Score(t.Context(), critic, 3)
	if r.Why != "" || len(r.Runs) != 3 {
		t.Fatalf("reply = %+v", r)
	}
	m := modelclient.Mean(r.Runs)
	near(t, "art", m.Art, 0.2)
	near(t, "form", m.Criteria["form"], 0.3)
	near(t, "feel", m.Criteria["feel"], 0.2)
	for _, q := range f.Requests() {
		// The score names its critic, not the screening model.
		checkChat(t, q, "critic", "art")
		if q.Task != "score" || q.Song.Code != critic.Code || q.Spec != critic.Spec {
			t.Errorf("relay request in the user message = %+v", q)
		}
	}
}

func checkChat(t *testing.T, q modeltest.Request, model, schema string) {
	t.Helper()
	c := q.Chat
	if c.Model != model {
		t.Errorf("model = %q, want %q", c.Model, model)
	}
	if len(c.Messages) != 2 || c.Messages[0].Role != "system" || c.Messages[0].Content == "" || c.Messages[1].Role != "user" {
		t.Errorf("messages = %+v", c.Messages)
	}
	rf := c.ResponseFormat
	if rf.Type != "json_schema" || rf.JSONSchema.Name != schema || !rf.JSONSchema.Strict {
		t.Errorf("response_format = %+v", rf)
	}
	var s struct {
		Type                 string
		Required             []string
		AdditionalProperties *bool
	}
	if err := json.Unmarshal(rf.JSONSchema.Schema, &s); err != nil || s.Type != "object" || len(s.Required) != 2 ||
		s.AdditionalProperties == nil || *s.AdditionalProperties {
		t.Errorf("schema = %s (%v)", rf.JSONSchema.Schema, err)
	}
	if c.Temperature == nil {
		t.Errorf("no temperature")
	}
}

func TestOpenAIContent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		content string
		ok      bool
	}{
		{"plain", `{"verdict":"allow","confidence":0.8}`, true},
		{"fenced", "```json\n{\"verdict\":\"allow\",\"confidence\":0.8}\n```", true},
		{"fenced bare", "```\n{\"verdict\":\"allow\",\"confidence\":0.8}\n```\n", true},
		{"fenced one line", "```json {\"verdict\":\"allow\",\"confidence\":0.8}```", true},
		{"after thinking", "<think>hmm, fine</think>\n{\"verdict\":\"allow\",\"confidence\":0.8}", true},
		{"prose", "I think this should be allowed.", false},
		{"empty", "", false},
		{"wrong shape", `{"answers":[{"verdict":"allow","confidence":0.8}]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := modeltest.New(t)
			f.Handle(func(w http.ResponseWriter, _ *http.Request) bool {
				w.Write(modeltest.Completion(tc.content))
				return true
			})
			r := modelclient.New(f.OpenAIConfig()).Screen(t.Context(), song)
			if tc.ok != (r.Why == "") || (!tc.ok && (r.Why != models.WhyUnanswered || r.Status != 200)) {
				t.Errorf("reply = %+v", r)
			}
			if tc.ok && *r.Verdict != (modelclient.Verdict{Verdict: "allow", Confidence: 0.8}) {
				t.Errorf("verdict = %+v", r.Verdict)
			}
		})
	}
}

func TestOpenAIEnvelope(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"choices":[]}`,
		`{"choices":[{"message":{"content":null,"refusal":"no"}}]}`,
		`{"choices":[{"message":{"content":[{"type":"text","text":"{}"}]}}]}`,
		`{"answers":[{"verdict":"allow","confidence":0.8}]}`,
		`not json`,
	} {
		f := modeltest.New(t)
		f.Handle(func(w http.ResponseWriter, _ *http.Request) bool {
			w.Write([]byte(body))
			return true
		})
		if r := modelclient.New(f.OpenAIConfig()).Screen(t.Context(), song); r.Why != models.WhyUnanswered {
			t.Errorf("%s: reply = %+v", body, r)
		}
	}
}

func TestOpenAIGarbage(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	f.Garbage()
	c := modelclient.New(f.OpenAIConfig())
	if r := c.Screen(t.Context(), song); r.Why != models.WhyUnanswered || r.Status != 200 {
		t.Errorf("screen = %+v", r)
	}
	if r := c.Score(t.Context(), critic, 3); r.Why != models.WhyUnanswered || r.Status != 200 {
		t.Errorf("score = %+v", r)
	}
}

// The openai decoder also takes the relay's map of criteria, which models
// given a looser schema (or none) tend to answer.
func TestOpenAICriteriaMap(t *testing.T) {
	t.Parallel()
	f := modeltest.New(t)
	f.SetAnswer(json.RawMessage(`{"art":0.7,"criteria":{"form":0.6}}`))
	r := modelclient.New(f.OpenAIConfig()).Score(t.Context(), critic, 1)
	if r.Why != "" || r.Runs[0].Art != 0.7 || r.Runs[0].Criteria["form"] != 0.6 {
		t.Errorf("reply = %+v", r)
	}
}

func BenchmarkScreen(b *testing.B) {
	f := modeltest.New(b)
	f.KeepRequests(false)
	c := f.Client()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if r := c.Screen(context.Background(), song); r.Why != "" {
				b.Fatalf("reply = %+v", r)
			}
		}
	})
}

func BenchmarkScore(b *testing.B) {
	f := modeltest.New(b)
	f.KeepRequests(false)
	c := f.Client()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if r := c.Score(context.Background(), critic, 3); r.Why != "" {
				b.Fatalf("reply = %+v", r)
			}
		}
	})
}
