// Command clientcheck drives a real `owed serve` through the README's walk-through twice, with
// each Go client made from owed's served document (go run ./cmd/gen makes them; CI makes them
// afresh before this runs): oapi-codegen's, whose every JSON answer is decoded strictly into
// the generated type (an answer it cannot decode, a field the document does not declare, or
// an unexpected status fails the run), and ogen's, which decodes and validates each answer
// itself and returns the type of the status it got. Run it from clientcheck/: go run .
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/owed/owed/clientcheck/internal/serve"
	c "github.com/owed/owed/clientcheck/owedclient"
)

func main() {
	start := time.Now()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "clientcheck: FAIL:", err)
		os.Exit(1)
	}
	fmt.Printf("clientcheck: ok: the oapi-codegen and ogen clients walked the README through in %s\n", time.Since(start).Round(time.Millisecond))
}

// step names what failed.
type stepError struct {
	step string
	err  error
}

func (e stepError) Error() string { return e.step + ": " + e.err.Error() }

// decode reads an answer strictly into a T: the wanted status, JSON, only declared fields, one
// value.
func decode[T any](step string, want int) func(*http.Response, error) T {
	return func(res *http.Response, err error) T {
		var v T
		if err != nil {
			panic(stepError{step, err})
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			panic(stepError{step, err})
		}
		if res.StatusCode != want {
			panic(stepError{step, fmt.Errorf("status %d, want %d: %s", res.StatusCode, want, body)})
		}
		if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "application/json" {
			panic(stepError{step, fmt.Errorf("Content-Type %q, want JSON", res.Header.Get("Content-Type"))})
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			panic(stepError{step, fmt.Errorf("the generated %T cannot decode %s: %w", v, body, err)})
		}
		if dec.More() {
			panic(stepError{step, fmt.Errorf("more than one JSON value: %s", body)})
		}
		return v
	}
}

// status checks an answer without a body.
func status(step string, want int) func(*http.Response, error) {
	return func(res *http.Response, err error) { statusOf(step, want, res, err) }
}

func statusOf(step string, want int, res *http.Response, err error) *http.Response {
	if err != nil {
		panic(stepError{step, err})
	}
	res.Body.Close()
	if res.StatusCode != want {
		panic(stepError{step, fmt.Errorf("status %d, want %d", res.StatusCode, want)})
	}
	return res
}

func check(step string, ok bool, format string, args ...any) {
	if !ok {
		panic(stepError{step, fmt.Errorf(format, args...)})
	}
}

func bearer(token string) c.ClientOption {
	return c.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	})
}

func client(url, token string) *c.Client {
	cl, err := c.NewClient(url, bearer(token))
	if err != nil {
		panic(stepError{"client", err})
	}
	return cl
}

func ptr[T any](v T) *T { return &v }

// receiver is a webhook endpoint that keeps what it gets.
type receiver struct {
	url  string
	mu   sync.Mutex
	got  []http.Header
	body [][]byte
}

func newReceiver() (*receiver, func()) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(stepError{"webhook receiver", err})
	}
	r := &receiver{url: "http://" + l.Addr().String() + "/hook"}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got, r.body = append(r.got, req.Header.Clone()), append(r.body, b)
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(l)
	return r, func() { srv.Close() }
}

// await waits for the receiver's nth delivery (0-based).
func (r *receiver) await(step string, n int) (http.Header, []byte) {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		r.mu.Lock()
		if len(r.got) > n {
			h, b := r.got[n], r.body[n]
			r.mu.Unlock()
			return h, b
		}
		r.mu.Unlock()
	}
	panic(stepError{step, errors.New("no delivery arrived within 20 s")})
}

func verifies(secret string, h http.Header, body []byte) bool {
	wh, err := standardwebhooks.NewWebhook(secret)
	return err == nil && wh.Verify(body, h) == nil
}

// firstEvent reads a server-sent event stream up to its first event (comments, ": ping", are
// none) and closes it: a raw read, as owed's stream does not end.
func firstEvent(step string, body io.ReadCloser) (event, id, data string) {
	defer body.Close()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" && event != "" {
			return event, id, data
		}
		switch {
		case strings.HasPrefix(line, ":"): // a comment, not an event
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		}
	}
	panic(stepError{step, fmt.Errorf("the stream ended before an event: %v", sc.Err())})
}

func run() (err error) {
	o, err := serve.Start("OWED_WEBHOOKS_ALLOW_PRIVATE=true", "OWED_WEBHOOK_SECRET_OVERLAP=1h")
	if err != nil {
		return err
	}
	defer o.Stop()
	rcv, closeRcv := newReceiver()
	defer closeRcv()
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(stepError)
			if !ok {
				panic(r)
			}
			err = se
		}
	}()
	walk(o, rcv)
	ogenRcv, closeOgenRcv := newReceiver()
	defer closeOgenRcv()
	walkOgen(o, ogenRcv)
	return nil
}

func walk(o *serve.Owed, rcv *receiver) {
	ctx := context.Background()
	admin := client(o.URL, o.AdminToken)

	// An author, with an Idempotency-Key as a careful client sends.
	ann := decode[c.UserCreated]("create an author", 201)(admin.PostAdminUsers(ctx,
		&c.PostAdminUsersParams{IdempotencyKey: ptr("clientcheck-ann")}, c.UserRequest{Name: "ann", Role: c.UserRequestRoleAuthor}))
	check("create an author", ann.Token != "" && ann.Role == c.UserCreatedRoleAuthor, "answered %+v", ann)
	dup := decode[c.Error]("a name taken in another case", 409)(admin.PostAdminUsers(ctx, nil, c.UserRequest{Name: "ANN", Role: c.UserRequestRoleAuthor}))
	check("a name taken in another case", dup.Error.Code == "conflict", "code %q", dup.Error.Code)
	author := client(o.URL, ann.Token)

	// A webhook for verdicts.
	hook := decode[c.WebhookCreated]("subscribe a webhook", 201)(admin.PostAdminWebhooks(ctx, nil,
		c.WebhookRequest{Url: rcv.url, Events: []c.WebhookRequestEvents{c.WebhookRequestEventsItemScreened}}))

	// Publish: no model is configured, so the screen waits (why unreachable).
	song := decode[c.SongCreated]("publish", 201)(author.PostListenersSongs(ctx, nil, c.SongRequest{Title: "Tide", Code: `s("bd sd")`}))
	check("publish", song.Screen.State == c.ScreenStatePending, "screen %+v", song.Screen)

	// Mine, and its 304.
	res, err := author.GetListenersMine(ctx, nil)
	etag := res.Header.Get("ETag")
	mine := decode[c.Mine]("mine", 200)(res, err)
	check("mine", len(mine.Items) == 1 && etag != "", "items %d, ETag %q", len(mine.Items), etag)
	status("mine's 304", 304)(author.GetListenersMine(ctx, &c.GetListenersMineParams{IfNoneMatch: &etag}))

	// A long poll that runs out: 304 after its wait.
	began := time.Now()
	status("a long poll that runs out", 304)(author.GetListenersMine(ctx, &c.GetListenersMineParams{IfNoneMatch: &etag, Wait: ptr(1)}))
	check("a long poll that runs out", time.Since(began) >= 900*time.Millisecond, "answered after %s, want the wait", time.Since(began))

	// The stream: the generated call answers at the headers; the caller reads the events.
	streamCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	res, err = author.GetListenersMineStream(streamCtx, nil)
	check("stream", err == nil && res.StatusCode == 200, "%v", err)
	check("stream", strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream"), "Content-Type %q", res.Header.Get("Content-Type"))
	event, id, data := firstEvent("stream", res.Body)
	stop()
	check("stream", event == "mine" && id == etag, "event %q id %q, want mine %s", event, id, etag)
	streamed := decode[c.Mine]("stream's event", 200)(&http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(data))}, nil)
	check("stream's event", len(streamed.Items) == 1, "items %d", len(streamed.Items))

	// Operators: the jobs, one job, hold, retry, lift.
	jobs := decode[c.JobList]("admin jobs", 200)(admin.GetAdminJobs(ctx, &c.GetAdminJobsParams{Author: ptr("ann")}))
	check("admin jobs", len(jobs.Jobs) == 1 && jobs.Total == 1, "jobs %+v", jobs)
	decode[c.JobDetail]("admin job", 200)(admin.GetAdminJobsId(ctx, jobs.Jobs[0].Id))
	held := decode[c.Holds]("hold", 200)(admin.PutAdminHolds(ctx, nil, c.HoldsRequest{Screen: ptr(true)}))
	check("hold", held.Screen, "holds %+v", held)
	decode[c.Retried]("retry", 200)(admin.PostAdminJobsRetry(ctx, nil, c.JobFilterRequest{Author: ptr("ann")}))
	bad := decode[c.Error]("retry with a null body", 400)(admin.PostAdminJobsRetryWithBody(ctx, nil, "application/json", strings.NewReader("null")))
	check("retry with a null body", bad.Error.Code == "invalid", "code %q", bad.Error.Code)
	decode[c.Holds]("lift", 200)(admin.PutAdminHolds(ctx, nil, c.HoldsRequest{Screen: ptr(false)}))

	// A verdict by hand; the long poll with the old tag answers the change at once.
	decide := func(step string, kind c.PostAdminItemsKindIdVerdictParamsKind, id int) {
		decode[c.Screen](step, 200)(admin.PostAdminItemsKindIdVerdict(ctx, kind, id, nil, c.VerdictRequest{Verdict: c.VerdictRequestVerdictAllow}))
	}
	decide("verdict", c.PostAdminItemsKindIdVerdictParamsKindRevision, song.Revision.Id)
	res, err = author.GetListenersMine(ctx, &c.GetListenersMineParams{IfNoneMatch: &etag, Wait: ptr(10)})
	changed := decode[c.Mine]("a long poll after the verdict", 200)(res, err)
	check("a long poll after the verdict", len(changed.Items) == 1 && changed.Items[0].State == c.MineItemStatePublic,
		"items %+v", changed.Items)

	// Webhooks: the verdict's delivery verifies; after a rotation a delivery verifies with both.
	h, body := rcv.await("the verdict's delivery", 0)
	check("the verdict's delivery", verifies(hook.Secret, h, body), "does not verify with the secret")
	rotated := decode[c.WebhookSecret]("rotate the webhook's secret", 200)(admin.PostAdminWebhooksIdSecret(ctx, hook.Webhook.Id, nil))
	pitch := decode[c.PitchCreated]("pitch", 201)(author.PostListenersPitches(ctx, nil, c.BodyRequest{Body: "hear me out"}))
	decide("the pitch's verdict", c.PostAdminItemsKindIdVerdictParamsKindPitch, pitch.Pitch.Id)
	h, body = rcv.await("the delivery after the rotation", 1)
	check("the delivery after the rotation", verifies(hook.Secret, h, body) && verifies(rotated.Secret, h, body),
		"signatures %q: want the old and the new secret to verify", h.Get("webhook-signature"))
	deliveries := decode[c.DeliveryList]("deliveries", 200)(admin.GetAdminWebhooksIdDeliveries(ctx, hook.Webhook.Id, nil))
	check("deliveries", len(deliveries.Deliveries) == 2, "deliveries %d", len(deliveries.Deliveries))
	decode[c.DeliveryAnswer]("one delivery", 200)(admin.GetAdminDeliveriesId(ctx, deliveries.Deliveries[0].Id))

	// A leaked token: rotate it; the old one stops working at once.
	fresh := decode[c.UserCreated]("rotate ann's token", 200)(admin.PostAdminUsersIdToken(ctx, ann.Id, nil))
	gone := decode[c.Error]("the old token", 401)(author.GetListenersMine(ctx, nil))
	check("the old token", gone.Error.Code == "unauthorized", "code %q", gone.Error.Code)
	decode[c.Mine]("the new token", 200)(client(o.URL, fresh.Token).GetListenersMine(ctx, nil))
}
