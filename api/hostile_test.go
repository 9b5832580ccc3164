package api_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/owed/owed/app"
	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
)

// Hostile input against a real listener (app.Serve, with the production server's timeouts,
// made short here): bodies far past the limit, clients that dribble, junk and injection in
// every filter and cursor, and path traversal in preview and plugin paths.

// countingListener counts the bytes the server reads from its connections.
type countingListener struct {
	net.Listener
	read atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, n: &l.read}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// served is owed behind app.Serve on a loopback listener.
type served struct {
	app  *app.App
	ln   *countingListener
	addr string
	tok  map[models.Role]string // role → a user's token
}

func serveOwed(t *testing.T, timeouts app.ServerTimeouts) *served {
	t.Helper()
	model := modeltest.New(t)
	cfg := app.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.DatabaseURL = "sqlite:" + cfg.DataDir + "/owed.db"
	cfg.AdminToken = owedtest.AdminToken
	cfg.ModelURL = model.URL()
	cfg.WriteRate = 0
	cfg.DatabaseMaxConns = 8
	a, err := app.New(context.Background(), cfg, app.Options{Clock: clocktest.NewFake(owedtest.Start), Log: slog.New(slog.DiscardHandler),
		ServerTimeouts: timeouts})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &countingListener{Listener: inner}
	ctx, cancel := context.WithCancel(context.Background())
	if err := a.Serve(ctx, ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		a.Shutdown(sctx)
		cancel()
	})
	s := &served{app: a, ln: ln, addr: inner.Addr().String(), tok: map[models.Role]string{"admin": owedtest.AdminToken}}
	for _, role := range []models.Role{models.RoleAuthor, models.RoleBot} {
		_, tok, err := a.Store.CreateUser(ctx, string(role)+"-1", role)
		if err != nil {
			t.Fatal(err)
		}
		s.tok[role] = tok
	}
	return s
}

// endless is a body of n bytes of a JSON string's inside, counting what was taken of it.
type endless struct {
	left  int64
	taken atomic.Int64
}

func (e *endless) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), e.left))
	for i := range n {
		p[i] = 'a'
	}
	e.left -= int64(n)
	e.taken.Add(int64(n))
	return n, nil
}

// TestOversizeBodiesAreRefusedBeforeTheyAreRead streams 50 MB bodies, with a Content-Length
// and chunked, at routes that read JSON: each is answered 413 in the error shape within a
// second or so, the server having read at most the 2 MB limit and a little buffering, and the
// connection is closed rather than drained.
func TestOversizeBodiesAreRefusedBeforeTheyAreRead(t *testing.T) {
	t.Parallel()
	s := serveOwed(t, app.ServerTimeouts{})
	const size = 50 << 20
	for _, c := range []struct {
		name, path string
		role       models.Role
		chunked    bool
		maxRead    int64
	}{
		{"declared length", "/api/listeners/pitches", models.RoleAuthor, false, 64 << 10},
		{"chunked", "/api/listeners/pitches", models.RoleAuthor, true, 3 << 20},
		{"declared length", "/api/scrapes/1/media", models.RoleBot, false, 64 << 10},
		{"chunked", "/api/scrapes/1/media", models.RoleBot, true, 3 << 20},
		{"chunked", "/api/admin/webhooks", "admin", true, 3 << 20},
		{"chunked", "/api/backfill/start", "admin", true, 3 << 20},
		{"chunked, anonymous", "/api/session", "", true, 3 << 20},
	} {
		t.Run(c.path+" "+c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", s.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			before := s.ln.read.Load()
			body := &endless{left: size}
			head := "POST " + c.path + " HTTP/1.1\r\nHost: owed\r\nContent-Type: application/json\r\n"
			if tok := s.tok[c.role]; tok != "" {
				head += "Authorization: Bearer " + tok + "\r\n"
			}
			if c.chunked {
				head += "Transfer-Encoding: chunked\r\n\r\n"
			} else {
				head += fmt.Sprintf("Content-Length: %d\r\n\r\n", size)
			}
			start := time.Now()
			if _, err := io.WriteString(conn, head); err != nil {
				t.Fatal(err)
			}
			go func() {
				var w io.Writer = conn
				if c.chunked {
					cw := httputil.NewChunkedWriter(conn)
					defer cw.Close()
					w = cw
				}
				io.Copy(w, io.MultiReader(strings.NewReader(`{"body":"`), body))
			}()
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			answer, _ := io.ReadAll(res.Body)
			took := time.Since(start)
			if res.StatusCode != http.StatusRequestEntityTooLarge || !bytes.Contains(answer, []byte(`"code":"too_large"`)) {
				t.Fatalf("%d %s, want 413 too_large", res.StatusCode, answer)
			}
			if took > 3*time.Second {
				t.Errorf("the 413 took %s", took)
			}
			// The server closes the connection instead of reading the rest.
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("the connection stays open after a 413: %v", err)
			}
			read := s.ln.read.Load() - before
			if read > c.maxRead {
				t.Errorf("the server read %d bytes of a %d-byte body, want at most %d", read, size, c.maxRead)
			}
			t.Logf("413 after %s; the server read %d KiB, the client got %d KiB out", took.Round(time.Millisecond), read>>10, body.taken.Load()>>10)
		})
	}
}

// closedWithin waits for the server to close conn, reading whatever it sends meanwhile, and
// returns how long that took and what was read.
func closedWithin(t *testing.T, conn net.Conn, limit time.Duration) (time.Duration, string) {
	t.Helper()
	start := time.Now()
	conn.SetReadDeadline(start.Add(limit))
	got, err := io.ReadAll(conn)
	took := time.Since(start)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server kept the connection open for %s (read %q)", limit, got)
	}
	return took, string(got)
}

// TestSlowClientsAreCutOff: a client that dribbles its headers, one that dribbles its body
// and one that idles on a kept-alive connection are each cut off by the server's timeouts,
// and the dribbled write writes nothing.
func TestSlowClientsAreCutOff(t *testing.T) {
	t.Parallel()
	timeouts := app.ServerTimeouts{ReadHeader: 300 * time.Millisecond, Read: 700 * time.Millisecond, Write: time.Second, Idle: 500 * time.Millisecond}
	s := serveOwed(t, timeouts)
	dribble := func(conn net.Conn, s string, every time.Duration, stop <-chan struct{}) {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(every):
			}
			if _, err := conn.Write([]byte{s[i%len(s)]}); err != nil {
				return
			}
		}
	}

	t.Run("headers", func(t *testing.T) {
		conn, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, "GET /api/songs HTTP/1.1\r\nHost: owed\r\n")
		stop := make(chan struct{})
		defer close(stop)
		go dribble(conn, "X-Slow: y", 50*time.Millisecond, stop)
		took, got := closedWithin(t, conn, 5*time.Second)
		if strings.Contains(got, " 200 ") {
			t.Errorf("a request whose headers never ended was answered: %q", got)
		}
		if took > timeouts.ReadHeader+time.Second {
			t.Errorf("cut off after %s; ReadHeaderTimeout is %s", took, timeouts.ReadHeader)
		}
		t.Logf("dribbled headers cut off after %s", took.Round(time.Millisecond))
	})

	t.Run("body", func(t *testing.T) {
		conn, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		pitches := func() int64 {
			var n int64
			s.app.Store.RawScan(context.Background(), &n, `SELECT COUNT(*) FROM pitches`)
			return n
		}
		before := pitches()
		fmt.Fprintf(conn, "POST /api/listeners/pitches HTTP/1.1\r\nHost: owed\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"body\":\"", s.tok[models.RoleAuthor])
		stop := make(chan struct{})
		defer close(stop)
		go dribble(conn, "slow", 50*time.Millisecond, stop)
		took, got := closedWithin(t, conn, 5*time.Second)
		if strings.Contains(got, " 201 ") {
			t.Errorf("a body that never ended was accepted: %q", got)
		}
		if took > timeouts.Read+time.Second {
			t.Errorf("cut off after %s; ReadTimeout is %s", took, timeouts.Read)
		}
		if n := pitches(); n != before {
			t.Errorf("the dribbled write wrote %d pitches", n-before)
		}
		t.Logf("dribbled body cut off after %s with %q", took.Round(time.Millisecond), strings.SplitN(got, "\r\n", 2)[0])
	})

	t.Run("idle", func(t *testing.T) {
		conn, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: owed\r\n\r\n")
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(conn)
		res, err := http.ReadResponse(br, nil)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("healthz: %v %v", res, err)
		}
		io.Copy(io.Discard, res.Body)
		start := time.Now()
		conn.SetReadDeadline(start.Add(5 * time.Second))
		if _, err := br.ReadByte(); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("an idle kept-alive connection stayed open for 5 s")
		}
		took := time.Since(start)
		if took > timeouts.Idle+time.Second {
			t.Errorf("idle connection closed after %s; IdleTimeout is %s", took, timeouts.Idle)
		}
		t.Logf("idle connection closed after %s", took.Round(time.Millisecond))
	})
}

// TestWriteLimitIsPerTokenForEveryRole: the per-token write limit holds for a bot's pushes and
// an admin's writes as for an author's (429 with Retry-After, nothing written), each token has
// its own budget, and the token may write again once its bucket refills.
func TestWriteLimitIsPerTokenForEveryRole(t *testing.T) {
	t.Parallel()
	env := owedtest.NewEnv(t, "", func(c *app.Config) { c.WriteRate, c.WriteBurst = 10, 2 })
	_, bot := env.User("bo", models.RoleBot)
	_, bot2 := env.User("bo2", models.RoleBot)
	env.Clock.Advance(time.Second) // the admin's bucket refills after making the users
	scrape := func(tok string) owedtest.Response {
		return env.Do(http.MethodPost, "/api/scrapes", tok, map[string]any{"chatId": "c", "backend": "puppet", "mode": "history"})
	}
	for _, tok := range []string{bot, env.AdminToken} {
		for i := range 2 {
			if r := scrape(tok); r.Status != http.StatusCreated {
				t.Fatalf("write %d within the burst: %d %s", i, r.Status, r.Body)
			}
		}
		r := scrape(tok)
		if r.Status != http.StatusTooManyRequests || r.ErrorCode() != "rate_limited" || r.Header.Get("Retry-After") != "1" {
			t.Fatalf("write past the burst: %d %s Retry-After=%q", r.Status, r.Body, r.Header.Get("Retry-After"))
		}
	}
	if r := scrape(bot2); r.Status != http.StatusCreated {
		t.Fatalf("another bot's token has its own budget: %d %s", r.Status, r.Body)
	}
	var n int64
	env.App.Store.RawScan(context.Background(), &n, `SELECT COUNT(*) FROM scrapes`)
	if n != 5 {
		t.Fatalf("%d scrapes, want 5: a refused write wrote", n)
	}
	// 10 writes a second, on the API's clock: a token is back 100 ms later, not before, however
	// long the test takes.
	env.Clock.Advance(99 * time.Millisecond)
	if r := scrape(bot); r.Status != http.StatusTooManyRequests {
		t.Fatalf("a write before the bucket refilled: %d %s", r.Status, r.Body)
	}
	env.Clock.Advance(time.Millisecond)
	if r := scrape(bot); r.Status != http.StatusCreated {
		t.Fatalf("a write after the bucket refilled: %d %s", r.Status, r.Body)
	}
}

// junkValues are hostile values for any filter, limit or cursor.
var junkValues = []string{
	`' OR 1=1 --`, `1 OR 1=1`, `1; DROP TABLE users; --`, `screen' UNION SELECT token_hash FROM users --`,
	`{"$gt":""}`, `[1,2]`, `１２`, `🎵`, "\u202e", `𝟙`, "\x00", "\xff\xfe", "a\r\nX-Injected: 1",
	strings.Repeat("9", 100_000), strings.Repeat("é", 5_000), "-0", "0x10", "1e3", " 1", "%",
}

// TestJunkInEveryFilterAndCursorIsRefused sends every junk value in every query parameter of
// every list (and each parameter twice): each is a 400 naming the parameter, except a free
// text filter (chatId, a job's author name), which may answer 200 with nothing matched; no answer is a 5xx, and the
// database does not change.
func TestJunkInEveryFilterAndCursorIsRefused(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBadWorld(t, db)
		ids := map[string]int64{"webhook": b.webhook(), "scrape": b.scrape()}
		b.do(http.MethodPost, fmt.Sprintf("/api/scrapes/%d/media", ids["scrape"]), asBot, mediaBody(3))
		as := map[role]role{asAnon: asAnon, asAdmin: asAdmin, asBot: asBot, asAuthor: asAuthor}
		before := b.snapshot()
		refused, matchedNothing := 0, 0
		for _, r := range queryRoutes {
			path := strings.Replace(r.pattern, ":id", fmt.Sprint(ids[r.fixture]), 1)
			for _, param := range r.params {
				for _, v := range append(slices.Clone(junkValues), "twice") {
					q := url.Values{param: {v}}.Encode()
					if v == "twice" {
						q = url.Values{param: {"1", "2"}}.Encode()
					}
					res := b.do(http.MethodGet, path+"?"+q, as[r.as], nil)
					what := fmt.Sprintf("GET %s?%.60s", r.pattern, q)
					switch {
					case res.Status == http.StatusBadRequest:
						checkError(t, res, http.StatusBadRequest, "invalid", param)
						refused++
					case res.Status == http.StatusOK && (param == "chatId" || param == "author") && v != "twice":
						var l struct{ Scrapes, Jobs []any }
						res.Decode(t, &l)
						if len(l.Scrapes)+len(l.Jobs) != 0 {
							t.Errorf("%s matched %d scrapes, %d jobs", what, len(l.Scrapes), len(l.Jobs))
						}
						matchedNothing++
					default:
						t.Errorf("%s: %d %s", what, res.Status, res.Body)
					}
				}
			}
		}
		// The one filter that comes in a body: retrying jobs by filter.
		for _, field := range []string{"task", "kind", "why", "state", "userId", "itemId"} {
			for _, v := range junkValues {
				if !utf8.ValidString(v) {
					continue // not JSON text at all (TestBadInput sends such bodies)
				}
				res := b.do(http.MethodPost, "/api/admin/jobs/retry", asAdmin, map[string]any{field: v})
				checkError(t, res, http.StatusBadRequest, "invalid", field)
				refused++
			}
			res := b.do(http.MethodPost, "/api/admin/jobs/retry", asAdmin, map[string]any{field: []string{"screen", "score"}})
			checkError(t, res, http.StatusBadRequest, "invalid", field)
		}
		b.t = t
		b.unchanged(t, before, "junk in filters")
		t.Logf("%d junk queries refused with 400, %d free-text filters matched nothing", refused, matchedNothing)
	})
}

// TestPathTraversalNeverLeavesThePreviewDir asks for previews (and plugin modules) by paths
// that climb out of their folders, encoded every way: none is served, and the only preview
// ever served is the one the row's id names. A cached preview is served to bots and admins
// only.
func TestPathTraversalNeverLeavesThePreviewDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plugins := filepath.Join(dir, "plugins")
	os.MkdirAll(plugins, 0o755)
	os.WriteFile(filepath.Join(plugins, "hello.js"), []byte("// Hello\nexport default {}\n"), 0o644)
	const secret = "SECRET-MARKER-owed"
	os.WriteFile(filepath.Join(dir, "secret.txt"), []byte(secret), 0o644)
	w := newWorld(t, "sqlite:"+dir+"/owed.db", func(c *app.Config) { c.DataDir, c.PluginsDir = dir, plugins })
	os.WriteFile(filepath.Join(dir, "previews", "secret.txt"), []byte(secret), 0o644)

	// One cached row with its preview on disk.
	id := w.media()
	preview := []byte("\xff\xd8\xff\xe0 a jpeg preview")
	path := w.env.App.Media.PreviewPath(id)
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, preview, 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, err := w.store().RecordPreview(context.Background(), id, models.MediaCached, int64(len(preview))); err != nil || !ok {
		t.Fatalf("record preview: %v %v", ok, err)
	}
	good := fmt.Sprintf("/api/media/%d/preview", id)
	for _, as := range everyRole {
		r := w.do(http.MethodGet, good, as, nil)
		want := map[role]int{asAnon: 401, asAuthor: 403, asOther: 403, asBot: 200, asAdmin: 200}[as]
		if r.Status != want || (want == 200 && !bytes.Equal(r.Body, preview)) {
			t.Errorf("the cached preview as %s: %d, want %d", as, r.Status, want)
		}
	}

	addr := w.env.Server.Listener.Addr().String()
	get := func(target string, as role) (int, []byte) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		auth := ""
		if tok := w.tok[as]; tok != "" {
			auth = "Authorization: Bearer " + tok + "\r\n"
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: owed\r\n%sConnection: close\r\n\r\n", target, auth)
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, body
	}
	shard := filepath.Base(filepath.Dir(path))
	var attempts []string
	for _, climb := range []string{
		"..%2f..%2fowed.db", "..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd", "%2e%2e%2f%2e%2e%2fowed.db", "%2e%2e/%2e%2e/owed.db",
		"..%252f..%252fowed.db", "....%2f%2f....%2f%2fowed.db", "..%5c..%5cowed.db", "..\\..\\owed.db", "%2e%2e",
		"..%2fsecret.txt", "..%2f..%2fsecret.txt", shard + "%2f..%2f..%2fsecret.txt", fmt.Sprintf("%d%%2f..%%2f..%%2fowed.db", id),
		fmt.Sprintf("%d%%00.jpg", id), fmt.Sprintf("%d.jpg", id), "%c0%ae%c0%ae%c0%afowed.db", "..%c0%af..%c0%afowed.db",
		"-1", "0", "0x1", "1e0", "99999999999999999999", "%20" + fmt.Sprint(id), "secret.txt",
	} {
		attempts = append(attempts, "/api/media/"+climb+"/preview")
	}
	attempts = append(attempts, "/api/media/../../owed.db/preview", "/api/media/../../../etc/passwd",
		good+"/../../../owed.db", good+"/..%2f..%2fowed.db", "/api/media/"+fmt.Sprint(id)+"/..%2f..%2fsecret.txt",
		"/admin/ext/..%2f..%2fowed.db", "/admin/ext/..%2fsecret.txt", "/admin/ext/../secret.txt", "/admin/ext/%2e%2e/secret.txt",
		"/admin/ext/hello.js/..%2f..%2fsecret.txt", "/admin/..%2f..%2fsecret.txt", "/admin/ext/..%5csecret.txt",
		"/admin/ext/hello.js%00.txt", "/admin/ext/....//secret.txt")
	servedOK := 0
	for _, target := range attempts {
		for _, as := range []role{asBot, asAdmin} {
			status, body := get(target, as)
			if bytes.Contains(body, []byte(secret)) || bytes.Contains(body, []byte("SQLite format")) || bytes.Contains(body, []byte("root:")) {
				t.Fatalf("GET %s as %s served a file outside its folder: %d %q", target, as, status, body[:min(len(body), 80)])
			}
			switch {
			case status == http.StatusOK && bytes.Equal(body, preview):
				servedOK++ // the row's own preview, named another way ("%20<id>")
			case status == http.StatusOK && strings.HasPrefix(target, "/admin/") && !strings.Contains(target, "ext/"):
				// the SPA's page for a path it does not know
			case status >= 400 && status < 500:
			default:
				t.Errorf("GET %s as %s: %d %q", target, as, status, body[:min(len(body), 120)])
			}
		}
	}
	if status, body := get("/admin/ext/hello.js", asAnon); status != http.StatusOK || !bytes.Contains(body, []byte("Hello")) {
		t.Errorf("the plugin itself: %d %q", status, body)
	}
	t.Logf("%d traversal attempts refused; %d served the row's own preview", len(attempts)*2-servedOK, servedOK)
}
