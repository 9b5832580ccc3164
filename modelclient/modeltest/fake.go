// Package modeltest provides Fake, an in-process model speaking both
// dialects of modelclient, for tests and benchmarks of everything that asks
// the model.
//
// A Fake answers at once by default (allow with confidence 0.9; art 0.5
// with two criteria at 0.5), so it can stand in for an instant model in
// throughput benchmarks. Its behaviour can be changed at any time, from any
// goroutine, and applies to the requests that arrive afterwards.
//
// Each request goes through these steps, in order, and the first that
// answers ends it: the Handle hook; a method other than POST (405); the key
// (RequireKey, 401); the gate (HoldUntil); the delay (Delay); Hang;
// DropConnections; a failure (Fail, FailNext); a body that is not a request
// (400); Garbage; the answer (SetAnswer, else SetVerdict or SetArt).
package modeltest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/owed/owed/modelclient"
)

// Paths served. Every path but OpenAIPath speaks the relay dialect.
const (
	RelayPath  = "/relay"
	OpenAIPath = "/v1/chat/completions"
)

// Dialect names as recorded in Request.Dialect (the modelclient API values).
const (
	Relay  = modelclient.APIRelay
	OpenAI = modelclient.APIOpenAI
)

// OpenAIModel is the model name OpenAIConfig sets.
const OpenAIModel = "fake-model"

// Request is one request the fake received, decoded as it understood it.
type Request struct {
	Dialect string      // Relay or OpenAI
	Method  string      // HTTP method
	Path    string      // URL path
	Header  http.Header // as received
	Body    []byte      // as received

	// The relay request: the body itself (relay), or the user message's
	// content (openai).
	Task    string // "screen" or "score"
	Kind    string // screen: revision, comment or pitch
	Subject Subject
	Model   string // score
	Rubric  string // score
	Song    Song   // score
	Spec    string // score

	Chat *Chat // the chat-completions envelope; nil for relay
	Err  error // why the body was not a valid request; the fake answered 400
}

// Subject is a screen request's subject.
type Subject struct {
	Title string `json:"title"`
	Text  string `json:"text"`
}

// Song is a score request's song.
type Song struct {
	Title string `json:"title"`
	Code  string `json:"code"`
}

// Chat is an openai-dialect request envelope.
type Chat struct {
	Model          string        `json:"model"`
	Messages       []ChatMessage `json:"messages"`
	ResponseFormat struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string          `json:"name"`
			Strict bool            `json:"strict"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
	Temperature *float64 `json:"temperature"`
}

// ChatMessage is one message of a Chat.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Fake is a running fake model. Create it with New; it stops when the test
// ends. All methods are safe for concurrent use.
type Fake struct {
	srv    *httptest.Server
	closed chan struct{} // closed first at cleanup, so held requests return

	calls       atomic.Int64
	scoreRuns   atomic.Int64
	conns       atomic.Int64
	inFlight    atomic.Int64
	maxInFlight atomic.Int64

	mu   sync.Mutex
	b    behaviour
	keep bool
	reqs []Request
}

// behaviour is what the next request meets. It is copied per request under
// mu, so setters never race with requests in flight.
type behaviour struct {
	key         string
	verdict     modelclient.Verdict
	art         func(run int) modelclient.ArtRun
	answer      []byte // answer element for every task; nil: the task's own
	failStatus  int
	failHeaders map[string]string
	failLeft    int // requests still to fail; -1: all
	garbage     bool
	delay       time.Duration
	hang        bool
	drop        bool
	gate        *gate
	hook        func(http.ResponseWriter, *http.Request) bool
}

func defaults() behaviour {
	return behaviour{verdict: modelclient.Verdict{Verdict: "allow", Confidence: 0.9}, art: DefaultArt}
}

// DefaultArt is the score answer of a new Fake: art 0.5, melody and rhythm
// 0.5, whatever the run.
func DefaultArt(int) modelclient.ArtRun {
	return modelclient.ArtRun{Art: 0.5, Criteria: map[string]float64{"melody": 0.5, "rhythm": 0.5}}
}

// New starts a fake model that is closed when t's test ends.
func New(t testing.TB) *Fake {
	t.Helper()
	f := &Fake{closed: make(chan struct{}), b: defaults(), keep: true}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.conns.Add(1)
		}
	}
	f.srv.Start()
	t.Cleanup(func() {
		close(f.closed)
		f.srv.Close()
	})
	return f
}

// URL is the relay endpoint.
func (f *Fake) URL() string { return f.srv.URL + RelayPath }

// OpenAIURL is the chat-completions endpoint.
func (f *Fake) OpenAIURL() string { return f.srv.URL + OpenAIPath }

// Config is a relay client configuration for the fake, with the key given
// to RequireKey so far.
func (f *Fake) Config() modelclient.Config {
	f.mu.Lock()
	defer f.mu.Unlock()
	return modelclient.Config{URL: f.URL(), Key: f.b.key, API: modelclient.APIRelay}
}

// OpenAIConfig is an openai client configuration for the fake (model
// OpenAIModel), with the key given to RequireKey so far.
func (f *Fake) OpenAIConfig() modelclient.Config {
	f.mu.Lock()
	defer f.mu.Unlock()
	return modelclient.Config{URL: f.OpenAIURL(), Key: f.b.key, API: modelclient.APIOpenAI, Model: OpenAIModel}
}

// Client is a relay client for the fake (see Config).
func (f *Fake) Client() *modelclient.Client { return modelclient.New(f.Config()) }

func (f *Fake) set(change func(b *behaviour)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(&f.b)
}

// SetVerdict sets the screening answer.
func (f *Fake) SetVerdict(verdict string, confidence float64) {
	f.set(func(b *behaviour) { b.verdict = modelclient.Verdict{Verdict: verdict, Confidence: confidence} })
}

// SetArt sets the score answer: run counts the score requests answered
// before this one since New or Reset (0, 1, 2, …), so the runs of one Score
// call get consecutive values in the order they arrive. nil restores
// DefaultArt.
func (f *Fake) SetArt(art func(run int) modelclient.ArtRun) {
	if art == nil {
		art = DefaultArt
	}
	f.set(func(b *behaviour) { b.art = art })
}

// SetAnswer makes v (marshalled with encoding/json; a json.RawMessage is
// sent as it is) the answer element for every task: answers[0] in relay,
// the message content in openai. It serves answers of the wrong shape or
// out of range. nil restores the task's own answer.
func (f *Fake) SetAnswer(v any) {
	var raw []byte
	if v != nil {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			panic(fmt.Sprintf("modeltest: SetAnswer: %v", err))
		}
	}
	f.set(func(b *behaviour) { b.answer = raw })
}

// Fail answers every request with status and headers until Reset.
func (f *Fake) Fail(status int, headers map[string]string) { f.FailNext(-1, status, headers) }

// FailNext answers the next n requests with status and headers (n < 0:
// all of them), then answers normally again.
func (f *Fake) FailNext(n, status int, headers map[string]string) {
	headers = maps.Clone(headers)
	f.set(func(b *behaviour) { b.failStatus, b.failHeaders, b.failLeft = status, headers, n })
}

// Garbage answers 200 with what is not the expected JSON: a body that is
// not JSON (relay), or a well-formed completion whose content is prose
// (openai).
func (f *Fake) Garbage() { f.set(func(b *behaviour) { b.garbage = true }) }

// Delay waits d before answering each request (a request cancelled
// meanwhile is not answered).
func (f *Fake) Delay(d time.Duration) { f.set(func(b *behaviour) { b.delay = d }) }

// Hang never answers: each request is held until the client gives up or
// the test ends.
func (f *Fake) Hang() { f.set(func(b *behaviour) { b.hang = true }) }

// DropConnections closes each request's connection without an answer.
func (f *Fake) DropConnections() { f.set(func(b *behaviour) { b.drop = true }) }

// HoldUntil holds every request until n requests have arrived since this
// call, then lets them all (and every later one) through: n parallel
// requests pass, n sequential ones would wait for ever (or until the
// client's timeout).
func (f *Fake) HoldUntil(n int) {
	g := &gate{n: n, open: make(chan struct{})}
	if n <= 0 {
		close(g.open)
	}
	f.set(func(b *behaviour) { b.gate = g })
}

// Handle installs a hook that runs first on every request (with its body
// readable again); returning true means it answered and the fake does
// nothing more. nil removes it.
func (f *Fake) Handle(h func(w http.ResponseWriter, r *http.Request) bool) {
	f.set(func(b *behaviour) { b.hook = h })
}

// RequireKey makes the fake answer 401 to requests without
// "Authorization: Bearer <k>". "" accepts any request.
func (f *Fake) RequireKey(k string) { f.set(func(b *behaviour) { b.key = k }) }

// KeepRequests says whether Requests records requests (the default).
// Benchmarks turn it off so a long run does not hold every body.
func (f *Fake) KeepRequests(keep bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keep = keep
}

// Reset restores the behaviour of a new Fake (no key, requests kept) and zeroes
// the counters and the recorded requests. Connections are not counted anew.
func (f *Fake) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.b = defaults()
	f.keep = true
	f.reqs = nil
	f.calls.Store(0)
	f.scoreRuns.Store(0)
	f.maxInFlight.Store(f.inFlight.Load())
}

// Calls is the number of requests received, answered or not.
func (f *Fake) Calls() int { return int(f.calls.Load()) }

// Conns is the number of connections accepted since New: with connection
// reuse, sequential asks need one.
func (f *Fake) Conns() int { return int(f.conns.Load()) }

// MaxInFlight is the most requests that were being handled at once: a request counts from its
// arrival until its answer starts (or it ends without one), so a client that has read an
// answer never sees its request still counted.
func (f *Fake) MaxInFlight() int { return int(f.maxInFlight.Load()) }

// InFlight is how many requests are being handled now (see MaxInFlight).
func (f *Fake) InFlight() int { return int(f.inFlight.Load()) }

// Requests returns a copy of the requests received, in arrival order.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// take returns the behaviour for one request and consumes a FailNext.
func (f *Fake) take(req *Request) behaviour {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.b
	if f.b.failLeft > 0 {
		f.b.failLeft--
	} else if f.b.failLeft == 0 {
		b.failStatus = 0
	}
	if f.keep {
		f.reqs = append(f.reqs, *req)
	}
	return b
}

func (f *Fake) serve(rw http.ResponseWriter, r *http.Request) {
	w := f.arrive(rw)
	defer w.end()
	body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	req := decode(r, body)
	b := f.take(&req)
	r.Body = io.NopCloser(bytes.NewReader(body))

	if b.hook != nil && b.hook(w, r) {
		return
	}
	if r.Method != http.MethodPost {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "POST only"})
		return
	}
	if b.key != "" && r.Header.Get("Authorization") != "Bearer "+b.key {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "bad key"})
		return
	}
	f.stall(r.Context(), b)
	if !fail(w, b, req) {
		f.answer(w, b, req)
	}
}

// arrive counts a request in: in flight until its answer starts, and in the calls.
func (f *Fake) arrive(rw http.ResponseWriter) *answering {
	n := f.inFlight.Add(1)
	for m := f.maxInFlight.Load(); n > m && !f.maxInFlight.CompareAndSwap(m, n); m = f.maxInFlight.Load() {
	}
	f.calls.Add(1)
	return &answering{ResponseWriter: rw, done: func() { f.inFlight.Add(-1) }}
}

// stall holds the request as the behaviour says (a gate, a delay, a hang); it ends the request
// without an answer when the client goes or the Fake closes first.
func (f *Fake) stall(ctx context.Context, b behaviour) {
	if b.gate != nil && !b.gate.pass(ctx, f.closed) {
		abort()
	}
	if b.delay > 0 && !wait(ctx, f.closed, time.After(b.delay)) {
		abort()
	}
	if b.hang {
		wait(ctx, f.closed, nil)
		abort()
	}
}

// fail answers in place of the model when the behaviour or the request says so (a dropped
// connection, an error status, a request the model cannot read), and reports whether it did.
func fail(w http.ResponseWriter, b behaviour, req Request) bool {
	switch {
	case b.drop:
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	case b.failStatus != 0:
		for k, v := range b.failHeaders {
			w.Header().Set(k, v)
		}
		writeJSON(w, b.failStatus, map[string]string{"error": "fake failure"})
	case req.Err != nil:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": req.Err.Error()})
	default:
		return false
	}
	return true
}

// answer writes the model's answer to req in its dialect: garbage, the set answer, the set
// verdict, or the next of the set art runs.
func (f *Fake) answer(w http.ResponseWriter, b behaviour, req Request) {
	var element []byte
	switch {
	case b.garbage:
		if req.Dialect == Relay {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"answers": [{"verdict": "allow", "confid`)
			return
		}
		element = []byte("I am sure this is a lovely song.")
	case b.answer != nil:
		element = b.answer
	case req.Task == "screen":
		element, _ = json.Marshal(map[string]any{"verdict": b.verdict.Verdict, "confidence": b.verdict.Confidence})
	default:
		run := b.art(int(f.scoreRuns.Add(1) - 1))
		element = artElement(req.Dialect, run)
	}
	if req.Dialect == Relay {
		writeJSON(w, http.StatusOK, map[string]any{"answers": []json.RawMessage{element}})
		return
	}
	writeJSON(w, http.StatusOK, completion(string(element)))
}

// answering is a request's writer that ends the request's count in flight when its answer
// starts: the deferred end of the handler may run after the client has read the answer and
// sent its next request, which would count one request too many.
type answering struct {
	http.ResponseWriter
	once sync.Once
	done func()
}

func (a *answering) end() { a.once.Do(a.done) }

func (a *answering) WriteHeader(code int) {
	a.end()
	a.ResponseWriter.WriteHeader(code)
}

func (a *answering) Write(b []byte) (int, error) {
	a.end()
	return a.ResponseWriter.Write(b)
}

// Unwrap lets http.NewResponseController reach the connection (DropConnections hijacks it).
func (a *answering) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// artElement shapes a score answer as each dialect's schema asks: the relay
// takes a map of criteria, the openai schema a list of {name, score}.
func artElement(dialect string, run modelclient.ArtRun) []byte {
	if dialect == Relay {
		crit := run.Criteria
		if crit == nil {
			crit = map[string]float64{}
		}
		b, _ := json.Marshal(map[string]any{"art": run.Art, "criteria": crit})
		return b
	}
	type item struct {
		Name  string  `json:"name"`
		Score float64 `json:"score"`
	}
	list := []item{}
	for _, name := range slices.Sorted(maps.Keys(run.Criteria)) {
		list = append(list, item{name, run.Criteria[name]})
	}
	b, _ := json.Marshal(map[string]any{"art": run.Art, "criteria": list})
	return b
}

// Completion wraps content as a chat-completions answer, for Handle hooks
// that answer the openai dialect themselves.
func Completion(content string) []byte {
	b, _ := json.Marshal(completion(content))
	return b
}

func completion(content string) map[string]any {
	return map[string]any{
		"id":     "chatcmpl-fake",
		"object": "chat.completion",
		"model":  OpenAIModel,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": content},
			"finish_reason": "stop",
		}},
	}
}

// decode reads a request the way a real model server would, so tests see
// what was actually on the wire.
func decode(r *http.Request, body []byte) Request {
	req := Request{Dialect: Relay, Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	relay := body
	if r.URL.Path == OpenAIPath {
		req.Dialect = OpenAI
		var chat Chat
		if err := json.Unmarshal(body, &chat); err != nil {
			req.Err = fmt.Errorf("not a chat request: %v", err)
			return req
		}
		req.Chat = &chat
		relay = nil
		for _, m := range chat.Messages {
			if m.Role == "user" {
				relay = []byte(m.Content)
			}
		}
		if relay == nil {
			req.Err = fmt.Errorf("no user message")
			return req
		}
	}
	var w struct {
		Task    string  `json:"task"`
		Kind    string  `json:"kind"`
		Subject Subject `json:"subject"`
		Model   string  `json:"model"`
		Rubric  string  `json:"rubric"`
		Song    Song    `json:"song"`
		Spec    string  `json:"spec"`
	}
	if err := json.Unmarshal(relay, &w); err != nil {
		req.Err = fmt.Errorf("not a relay request: %v", err)
		return req
	}
	req.Task, req.Kind, req.Subject = w.Task, w.Kind, w.Subject
	req.Model, req.Rubric, req.Song, req.Spec = w.Model, w.Rubric, w.Song, w.Spec
	switch w.Task {
	case "screen":
		if w.Kind != modelclient.KindRevision && w.Kind != modelclient.KindComment && w.Kind != modelclient.KindPitch {
			req.Err = fmt.Errorf("unknown kind %q", w.Kind)
		}
	case "score":
	default:
		req.Err = fmt.Errorf("unknown task %q", w.Task)
	}
	return req
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// abort ends a request without any answer: the server closes the
// connection, so a client still waiting (the fake is closing) sees a
// network failure rather than an empty 200.
func abort() { panic(http.ErrAbortHandler) }

// wait blocks until ready fires (true) or the request or the fake ends
// (false). A nil ready waits for the latter only.
func wait(ctx context.Context, closed <-chan struct{}, ready <-chan time.Time) bool {
	select {
	case <-ready:
		return true
	case <-ctx.Done():
		return false
	case <-closed:
		return false
	}
}

// gate opens once n requests have reached it.
type gate struct {
	mu      sync.Mutex
	n       int
	arrived int
	open    chan struct{}
}

func (g *gate) pass(ctx context.Context, closed <-chan struct{}) bool {
	g.mu.Lock()
	g.arrived++
	if g.arrived == g.n {
		close(g.open)
	}
	g.mu.Unlock()
	select {
	case <-g.open:
		return true
	case <-ctx.Done():
		return false
	case <-closed:
		return false
	}
}
