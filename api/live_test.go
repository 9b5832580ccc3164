package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// hang bounds how long a test waits for something that must happen; it only keeps a broken
// build from hanging, and never decides a pass.
const hang = 10 * time.Second

// answer is a response read whole, or the error of getting it.
type answer struct {
	owedtest.Response
	err error
}

// get sends a GET as role from any goroutine (owedtest's Do may only run on the test's).
func (w *world) get(ctx context.Context, path string, as role, headers ...string) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.env.Server.URL+path, nil)
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+w.tok[as])
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := w.env.Server.Client().Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return answer{Response: owedtest.Response{Status: res.StatusCode, Header: res.Header, Body: b}, err: err}
}

// poll starts a long poll and returns where its answer will come.
func (w *world) poll(path string, as role, etag string) <-chan answer {
	out := make(chan answer, 1)
	go func() { out <- w.get(context.Background(), path, as, "If-None-Match", etag) }()
	return out
}

// parked waits until n requests wait on the fake clock's timers: a long poll or a stream that
// holds a timer is parked in its wait, woken only by the notifier or the clock.
func (w *world) parked(n int) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	if err := w.env.Clock.WaitTimers(ctx, n); err != nil {
		w.t.Fatalf("%d requests did not park: %v", n, err)
	}
}

func notYet(t *testing.T, c <-chan answer, what string) {
	t.Helper()
	select {
	case a := <-c:
		t.Fatalf("%s: the long poll answered already: %d %s %v", what, a.Status, a.Body, a.err)
	default:
	}
}

func await(t *testing.T, c <-chan answer, what string) answer {
	t.Helper()
	select {
	case a := <-c:
		if a.err != nil {
			t.Fatalf("%s: %v", what, a.err)
		}
		return a
	case <-time.After(hang):
		t.Fatalf("%s: no answer", what)
	}
	return answer{}
}

// TestMineLongPoll: with wait=N and a matching If-None-Match, mine is held: a change of the
// author's view answers 200 with the new view and tag (never before the change); the end of the
// wait answers 304 (never before it); another author's change ends nothing. Without a matching
// tag it answers at once; server shutdown answers held polls with 304.
func TestMineLongPoll(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		m := w.watchMine(asAuthor)
		const path = "/api/listeners/mine?wait=5"

		// The end of the wait: 304 at 5 s, not at 4.
		held := w.poll(path, asAuthor, m.etag)
		w.parked(1)
		notYet(t, held, "parked")
		w.env.Clock.Advance(4 * time.Second)
		notYet(t, held, "4 s into a 5 s wait")
		w.pitch(asOther, models.VerdictAllow) // another author's change
		w.env.Clock.Advance(time.Second)
		a := await(t, held, "the end of the wait")
		if a.Status != http.StatusNotModified || a.Header.Get("ETag") != m.etag || len(a.Body) != 0 {
			t.Fatalf("at the end of the wait: %d %s, ETag %q; want 304 with %q", a.Status, a.Body, a.Header.Get("ETag"), m.etag)
		}

		// A change: 200 with the new view and tag, as a plain GET answers it.
		held = w.poll("/api/listeners/mine?wait=60", asAuthor, m.etag)
		w.parked(1)
		w.env.Clock.Advance(59 * time.Second)
		notYet(t, held, "59 s into a 60 s wait, nothing changed")
		w.pitch(asAuthor, "")
		a = await(t, held, "a change")
		fresh := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil)
		if a.Status != http.StatusOK || a.Header.Get("ETag") == m.etag || a.Header.Get("ETag") != fresh.Header.Get("ETag") ||
			string(a.Body) != string(fresh.Body) {
			t.Fatalf("after a change: %d %s, ETag %q; want 200 %s, ETag %q", a.Status, a.Body, a.Header.Get("ETag"),
				fresh.Body, fresh.Header.Get("ETag"))
		}
		m.etag = a.Header.Get("ETag")
		m.watch = m.watch.Renew()

		// A verdict on a held view: woken by the verdict's commit.
		pending := w.pitch(asAuthor, "")
		m.changed("a pending pitch")
		held = w.poll(path, asAuthor, m.etag)
		w.parked(1)
		notYet(t, held, "parked on a pending pitch")
		w.screen(models.KindPitch, pending, asAuthor, models.VerdictBlock)
		if a = await(t, held, "a verdict"); a.Status != http.StatusOK || !strings.Contains(string(a.Body), `"state":"blocked"`) {
			t.Fatalf("after a verdict: %d %s", a.Status, a.Body)
		}
		m.etag = a.Header.Get("ETag")

		// Without a matching tag, at once: no tag, another tag.
		for _, inm := range []string{"", `"other"`} {
			a := w.get(context.Background(), path, asAuthor, "If-None-Match", inm)
			if a.err != nil || a.Status != http.StatusOK || a.Header.Get("ETag") != m.etag {
				t.Fatalf("wait with If-None-Match %q: %d %v, ETag %q", inm, a.Status, a.err, a.Header.Get("ETag"))
			}
		}
		if n := w.env.Clock.Timers(); n != 0 {
			t.Fatalf("%d timers left after every poll answered", n)
		}

		// Shutdown: a held poll answers 304 at once.
		held = w.poll(path, asAuthor, m.etag)
		w.parked(1)
		w.env.App.API.CloseStreams()
		if a = await(t, held, "shutdown"); a.Status != http.StatusNotModified {
			t.Fatalf("a held poll at shutdown: %d %s", a.Status, a.Body)
		}
	})
}

// TestMineWaitBadValues: wait outside 1-60 s, or not a whole number, is a 400 naming wait.
func TestMineWaitBadValues(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	for _, v := range []string{"0", "61", "-1", "1.5", "abc", "1e1", "9999999999999999999"} {
		r := w.do(http.MethodGet, "/api/listeners/mine?wait="+v, asAuthor, nil, "If-None-Match", "*")
		checkError(t, r, http.StatusBadRequest, "invalid", "wait")
	}
	checkError(t, w.do(http.MethodGet, "/api/listeners/mine?wait=1&wait=2", asAuthor, nil), http.StatusBadRequest, "invalid", "wait")
	for _, as := range []role{asAnon, asBot} {
		if r := w.do(http.MethodGet, "/api/listeners/mine?wait=1", as, nil); r.Status != http.StatusUnauthorized && r.Status != http.StatusForbidden {
			t.Errorf("%s: %d", as, r.Status)
		}
	}
}

// sse is one thing a stream sent: an event, or a comment line.
type sse = owedtest.SSE

// stream opens the author's stream and returns what it sends, in order, and a func that hangs
// up.
func (w *world) stream(as role, query string, headers ...string) (<-chan sse, *http.Response, func()) {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.env.Server.URL+"/api/listeners/mine/stream"+query, nil)
	req.Header.Set("Authorization", "Bearer "+w.tok[as])
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := w.env.Server.Client().Do(req)
	if err != nil {
		cancel()
		w.t.Fatal(err)
	}
	out := owedtest.ReadSSE(res.Body)
	w.t.Cleanup(cancel)
	return out, res, cancel
}

// next is the stream's next event, comments skipped unless wanted.
func next(t *testing.T, c <-chan sse, comments bool) sse {
	t.Helper()
	for {
		select {
		case ev, ok := <-c:
			if !ok {
				t.Fatal("the stream ended")
			}
			if ev.Comment != "" && !comments {
				continue
			}
			return ev
		case <-time.After(hang):
			t.Fatal("nothing on the stream")
		}
	}
}

// isView checks that ev is the event of the author's current view: event mine, id its ETag,
// data its body as a plain GET answers it.
func (w *world) isView(t *testing.T, ev sse, as role, query, what string) string {
	t.Helper()
	fresh := w.do(http.MethodGet, "/api/listeners/mine"+query, as, nil)
	if ev.Event != "mine" || ev.ID != fresh.Header.Get("ETag") || ev.Data != string(fresh.Body) {
		t.Fatalf("%s: event %q id %q data %s; want mine, %q, %s", what, ev.Event, ev.ID, ev.Data, fresh.Header.Get("ETag"), fresh.Body)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(ev.Data), &v); err != nil {
		t.Fatalf("%s: data is not JSON: %v", what, err)
	}
	return ev.ID
}

// TestMineStream: the stream sends the view at once, then one event per change (each the view
// a plain GET answers then), a ping every 15 s of the clock, skips the first event when
// Last-Event-ID is the current tag, and ends on hang-up and at shutdown.
func TestMineStream(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		w.pitch(asAuthor, models.VerdictAllow)
		events, res, hangUp := w.stream(asAuthor, "")
		if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("Content-Type %q", ct)
		}
		if res.StatusCode != http.StatusOK {
			t.Fatalf("status %d", res.StatusCode)
		}
		tag := w.isView(t, next(t, events, false), asAuthor, "", "the first event")

		// One event per change, in order.
		pitch := w.pitch(asAuthor, "")
		tag2 := w.isView(t, next(t, events, false), asAuthor, "", "a new pitch")
		w.screen(models.KindPitch, pitch, asAuthor, models.VerdictBlock)
		tag3 := w.isView(t, next(t, events, false), asAuthor, "", "its verdict")
		if tag == tag2 || tag2 == tag3 {
			t.Fatalf("tags %q %q %q: each event a new one", tag, tag2, tag3)
		}
		w.pitch(asOther, models.VerdictAllow) // not this author's: no event
		if _, ok, err := w.store().Charge(context.Background(), w.uid[asAuthor], 1, w.env.Clock.Now()); err != nil || !ok {
			t.Fatalf("charge: %v %v", ok, err)
		}
		ev := next(t, events, false)
		w.isView(t, ev, asAuthor, "", "a charge (after another author's pitch)")
		if !strings.Contains(ev.Data, `"spent":1`) {
			t.Fatalf("the event after a charge: %s", ev.Data)
		}

		// A ping after 15 s of quiet, and nothing else.
		w.parked(1)
		w.env.Clock.Advance(15 * time.Second)
		if ev := next(t, events, true); ev.Comment != "ping" || ev.Event != "" {
			t.Fatalf("after 15 s: %+v, want a ping", ev)
		}

		// Last-Event-ID of the current tag: no first event, the next change's at once.
		current := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).Header.Get("ETag")
		resumed, _, hangUp2 := w.stream(asAuthor, "", "Last-Event-ID", current)
		if ev := next(t, resumed, true); ev.Comment != "owed" {
			t.Fatalf("a resumed stream began with %+v", ev)
		}
		w.parked(2) // both streams wait: the resumed one has read the version and sent nothing
		w.pitch(asAuthor, "")
		after := w.isView(t, next(t, resumed, false), asAuthor, "", "the change after resuming")
		if after == current {
			t.Fatal("the resumed stream sent the event it was told the client holds")
		}
		if w.isView(t, next(t, events, false), asAuthor, "", "the same change on the first stream") != after {
			t.Fatal("the two streams disagree")
		}
		// An older Last-Event-ID: the current view at once.
		old, _, hangUp3 := w.stream(asAuthor, "", "Last-Event-ID", tag)
		w.isView(t, next(t, old, false), asAuthor, "", "a stream resumed from an old tag")

		// Filters apply to the stream as to the view.
		filtered, _, hangUp4 := w.stream(asAuthor, "?state=blocked")
		ev = next(t, filtered, false)
		w.isView(t, ev, asAuthor, "?state=blocked", "a filtered stream")
		if strings.Count(ev.Data, `"kind":`) != 1 {
			t.Fatalf("state=blocked shows %s", ev.Data)
		}

		// Hanging up ends the stream's wait: nobody waits on the author any more.
		for _, h := range []func(){hangUp, hangUp2, hangUp3, hangUp4} {
			h()
		}
		wait.Until(t, "the streams to end after the client hung up", func() bool { return w.env.App.Notify.Waiting() == 0 })

		// Shutdown ends a stream.
		last, _, _ := w.stream(asAuthor, "")
		next(t, last, false)
		w.env.App.API.CloseStreams()
		for ev := range last {
			if ev.Event != "" {
				t.Fatalf("an event after shutdown: %+v", ev)
			}
		}
	})
}

// TestMineStreamSendsChangesThatComeTogetherAsOneEvent: a stream woken by a change lets the
// author's changes settle (API.StreamSettle) and sends one event for all that came meanwhile: a
// pitch and its verdict, written back to back, come as one event of the view with the verdict,
// never one of the pitch still pending; a later change still comes as an event of its own.
func TestMineStreamSendsChangesThatComeTogetherAsOneEvent(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		w.env.App.API.StreamSettle = 2 * time.Second // longer than two writes take, on any machine
		events, _, _ := w.stream(asAuthor, "")
		first := w.isView(t, next(t, events, false), asAuthor, "", "the first event")
		w.pitch(asAuthor, models.VerdictAllow) // two changes: the pitch, then its verdict
		both := w.isView(t, next(t, events, false), asAuthor, "", "the pitch and its verdict, as one event")
		w.pitch(asAuthor, models.VerdictBlock)
		if last := w.isView(t, next(t, events, false), asAuthor, "", "the next pitch and its verdict"); first == both || both == last {
			t.Fatalf("tags %q %q %q: each event a new view", first, both, last)
		}
	})
}

// TestMineStreamRunsDueJobs: a stream, like a poll, runs the author's due jobs, also when they
// come due while it is open.
func TestMineStreamRunsDueJobs(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		w.env.Model.Fail(http.StatusServiceUnavailable, nil)
		pitch := num(obj(w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": "later"})["pitch"])["id"])
		w.env.Model.Reset()
		job := w.job(models.TaskScreen, models.KindPitch, pitch)
		events, _, _ := w.stream(asAuthor, "")
		if ev := next(t, events, false); !strings.Contains(ev.Data, `"state":"pending"`) {
			t.Fatalf("first event: %s", ev.Data)
		}
		// The job comes due while the stream waits: the stream's sweep screens it.
		w.parked(1)
		w.env.Clock.Set(job.DueAt)
		for {
			ev := next(t, events, false)
			if strings.Contains(ev.Data, fmt.Sprintf(`"id":%d`, pitch)) && strings.Contains(ev.Data, `"state":"public"`) {
				break
			}
		}
	})
}

// TestStreamsOutliveTheServerTimeouts: the server's read and write timeouts cut slow clients
// off (TestSlowClientsAreCutOff), but not a stream or a long poll that waits longer than them.
func TestStreamsOutliveTheServerTimeouts(t *testing.T) {
	t.Parallel()
	timeouts := app.ServerTimeouts{ReadHeader: 200 * time.Millisecond, Read: 300 * time.Millisecond, Write: 300 * time.Millisecond, Idle: 300 * time.Millisecond}
	s := serveOwed(t, timeouts)
	base := "http://" + s.addr
	get := func(ctx context.Context, path string, headers ...string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+s.tok[models.RoleAuthor])
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		return http.DefaultClient.Do(req)
	}
	first, err := get(context.Background(), "/api/listeners/mine")
	if err != nil {
		t.Fatal(err)
	}
	first.Body.Close()
	tag := first.Header.Get("ETag")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := get(ctx, "/api/listeners/mine/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	polled := make(chan *http.Response, 1)
	go func() {
		r, err := get(context.Background(), "/api/listeners/mine?wait=60", "If-None-Match", tag)
		if err != nil {
			close(polled)
			return
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		polled <- r
	}()
	wait.Until(t, "the stream and the poll to wait", func() bool { return s.app.Notify.Watchers() == 2 })
	time.Sleep(3 * (timeouts.Read + timeouts.Write)) // past every server timeout: the point of the test

	pitch, err := s.app.Store.CreatePitch(context.Background(), mustUser(t, s), "after the timeouts")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`"id":%d`, pitch.ID)
	for seen := false; !seen; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended before the change")
			}
			seen = strings.HasPrefix(line, "data: ") && strings.Contains(line, want)
		case <-time.After(hang):
			t.Fatal("no event for the change")
		}
	}
	select {
	case r := <-polled:
		if r == nil || r.StatusCode != http.StatusOK {
			t.Fatalf("the long poll after the timeouts: %+v", r)
		}
	case <-time.After(hang):
		t.Fatal("the long poll did not answer the change")
	}
}

func mustUser(t *testing.T, s *served) int64 {
	t.Helper()
	u, err := s.app.Store.UserByToken(context.Background(), s.tok[models.RoleAuthor])
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}
