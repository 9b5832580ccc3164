package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// rawStream opens the stream with exactly the headers given (no Authorization unless given)
// and returns its answer and events; the test's end hangs it up.
func (w *world) rawStream(query string, headers ...string) (*http.Response, <-chan sse, func()) {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.env.Server.URL+"/api/listeners/mine/stream"+query, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := w.env.Server.Client().Do(req)
	if err != nil {
		cancel()
		w.t.Fatal(err)
	}
	w.t.Cleanup(cancel)
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		res.Body = io.NopCloser(strings.NewReader(string(b)))
		return res, nil, cancel
	}
	return res, owedtest.ReadSSE(res.Body), cancel
}

// errorOf is the error shape's code in an event's data or a body.
func errorOf(t *testing.T, data string) string {
	t.Helper()
	var e struct {
		Error struct {
			Code    string  `json:"code"`
			Message string  `json:"message"`
			Field   *string `json:"field"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(data), &e); err != nil {
		t.Fatalf("not the error shape: %q: %v", data, err)
	}
	return e.Error.Code
}

// ends checks that the stream's next event is `event: error` with code, and that the stream
// then ends.
func ends(t *testing.T, events <-chan sse, code, what string) {
	t.Helper()
	ev := next(t, events, false)
	for ev.Event == "mine" { // a change the stream saw on its way to the error
		ev = next(t, events, false)
	}
	if ev.Event != "error" || errorOf(t, ev.Data) != code {
		t.Fatalf("%s: event %q data %s; want event error with code %s", what, ev.Event, ev.Data, code)
	}
	select {
	case ev, ok := <-events:
		for ok && ev.Comment != "" {
			ev, ok = <-events
		}
		if ok {
			t.Fatalf("%s: the stream went on after its error: %+v", what, ev)
		}
	case <-time.After(hang):
		t.Fatalf("%s: the stream did not end after its error", what)
	}
}

func checkRetryAfter(t *testing.T, r answer, status int, code, what string) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("%s: %v", what, r.err)
	}
	if r.Status != status || r.ErrorCode() != code || r.Header.Get("Retry-After") == "" {
		t.Fatalf("%s: %d %s, Retry-After %q; want %d %s with Retry-After", what, r.Status, r.Body, r.Header.Get("Retry-After"), status, code)
	}
}

// TestLiveCaps: one user's streams and held long polls together stop at OWED_STREAMS_PER_USER
// (429, Retry-After), the process's at OWED_MAX_STREAMS (503, Retry-After), and the slots come
// back when the connections end; owed_streams_open counts them by kind.
func TestLiveCaps(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, func(c *app.Config) { c.StreamsPerUser, c.MaxStreams = 2, 3 }).quiet()
		api := w.env.App.API
		m := w.watchMine(asAuthor)

		_, ev1, hang1 := w.rawStream("", "Authorization", "Bearer "+w.tok[asAuthor])
		next(t, ev1, false)
		held := w.poll("/api/listeners/mine?wait=60", asAuthor, m.etag)
		wait.Until(t, "a stream and a long poll held", func() bool { return api.StreamsOpen() == 2 })

		// The author's third: a stream or a long poll, refused.
		res, _, _ := w.rawStream("", "Authorization", "Bearer "+w.tok[asAuthor])
		b, _ := io.ReadAll(res.Body)
		checkRetryAfter(t, answer{Response: owedtest.Response{Status: res.StatusCode, Header: res.Header, Body: b}}, http.StatusTooManyRequests, "rate_limited", "a third stream")
		r := w.get(context.Background(), "/api/listeners/mine?wait=60", asAuthor, "If-None-Match", m.etag)
		checkRetryAfter(t, r, http.StatusTooManyRequests, "rate_limited", "a third, a long poll")
		// A plain GET is not held, and not capped.
		if r := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil); r.Status != http.StatusOK {
			t.Fatalf("a plain GET past the cap: %d", r.Status)
		}
		// Nor is a ticket issued for a stream the cap would refuse.
		before := w.snapshot()
		checkRetryAfter(t, answer{Response: w.do(http.MethodPost, "/api/listeners/mine/ticket", asAuthor, nil)}, http.StatusTooManyRequests, "rate_limited", "a ticket at the cap")
		w.unchanged(t, before, "a ticket refused at the cap")

		// The process's cap: another author's first is the third in all; their second is refused.
		_, ev3, _ := w.rawStream("", "Authorization", "Bearer "+w.tok[asOther])
		next(t, ev3, false)
		r = w.get(context.Background(), "/api/listeners/mine/stream", asOther)
		checkRetryAfter(t, r, http.StatusServiceUnavailable, "unavailable", "past the process's cap")

		metrics := string(w.do(http.MethodGet, "/metrics", asAnon, nil).Body)
		for _, want := range []string{`owed_streams_open{kind="stream"} 2`, `owed_streams_open{kind="long_poll"} 1`} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}

		// Slots come back: the stream hangs up, the long poll answers.
		hang1()
		wait.Until(t, "the hung-up stream's slot freed", func() bool { return api.StreamsOpen() == 2 })
		w.pitch(asAuthor, "")
		if a := await(t, held, "the long poll"); a.Status != http.StatusOK {
			t.Fatalf("the long poll: %d", a.Status)
		}
		wait.Until(t, "the long poll's slot freed", func() bool { return api.StreamsOpen() == 1 })
		if r := w.do(http.MethodPost, "/api/listeners/mine/ticket", asAuthor, nil); r.Status != http.StatusOK {
			t.Errorf("a ticket below the cap: %d %s", r.Status, r.Body)
		}
		_, ev4, _ := w.rawStream("", "Authorization", "Bearer "+w.tok[asAuthor])
		next(t, ev4, false)
		_, ev5, _ := w.rawStream("", "Authorization", "Bearer "+w.tok[asAuthor])
		next(t, ev5, false)
	})
}

// TestLiveRevocation: disabling the user, rotating their token and signing their session out
// each end their open streams (event error, unauthorized) and answer their held long polls
// 401, at once; so does the session's expiry. Another author's stream goes on.
func TestLiveRevocation(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		uid := w.uid[asAuthor]
		path := fmt.Sprintf("/api/admin/users/%d", uid)
		_, others, _ := w.rawStream("", "Authorization", "Bearer "+w.tok[asOther])
		next(t, others, false)

		type opened struct {
			events <-chan sse
			poll   <-chan answer
		}
		open := func(headers ...string) opened {
			t.Helper()
			_, events, _ := w.rawStream("", headers...)
			next(t, events, false)
			r := w.env.Do(http.MethodGet, "/api/listeners/mine", "", nil, headers...)
			out := make(chan answer, 1)
			go func() {
				ctx := context.Background()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.env.Server.URL+"/api/listeners/mine?wait=60", nil)
				for i := 0; i+1 < len(headers); i += 2 {
					req.Header.Set(headers[i], headers[i+1])
				}
				req.Header.Set("If-None-Match", r.Header.Get("ETag"))
				res, err := w.env.Server.Client().Do(req)
				if err != nil {
					out <- answer{err: err}
					return
				}
				defer res.Body.Close()
				b, err := io.ReadAll(res.Body)
				out <- answer{Response: owedtest.Response{Status: res.StatusCode, Header: res.Header, Body: b}, err: err}
			}()
			wait.Until(t, "the long poll held", func() bool { return w.env.App.API.StreamsOpen() >= 3 })
			return opened{events, out}
		}
		revoked := func(o opened, what string) {
			t.Helper()
			ends(t, o.events, "unauthorized", what)
			a := await(t, o.poll, what)
			if a.Status != http.StatusUnauthorized || a.ErrorCode() != "unauthorized" {
				t.Fatalf("%s: the long poll answered %d %s; want 401 unauthorized", what, a.Status, a.Body)
			}
			wait.Until(t, what+": slots freed", func() bool { return w.env.App.API.StreamsOpen() == 1 })
		}

		// Token rotation.
		o := open("Authorization", "Bearer "+w.tok[asAuthor])
		r := w.do(http.MethodPost, path+"/token", asAdmin, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("rotate: %d %s", r.Status, r.Body)
		}
		revoked(o, "token rotated")
		w.tok[asAuthor] = r.JSON()["token"].(string)

		// Sign-out of a session (the token stays good).
		ck := w.signIn(t, w.tok[asAuthor])
		cookie := "owed_session=" + ck.Value
		o = open("Cookie", cookie)
		if r := w.env.Do(http.MethodDelete, "/api/session", "", nil, "Cookie", cookie, "X-Owed-Request", "1"); r.Status != http.StatusNoContent {
			t.Fatalf("sign out: %d %s", r.Status, r.Body)
		}
		revoked(o, "signed out")

		// A session's expiry: the stream ends when its session does.
		ck = w.signIn(t, w.tok[asAuthor])
		cookie = "owed_session=" + ck.Value
		_, events, _ := w.rawStream("", "Cookie", cookie)
		next(t, events, false)
		w.env.Clock.Advance(13 * time.Hour)
		ends(t, events, "unauthorized", "session expired")

		// Disable: token streams end too.
		o = open("Authorization", "Bearer "+w.tok[asAuthor])
		if r := w.do(http.MethodPatch, path, asAdmin, map[string]any{"disabled": true}); r.Status != http.StatusOK {
			t.Fatalf("disable: %d %s", r.Status, r.Body)
		}
		revoked(o, "disabled")

		// The other author's stream is still open and still hears their changes.
		w.pitch(asOther, "")
		if ev := next(t, others, false); ev.Event != "mine" {
			t.Fatalf("the other author's stream: %+v", ev)
		}
	})
}

// TestLiveRevocationReplicas: on PostgreSQL, a sign-out, a token rotation and a disable made
// through one replica end the streams (and long polls) held by another (the triggers of
// migration 0014 and the notifier carry them).
func TestLiveRevocationReplicas(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		if !strings.HasPrefix(db, "postgres") {
			t.Skip("one process holds SQLite")
		}
		w := newWorld(t, db).quiet()
		w2 := &world{t: t, env: owedtest.NewEnv(t, db), tok: w.tok, uid: w.uid}

		// Sign-out through replica 1 ends the session's stream on replica 2.
		ck := w.signIn(t, w.tok[asAuthor])
		cookie := "owed_session=" + ck.Value
		_, events, _ := w2.rawStream("", "Cookie", cookie)
		next(t, events, false)
		w.env.Do(http.MethodDelete, "/api/session", "", nil, "Cookie", cookie, "X-Owed-Request", "1")
		ends(t, events, "unauthorized", "signed out on the other replica")

		// A rotation through replica 1 ends the token's stream on replica 2.
		_, events, _ = w2.rawStream("", "Authorization", "Bearer "+w.tok[asAuthor])
		next(t, events, false)
		r := w.do(http.MethodPost, fmt.Sprintf("/api/admin/users/%d/token", w.uid[asAuthor]), asAdmin, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("rotate: %d %s", r.Status, r.Body)
		}
		ends(t, events, "unauthorized", "token rotated on the other replica")
		w.tok[asAuthor] = r.JSON()["token"].(string)
		wait.Until(t, "replica 2's slots freed", func() bool { return w2.env.App.API.StreamsOpen() == 0 })

		// A disable through replica 1 ends replica 2's stream and held long poll.
		_, events, _ = w2.rawStream("", "Authorization", "Bearer "+w.tok[asAuthor])
		next(t, events, false)
		m := w2.watchMine(asAuthor)
		held := w2.poll("/api/listeners/mine?wait=60", asAuthor, m.etag)
		wait.Until(t, "held on replica 2", func() bool { return w2.env.App.API.StreamsOpen() == 2 })
		if r := w.do(http.MethodPatch, fmt.Sprintf("/api/admin/users/%d", w.uid[asAuthor]), asAdmin, map[string]any{"disabled": true}); r.Status != http.StatusOK {
			t.Fatalf("disable on replica 1: %d %s", r.Status, r.Body)
		}
		ends(t, events, "unauthorized", "disabled on the other replica")
		if a := await(t, held, "the long poll on replica 2"); a.Status != http.StatusUnauthorized {
			t.Fatalf("the long poll on replica 2: %d %s", a.Status, a.Body)
		}
	})
}

// TestLiveFaults: while the database fails every re-read, a woken stream retries for a few
// seconds (of the clock), then ends with event error, code unavailable, and a retry: hint; a
// held long poll answers 503 with Retry-After. Once the database is back, a new stream works.
func TestLiveFaults(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		uid := w.uid[asAuthor]
		res, events, _ := w.rawStream("", "Authorization", "Bearer "+w.tok[asAuthor])
		_ = res
		next(t, events, false)
		m := w.watchMine(asAuthor)
		held := w.poll("/api/listeners/mine?wait=60", asAuthor, m.etag)
		wait.Until(t, "held", func() bool { return w.env.App.API.StreamsOpen() == 2 })

		ctx := context.Background()
		if _, err := w.store().RawExec(ctx, `ALTER TABLE users RENAME TO users_away`); err != nil {
			t.Fatal(err)
		}
		w.env.App.Notify.Changed(uid) // a change the waiters cannot read
		// The retries wait on the clock: while one waits on it, move it a second at a time,
		// until the long poll has answered and no stream is open (the stream starts its re-reads
		// after its wall-clock settle, so it may be a step behind the poll).
		var a answer
		done := false
		wait.Until(t, "the long poll and the stream to give up", func() bool {
			if !done {
				select {
				case a = <-held:
					done = true
				default:
				}
			}
			if done && w.env.App.API.StreamsOpen() == 0 {
				return true
			}
			if w.env.Clock.Timers() > 0 {
				w.env.Clock.Advance(time.Second)
			}
			return false
		})
		checkRetryAfter(t, a, http.StatusServiceUnavailable, "unavailable", "a long poll whose re-read keeps failing")
		ends(t, events, "unavailable", "a stream whose re-read keeps failing")

		if _, err := w.store().RawExec(ctx, `ALTER TABLE users_away RENAME TO users`); err != nil {
			t.Fatal(err)
		}
		_, events, _ = w.rawStream("", "Authorization", "Bearer "+w.tok[asAuthor])
		w.isView(t, next(t, events, false), asAuthor, "", "the reconnect")
	})
}

// TestLiveErrorEventRetry: the unavailable error event carries a retry: hint for EventSource.
func TestLiveErrorEventRetry(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		req, _ := http.NewRequest(http.MethodGet, w.env.Server.URL+"/api/listeners/mine/stream", nil)
		req.Header.Set("Authorization", "Bearer "+w.tok[asAuthor])
		res, err := w.env.Server.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		rd := bufio.NewReader(res.Body)
		for { // the first event
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(line, "data: ") {
				break
			}
		}
		if _, err := w.store().RawExec(context.Background(), `ALTER TABLE users RENAME TO users_away`); err != nil {
			t.Fatal(err)
		}
		defer w.store().RawExec(context.Background(), `ALTER TABLE users_away RENAME TO users`)
		w.env.App.Notify.Changed(w.uid[asAuthor])
		got := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(rd)
			got <- string(b)
		}()
		var rest string
		for i := 0; i < 30 && rest == ""; i++ {
			w.env.Clock.Advance(time.Second)
			select {
			case rest = <-got:
			case <-time.After(50 * time.Millisecond):
			}
		}
		if !strings.Contains(rest, "event: error\nretry: 5000\ndata: {\"error\":{\"code\":\"unavailable\"") {
			t.Fatalf("the stream's end: %q; want an error event with retry: and code unavailable", rest)
		}
	})
}

// TestLiveBody: a GET with a body on the live routes is refused at once with 400 and the
// connection closed, however slowly the body trickles: no held request waits on its client.
func TestLiveBody(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		m := w.watchMine(asAuthor)
		host := strings.TrimPrefix(w.env.Server.URL, "http://")
		for _, path := range []string{"/api/listeners/mine?wait=60", "/api/listeners/mine/stream"} {
			conn, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nIf-None-Match: %s\r\nContent-Length: 1000\r\n\r\nx",
				path, host, w.tok[asAuthor], m.etag)
			_ = conn.SetReadDeadline(time.Now().Add(hang))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("%s with a trickled body: %v", path, err)
			}
			b, _ := io.ReadAll(res.Body) // ends: the connection is closed after the answer
			conn.Close()
			r := owedtest.Response{Status: res.StatusCode, Header: res.Header, Body: b}
			if r.Status != http.StatusBadRequest || r.ErrorCode() != "invalid" {
				t.Fatalf("%s with a body: %d %s; want 400 invalid", path, r.Status, b)
			}
		}
		if n := w.env.App.API.StreamsOpen(); n != 0 {
			t.Fatalf("%d held after refusals", n)
		}
	})
}

// TestLiveOneRead: N streams of one author each get every change, all with the same tag (their
// re-reads are shared: TestCoalescerSharesOneRead counts them).
func TestLiveOneRead(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		const n, changes = 24, 4
		w := newWorld(t, db, func(c *app.Config) { c.StreamsPerUser = n }).quiet()
		var streams []<-chan sse
		for i := 0; i < n; i++ {
			_, ev, _ := w.rawStream("", "Authorization", "Bearer "+w.tok[asAuthor])
			next(t, ev, false)
			streams = append(streams, ev)
		}
		for c := 0; c < changes; c++ {
			w.pitch(asAuthor, "")
			var tag string
			for i, ev := range streams {
				e := next(t, ev, false)
				if e.Event != "mine" || (tag != "" && e.ID != tag) {
					t.Fatalf("change %d, stream %d: %+v", c, i, e)
				}
				tag = e.ID
			}
		}
	})
}

// TestLiveGaugeMetric is in TestLiveCaps; the stream's OpenAPI row names ticket.
var _ = models.CredToken

// TestStreamTicket: an author asks for a ticket (bearer or session) and opens the stream with
// it instead of a bearer; a ticket works once, for 60 s, and not after its credential is
// rotated; only authors get one; on another route a ticket signs nothing in.
func TestStreamTicket(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		ticket := func(headers ...string) string {
			t.Helper()
			r := w.env.Do(http.MethodPost, "/api/listeners/mine/ticket", "", nil, headers...)
			m := r.JSON()
			tk, _ := m["ticket"].(string)
			exp, err := time.Parse(time.RFC3339, fmt.Sprint(m["expiresAt"]))
			if r.Status != http.StatusOK || tk == "" || err != nil || !exp.Equal(w.env.Clock.Now().Add(time.Minute)) {
				t.Fatalf("ticket: %d %s; want 200 with a ticket valid 60 s", r.Status, r.Body)
			}
			return tk
		}
		bearer := "Bearer " + w.tok[asAuthor]

		// Once, instead of a bearer.
		tk := ticket("Authorization", bearer)
		res, events, _ := w.rawStream("?ticket=" + tk)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("stream with a ticket: %d", res.StatusCode)
		}
		w.isView(t, next(t, events, false), asAuthor, "", "the ticket's stream")
		res, _, _ = w.rawStream("?ticket=" + tk)
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("the ticket again: %d; want 401", res.StatusCode)
		}

		// 60 s.
		tk = ticket("Authorization", bearer)
		w.env.Clock.Advance(61 * time.Second)
		if res, _, _ = w.rawStream("?ticket=" + tk); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a ticket 61 s old: %d; want 401", res.StatusCode)
		}

		// From a session; signing out voids it, and ends the stream it opened.
		ck := w.signIn(t, w.tok[asAuthor])
		cookie := "owed_session=" + ck.Value
		tk = ticket("Cookie", cookie, "X-Owed-Request", "1")
		_, events, _ = w.rawStream("?ticket=" + tk)
		next(t, events, false)
		tk2 := ticket("Cookie", cookie, "X-Owed-Request", "1")
		w.env.Do(http.MethodDelete, "/api/session", "", nil, "Cookie", cookie, "X-Owed-Request", "1")
		ends(t, events, "unauthorized", "the session behind a ticket signed out")
		if res, _, _ = w.rawStream("?ticket=" + tk2); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a ticket of a signed-out session: %d; want 401", res.StatusCode)
		}

		// A rotation voids the token's tickets.
		tk = ticket("Authorization", bearer)
		r := w.do(http.MethodPost, fmt.Sprintf("/api/admin/users/%d/token", w.uid[asAuthor]), asAdmin, nil)
		w.tok[asAuthor] = r.JSON()["token"].(string)
		if res, _, _ = w.rawStream("?ticket=" + tk); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a ticket of a rotated token: %d; want 401", res.StatusCode)
		}

		// Only authors; a ticket is not a bearer elsewhere.
		for as, want := range map[role]int{asAnon: 401, asBot: 403, asAdmin: 403} {
			if r := w.do(http.MethodPost, "/api/listeners/mine/ticket", as, nil); r.Status != want {
				t.Errorf("ticket as %s: %d; want %d", as, r.Status, want)
			}
		}
		tk = ticket("Authorization", "Bearer "+w.tok[asAuthor])
		if r := w.env.Do(http.MethodGet, "/api/listeners/mine?ticket="+tk, "", nil); r.Status != http.StatusUnauthorized {
			t.Errorf("mine with a ticket: %d; want 401", r.Status)
		}
		if r := w.env.Do(http.MethodGet, "/api/listeners/mine/stream?ticket=nonsense", "", nil); r.Status != http.StatusUnauthorized || r.ErrorCode() != "unauthorized" {
			t.Errorf("a made-up ticket: %d %s", r.Status, r.Body)
		}
	})
}

// TestCORS: with OWED_CORS_ORIGINS, a listed origin may call the listener and public routes
// from a browser (preflight 204 with the allowed and exposed headers), an unlisted origin gets
// no CORS headers, and the admin routes never do.
func TestCORS(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		const site = "https://site.example"
		w := newWorld(t, db, func(c *app.Config) { c.CORSOrigins = site }).quiet()
		preflight := func(path, origin string) *http.Response {
			t.Helper()
			req, _ := http.NewRequest(http.MethodOptions, w.env.Server.URL+path, nil)
			req.Header.Set("Origin", origin)
			req.Header.Set("Access-Control-Request-Method", "GET")
			req.Header.Set("Access-Control-Request-Headers", "authorization,if-none-match")
			res, err := w.env.Server.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res
		}
		res := preflight("/api/listeners/mine", site)
		allow := strings.ToLower(res.Header.Get("Access-Control-Allow-Headers"))
		if res.StatusCode != http.StatusNoContent || res.Header.Get("Access-Control-Allow-Origin") != site ||
			!strings.Contains(allow, "authorization") || !strings.Contains(allow, "if-none-match") || !strings.Contains(allow, "last-event-id") ||
			!strings.Contains(allow, "idempotency-key") || res.Header.Get("Access-Control-Allow-Credentials") != "" {
			t.Fatalf("preflight: %d %v", res.StatusCode, res.Header)
		}
		r := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil, "Origin", site)
		expose := strings.ToLower(r.Header.Get("Access-Control-Expose-Headers"))
		if r.Status != 200 || r.Header.Get("Access-Control-Allow-Origin") != site || !strings.Contains(expose, "etag") ||
			!strings.Contains(expose, "retry-after") || !strings.Contains(expose, "location") || !strings.Contains(expose, "idempotent-replayed") {
			t.Fatalf("GET from the site: %d %v", r.Status, r.Header)
		}
		if r := w.do(http.MethodGet, "/api/songs", asAnon, nil, "Origin", site); r.Header.Get("Access-Control-Allow-Origin") != site {
			t.Errorf("a public route from the site: %v", r.Header)
		}
		for _, c := range []struct{ path, origin string }{
			{"/api/listeners/mine", "https://evil.example"},
			{"/api/admin/users", site},
			{"/api/session", site},
		} {
			if res := preflight(c.path, c.origin); res.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("preflight of %s from %s allowed: %v", c.path, c.origin, res.Header)
			}
			if r := w.do(http.MethodGet, c.path, asAdmin, nil, "Origin", c.origin); r.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("GET %s from %s allowed: %v", c.path, c.origin, r.Header)
			}
		}
	})
}
