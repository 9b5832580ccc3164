// Package modelclient asks the external model for the work owed to listener
// content: a screening verdict for an item, and art scores for a song revision.
//
// The client never returns an error for a failed call. Every call ends in a
// Reply that is either answered (Why == "") or says why the job must wait
// (Why is models.WhyUnreachable: a network failure, a timeout or no URL;
// models.WhyUpstream: a non-2xx answer; or models.WhyUnanswered: a 2xx that is
// not the expected JSON), because the job runner turns exactly
// that into a reschedule and nothing owed is ever dropped.
//
// Two wire dialects are spoken: "relay" (the default, owed's own JSON
// protocol) and "openai" (a chat-completions endpoint asked for JSON-schema
// output, as OpenAI, Ollama, llama.cpp and vLLM accept).
package modelclient

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/outbound"
)

// Dialects accepted in Config.API.
const (
	APIRelay  = "relay"
	APIOpenAI = "openai"
)

// DefaultTimeout is one call's deadline when Config.Timeout is zero.
const DefaultTimeout = 2 * time.Minute

// maxAnswerBytes caps how much of an answer is read: a verdict or a score is
// a few hundred bytes, so anything near this is not an answer and must not
// be allowed to grow memory.
const maxAnswerBytes = 1 << 20

// maxDrainBytes bounds how much of a failed answer is read just to let its
// connection be reused; past it, closing the connection is cheaper.
const maxDrainBytes = 64 << 10

// Config says where and how the model is reached.
type Config struct {
	URL string // the endpoint; empty: no model configured (every ask is unreachable)
	Key string // sent as "Authorization: Bearer <Key>" when not empty
	API string // APIRelay (also when empty) or APIOpenAI

	// Model names the model in openai-dialect requests: the chat request's
	// "model" for screening, and for scoring when ScoreRequest.Model is empty
	// (relay score requests fall back to it the same way).
	Model string

	Timeout time.Duration // one HTTP call's deadline, body included; DefaultTimeout when zero
	// Proxy is the proxy every call goes through (OWED_MODEL_PROXY); nil: none, whatever the
	// environment's HTTP_PROXY says.
	Proxy *url.URL
	// HTTPClient replaces the guarded client (tests only); nil: outbound's client, pooled.
	HTTPClient *http.Client
}

// Validate reports a configuration that New would accept but that could
// never reach a model (unknown dialect, malformed URL). Call it at startup:
// New does not fail, it makes such a client unconfigured.
func (c Config) Validate() error {
	switch c.API {
	case "", APIRelay, APIOpenAI:
	default:
		return fmt.Errorf("modelclient: API %q: want %q or %q", c.API, APIRelay, APIOpenAI)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("modelclient: negative timeout %v", c.Timeout)
	}
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil {
			return fmt.Errorf("modelclient: URL: %w", err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("modelclient: URL %q: want an absolute http or https URL", c.URL)
		}
	}
	return nil
}

// Reply is the outcome of one ask: answered (Why == "", and Verdict or Runs
// set) or a reason to wait (Why set, Verdict and Runs nil).
type Reply struct {
	Why          models.Why    // "" when answered, else why the job waits (see the package doc)
	Status       int           // HTTP status of the deciding answer (the failed one for upstream); 0 when none was received
	UpstreamMs   int64         // wall time of the call(s), all runs together
	RetryAfter   time.Duration // >0 when an upstream failure asked for a wait (see outbound.RetryAfter)
	RequestBytes int           // size of one run's request body; 0 when no request was attempted (refused, not configured)
	// Error says what went wrong, in words, when Why is set (e.g. "dial tcp 127.0.0.1:9:
	// connect: connection refused", "HTTP 503: upstream overloaded", "answer has no
	// verdict", "no model configured"): at most MaxErrorChars characters, never the key.
	Error   string
	Verdict *Verdict // Screen, when answered
	Runs    []ArtRun // Score, when answered: one per run, in run order

	// Err is set only when the request was refused before sending (a
	// *LimitError from CheckScreen or CheckScore); Why is then
	// models.WhyUnanswered so a caller that only looks at Why still waits instead
	// of recording a missing answer. Callers are expected to check first:
	// reaching this is a bug on their side.
	Err error
}

// MaxErrorChars caps Reply.Error: it is kept with every attempt and shown to operators.
const MaxErrorChars = 500

// ErrNotConfigured is Reply.Error when no model URL is set.
const ErrNotConfigured = "no model configured"

// Client asks the model. It is safe for concurrent use.
type Client struct {
	url     string
	key     string
	api     string
	model   string
	timeout time.Duration
	http    *http.Client
	invalid error // from Config.Validate: the client acts unconfigured
}

// guarded is the model's HTTP client, made by outbound: the configured URL may be private
// (operators run local relays), so the address check is off, but a redirect is followed only
// within the model's own origin (a 307 to a metadata address would otherwise carry the
// author's text there and bring its answer back into events), and no proxy is taken from the
// environment, only proxy when given. No Client.Timeout: each call carries its own deadline.
func guarded(proxy *url.URL) *http.Client {
	return outbound.NewClient(outbound.Options{AllowPrivate: true, SameOrigin: true, Redirects: outbound.MaxRedirects,
		MaxIdleConnsPerHost: 256, Proxy: proxy})
}

// sharedHTTP is the default client: one pool for every Client without a proxy, so creating
// clients (tests do, a lot) does not leak idle connections, and so parallel score runs and
// sweeps reuse warm connections instead of dialing.
var sharedHTTP = sync.OnceValue(func() *http.Client { return guarded(nil) })

// New returns a client for cfg. It never fails: without a URL, or with a
// configuration Validate rejects, Configured is false and every ask answers
// models.WhyUnreachable without a request.
func New(cfg Config) *Client {
	c := &Client{
		url:     cfg.URL,
		key:     cfg.Key,
		api:     cfg.API,
		model:   cfg.Model,
		timeout: cfg.Timeout,
		http:    cfg.HTTPClient,
		invalid: cfg.Validate(),
	}
	c.api = cmp.Or(c.api, APIRelay)
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	switch {
	case c.http != nil:
	case cfg.Proxy != nil:
		c.http = guarded(cfg.Proxy)
	default:
		c.http = sharedHTTP()
	}
	return c
}

// Configured reports whether asks are sent at all: a URL is set and the
// configuration is valid.
func (c *Client) Configured() bool { return c.url != "" && c.invalid == nil }

// Unconfigured says why asks are not sent ("" when Configured): no URL at all, or a
// configuration Validate refused.
func (c *Client) Unconfigured() string {
	switch {
	case c.url == "":
		return ErrNotConfigured
	case c.invalid != nil:
		return c.redact("model configuration refused: " + c.invalid.Error())
	}
	return ""
}

// Screen asks for the verdict on one item. The request is checked with
// CheckScreen first and not sent when refused (see Reply.Err).
func (c *Client) Screen(ctx context.Context, req ScreenRequest) Reply {
	if err := CheckScreen(req); err != nil {
		return Reply{Why: models.WhyUnanswered, Err: err}
	}
	if !c.Configured() {
		return Reply{Why: models.WhyUnreachable, Error: c.Unconfigured()}
	}
	body := c.screenBody(req)
	var v Verdict
	r := c.ask(ctx, body, 1, func(_ int, raw []byte) error {
		var err error
		v, err = parseVerdict(c.api, raw)
		return err
	})
	if r.Why == "" {
		r.Verdict = &v
	}
	return r
}

// Score asks for the art of one song runs times in parallel (runs < 1 is
// taken as 1). Each run is its own HTTP request with the same body and its
// own answer: nothing is cached or shared between runs, since the point of
// several runs is averaging their independent judgements.
//
// The runs decide together, the worst first: any run that could not reach
// the model makes the reply unreachable; else any non-2xx answer makes it
// upstream (with that answer's status and retry-after; the runs still in
// flight are cancelled); else any answer that is not a valid score makes it
// unanswered. Only when every run answered is Runs set.
func (c *Client) Score(ctx context.Context, req ScoreRequest, runs int) Reply {
	if err := CheckScore(req); err != nil {
		return Reply{Why: models.WhyUnanswered, Err: err}
	}
	if !c.Configured() {
		return Reply{Why: models.WhyUnreachable, Error: c.Unconfigured()}
	}
	if runs < 1 {
		runs = 1
	}
	body := c.scoreBody(req)
	out := make([]ArtRun, runs)
	r := c.ask(ctx, body, runs, func(i int, raw []byte) error {
		var err error
		out[i], err = parseArt(c.api, raw)
		return err
	})
	if r.Why == "" {
		r.Runs = out
	}
	return r
}

// errSibling is the cause given to the runs cancelled because another run
// already failed: their own failure is a consequence, not a finding.
var errSibling = errors.New("modelclient: another run failed")

// result is one HTTP call's outcome.
type result struct {
	why     models.Why
	status  int
	retry   time.Duration
	raw     []byte // the 2xx body, when why == ""
	err     string // what went wrong, when why != ""
	aborted bool   // cancelled because a sibling run failed first
}

// ask sends body runs times in parallel and merges the outcomes; decode
// turns run i's 2xx body into its answer, or says what is wrong with it.
func (c *Client) ask(ctx context.Context, body []byte, runs int, decode func(run int, raw []byte) error) Reply {
	start := time.Now()
	results := make([]result, runs)
	if runs == 1 {
		// The common case (every screen) without goroutines.
		results[0] = c.run(ctx, ctx, body, 0, decode, nil)
	} else {
		group, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		var wg sync.WaitGroup
		for i := range runs {
			wg.Go(func() { results[i] = c.run(ctx, group, body, i, decode, cancel) })
		}
		wg.Wait()
	}
	reply := Reply{
		UpstreamMs:   time.Since(start).Milliseconds(),
		RequestBytes: len(body),
	}
	// Worst first, so the reason recorded is the one that matters most for
	// the wait: no connection at all, then the model refusing, then the
	// model answering nonsense.
	for _, r := range results {
		if r.why == models.WhyUnreachable && !r.aborted {
			reply.Why, reply.Error = models.WhyUnreachable, c.redact(r.err)
			return reply
		}
	}
	for _, r := range results {
		if r.why == models.WhyUpstream {
			reply.Why, reply.Status, reply.RetryAfter, reply.Error = models.WhyUpstream, r.status, r.retry, Truncate(c.redact(r.err), MaxStatusErrorChars)
			return reply
		}
	}
	for _, r := range results {
		if r.why == models.WhyUnanswered {
			reply.Why, reply.Status, reply.Error = models.WhyUnanswered, r.status, c.redact(r.err)
			return reply
		}
	}
	reply.Status = results[0].status
	return reply
}

// run performs run i within group and decodes its answer. parent is the
// caller's context, to tell the caller cancelling (a real unreachable) from
// a sibling cancelling (aborted). A hard failure cancels the group, since
// the reply is decided and the other runs would only hold connections.
func (c *Client) run(parent, group context.Context, body []byte, i int, decode func(int, []byte) error, cancel context.CancelCauseFunc) result {
	r := c.call(group, body)
	if r.why == "" {
		if err := decode(i, r.raw); err != nil {
			r.why, r.err = models.WhyUnanswered, err.Error()
		}
		r.raw = nil
	}
	if cancel != nil && (r.why == models.WhyUnreachable || r.why == models.WhyUpstream) {
		if r.why == models.WhyUnreachable && parent.Err() == nil && errors.Is(context.Cause(group), errSibling) {
			r.aborted = true
		} else {
			cancel(errSibling)
		}
	}
	return r
}

// call makes one POST and classifies it. The body of a 2xx answer is read
// whole (up to maxAnswerBytes); any other body is drained so its connection
// goes back to the pool.
func (c *Client) call(ctx context.Context, body []byte) result {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return result{why: models.WhyUnreachable, err: "the request could not be made: " + netError(err, c.timeout)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "owed-modelclient")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return result{why: models.WhyUnreachable, err: netError(err, c.timeout)}
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 && res.StatusCode <= 399 {
		// A redirect the client did not follow: to another origin (or one without a Location).
		// Neither its body nor where it points is kept.
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxDrainBytes))
		return result{why: models.WhyUpstream, status: res.StatusCode, err: fmt.Sprintf("HTTP %d: a redirect to another origin, not followed", res.StatusCode)}
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		retry, _ := outbound.RetryAfter(res.Header, time.Now())
		head, _ := io.ReadAll(io.LimitReader(res.Body, 2048))
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxDrainBytes))
		return result{why: models.WhyUpstream, status: res.StatusCode, retry: retry, err: statusError(res.StatusCode, head)}
	}
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxAnswerBytes+1))
	if err != nil {
		// The answer broke off (reset, deadline): a network failure, not a
		// malformed answer.
		return result{why: models.WhyUnreachable, err: "the answer broke off: " + netError(err, c.timeout)}
	}
	if len(raw) > maxAnswerBytes {
		return result{why: models.WhyUnanswered, status: res.StatusCode, err: fmt.Sprintf("answer larger than %d bytes", maxAnswerBytes)}
	}
	return result{status: res.StatusCode, raw: raw}
}
