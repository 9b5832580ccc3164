package api_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// seriesCount counts the sample lines /metrics serves for owed's own metrics (the Go and
// process collectors vary on their own).
func seriesCount(t *testing.T, env *owedtest.Env) (int, string) {
	t.Helper()
	r := env.Do(http.MethodGet, "/metrics", "", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("metrics: %d", r.Status)
	}
	n := 0
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "owed_http_") {
			n++
			lines = append(lines, l)
		}
	}
	return n, strings.Join(lines, "\n")
}

// randomRequest sends a request with a made-up method to a made-up path, no token: what a
// scanner or a hostile caller sends.
func randomRequest(t *testing.T, env *owedtest.Env, rng *rand.Rand) {
	t.Helper()
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	m := make([]byte, 3+rng.IntN(8))
	for i := range m {
		m[i] = letters[rng.IntN(len(letters))]
	}
	paths := []string{
		fmt.Sprintf("/x%d/%d", rng.Int64(), rng.Int64()),
		fmt.Sprintf("/api/nope-%d", rng.Int64()),
		fmt.Sprintf("/api/songs/%d", rng.Int64N(1<<40)),
		fmt.Sprintf("/admin/%d.js", rng.Int64()),
		fmt.Sprintf("/api/scrapes/%d/media", rng.Int64N(1<<40)),
	}
	req, err := http.NewRequest(string(m), env.Server.URL+paths[rng.IntN(len(paths))], nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := env.Server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
}

// TestMetricsLabelsAreBounded (issue 12, row 3): made-up methods and paths do not become label
// values. After a first round has met every route, method class and status the random requests
// can reach, ten times as many more add no series at all.
func TestMetricsLabelsAreBounded(t *testing.T) {
	t.Parallel()
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db")
	rng := rand.New(rand.NewPCG(12, 3))
	for range 20 {
		randomRequest(t, env, rng)
	}
	// Every well-known method once too, on each kind of path.
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "PROPFIND"} {
		for _, p := range []string{"/x/y", "/api/songs/1", "/admin/a.js", "/api/scrapes/1/media", "/api/nope"} {
			req, _ := http.NewRequest(m, env.Server.URL+p, nil)
			if res, err := env.Server.Client().Do(req); err == nil {
				res.Body.Close()
			}
		}
	}
	seriesCount(t, env) // /metrics counts itself from its first scrape on
	after20, _ := seriesCount(t, env)
	for range 200 {
		randomRequest(t, env, rng)
	}
	after200, lines := seriesCount(t, env)
	if after200 != after20 {
		t.Errorf("series grew from %d to %d with random methods and paths:\n%s", after20, after200, lines)
	}
	for _, bad := range []string{`method="PROPFIND"`, "/x", "nope", ".js"} {
		if strings.Contains(lines, bad) {
			t.Errorf("a caller's %s became a label value", bad)
		}
	}
	if !strings.Contains(lines, `method="other"`) {
		t.Errorf("made-up methods are not counted as other:\n%s", lines)
	}
}

// signInAs posts a sign-in with token, from the test's own address unless headers say
// otherwise.
func signInAs(env *owedtest.Env, token string, headers ...string) owedtest.Response {
	return env.Do(http.MethodPost, "/api/session", "", map[string]string{"token": token}, headers...)
}

// TestSignInsAreLimited (issue 12, row 5): 300 sign-ins in a burst with one token make a
// handful of sessions; the rest are 429 with Retry-After, in the error shape, and make none.
// Guesses with made-up tokens are limited by address. The fake clock does not move, so the
// counts are exact.
func TestSignInsAreLimited(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		env := owedtest.NewEnv(t, db)
		uid, tok := env.User("ann", models.RoleAuthor)
		ok, limited := 0, 0
		for range 300 {
			r := signInAs(env, tok)
			switch r.Status {
			case http.StatusNoContent:
				ok++
			case http.StatusTooManyRequests:
				limited++
				secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
				if err != nil || secs < 1 || secs > 60 {
					t.Fatalf("429 with Retry-After %q, want whole seconds", r.Header.Get("Retry-After"))
				}
				if r.ErrorCode() != "rate_limited" || len(r.Header.Values("Set-Cookie")) != 0 {
					t.Fatalf("429: %s %v", r.Body, r.Header.Values("Set-Cookie"))
				}
			default:
				t.Fatalf("sign-in: %d %s", r.Status, r.Body)
			}
		}
		if ok > 5 || ok == 0 || limited != 300-ok {
			t.Errorf("300 sign-ins in a burst: %d made a session, %d were limited; want at most 5 sessions", ok, limited)
		}
		if n := owedtest.Count(t, env.App.Store, `SELECT COUNT(*) FROM sessions WHERE user_id = ?`, uid); n != int64(ok) {
			t.Errorf("%d session rows, want %d", n, ok)
		}

		// The token's bucket refills with time (one every 30 s), on owed's clock.
		env.Clock.Advance(time.Minute)
		if r := signInAs(env, tok); r.Status != http.StatusNoContent {
			t.Errorf("a sign-in a minute later: %d %s", r.Status, r.Body)
		}

		// Guessing tokens from one address is limited by the address: each guess is a new token.
		env2 := owedtest.NewEnv(t, "") // limits live in the process: any database will do
		statuses := map[int]int{}
		for i := range 100 {
			statuses[signInAs(env2, fmt.Sprintf("owed_guess_%d", i)).Status]++
		}
		if statuses[http.StatusUnauthorized] > 20 || statuses[http.StatusTooManyRequests] < 80 {
			t.Errorf("100 guesses from one address: %v, want at most 20 tried", statuses)
		}
	})
}

// TestSessionsAreBoundedAndPruned (issue 12, row 5): a user's sessions are capped, and expired
// ones are deleted by the prune the periodic sweep runs, not only at sign-out.
func TestSessionsAreBoundedAndPruned(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		env := owedtest.NewEnv(t, db)
		uid, _ := env.User("ann", models.RoleAuthor)
		ctx := context.Background()
		st := env.App.Store
		for range models.MaxSessionsPerUser + 15 {
			if _, err := st.CreateSession(ctx, uid, 12*time.Hour); err != nil {
				t.Fatal(err)
			}
			env.Clock.Advance(time.Second)
		}
		if n := owedtest.Count(t, st, `SELECT COUNT(*) FROM sessions WHERE user_id = ?`, uid); n != models.MaxSessionsPerUser {
			t.Errorf("%d sessions after %d sign-ins, want the cap %d", n, models.MaxSessionsPerUser+15, models.MaxSessionsPerUser)
		}
		live, err := st.CreateSession(ctx, uid, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		env.Clock.Advance(13 * time.Hour)
		env.App.Prune(ctx)
		if n := owedtest.Count(t, st, `SELECT COUNT(*) FROM sessions`); n != 1 {
			t.Errorf("%d sessions after the prune, want the one live session", n)
		}
		if _, err := st.UserBySession(ctx, live); err != nil {
			t.Errorf("the live session after the prune: %v", err)
		}
	})
}

// TestTrustedProxies (issue 12, row 9): X-Forwarded-For from a peer that is not a trusted
// proxy does not change the client address the sign-in limit counts by; from a trusted one
// it does.
func TestTrustedProxies(t *testing.T) {
	t.Parallel()
	guesses := func(env *owedtest.Env) map[int]int {
		statuses := map[int]int{}
		for i := range 40 {
			r := signInAs(env, fmt.Sprintf("owed_guess_%d", i), "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i+1))
			statuses[r.Status]++
		}
		return statuses
	}
	// Default: no proxy is trusted; every guess counts against the test's own address.
	if st := guesses(owedtest.NewEnv(t, "")); st[http.StatusTooManyRequests] != 20 {
		t.Errorf("untrusted X-Forwarded-For: %v, want the address limited after 20", st)
	}
	// A proxy range that does not hold the peer: the same.
	other := owedtest.NewEnv(t, "", func(c *app.Config) { c.TrustedProxies = "10.0.0.0/8, 192.0.2.7" })
	if st := guesses(other); st[http.StatusTooManyRequests] != 20 {
		t.Errorf("X-Forwarded-For from a peer outside the trusted ranges: %v, want limited after 20", st)
	}
	// The peer (loopback here) is trusted: each forwarded address has its own bucket.
	trusted := owedtest.NewEnv(t, "", func(c *app.Config) { c.TrustedProxies = "127.0.0.1/32,::1/128" })
	if st := guesses(trusted); st[http.StatusUnauthorized] != 40 {
		t.Errorf("X-Forwarded-For from a trusted proxy: %v, want every guess answered 401", st)
	}
}

// sessionCookieOf is the owed_session cookie an answer sets.
func sessionCookieOf(t *testing.T, r owedtest.Response) *http.Cookie {
	t.Helper()
	for _, line := range r.Header.Values("Set-Cookie") {
		if c, err := http.ParseSetCookie(line); err == nil && c.Name == "owed_session" {
			return c
		}
	}
	t.Fatalf("no session cookie: %d %s %v", r.Status, r.Body, r.Header.Values("Set-Cookie"))
	return nil
}

// TestPublicURLMakesCookiesSecure (issue 12, row 9): with an https OWED_PUBLIC_URL the session
// cookie is Secure and HSTS is sent; without it the cookie is Secure only when a trusted
// proxy says the request came over https.
func TestPublicURLMakesCookiesSecure(t *testing.T) {
	t.Parallel()
	env := owedtest.NewEnv(t, "", func(c *app.Config) { c.PublicURL = "https://owed.example.org" })
	r := signInAs(env, env.AdminToken)
	if c := sessionCookieOf(t, r); !c.Secure {
		t.Errorf("https public URL: cookie %+v is not Secure", c)
	}
	for _, path := range []string{"/api/songs", "/admin/", "/nothing"} {
		if h := env.Do(http.MethodGet, path, "", nil).Header.Get("Strict-Transport-Security"); !strings.HasPrefix(h, "max-age=") {
			t.Errorf("%s: Strict-Transport-Security %q", path, h)
		}
	}

	plain := owedtest.NewEnv(t, "")
	r = signInAs(plain, plain.AdminToken, "X-Forwarded-Proto", "https")
	if c := sessionCookieOf(t, r); c.Secure {
		t.Errorf("no public URL, X-Forwarded-Proto from an untrusted peer: cookie is Secure")
	}
	if h := r.Header.Get("Strict-Transport-Security"); h != "" {
		t.Errorf("no public URL: HSTS %q", h)
	}
	proxied := owedtest.NewEnv(t, "", func(c *app.Config) { c.TrustedProxies = "127.0.0.1/32" })
	if c := sessionCookieOf(t, signInAs(proxied, proxied.AdminToken, "X-Forwarded-Proto", "https")); !c.Secure {
		t.Errorf("X-Forwarded-Proto https from a trusted proxy: cookie is not Secure")
	}
	if c := sessionCookieOf(t, signInAs(proxied, proxied.AdminToken)); c.Secure {
		t.Errorf("plain http through a trusted proxy: cookie is Secure")
	}
}

// TestConfigTrustedProxiesAndPublicURL: bad values stop owed with the variable named.
func TestConfigTrustedProxiesAndPublicURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, value string }{
		{"OWED_TRUSTED_PROXIES", "10.0.0.0/33"},
		{"OWED_TRUSTED_PROXIES", "proxy.local"},
		{"OWED_PUBLIC_URL", "owed.example.org"},
		{"OWED_PUBLIC_URL", "ftp://owed.example.org"},
	} {
		_, err := app.FromEnv(func(k string) string {
			if k == c.name {
				return c.value
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s=%q: %v, want an error naming the variable", c.name, c.value, err)
		}
	}
	cfg, err := app.FromEnv(func(k string) string {
		return map[string]string{"OWED_TRUSTED_PROXIES": " 10.0.0.0/8, fd00::/8 ,192.0.2.7", "OWED_PUBLIC_URL": "https://owed.example.org"}[k]
	})
	if err != nil || !cfg.PublicHTTPS() {
		t.Fatalf("good values: %v %+v", err, cfg)
	}
	if ps, err := cfg.Proxies(); err != nil || len(ps) != 3 || ps[2].String() != "192.0.2.7/32" {
		t.Errorf("proxies %v %v", ps, err)
	}
}

// TestNosniffOnEveryAnswer (issue 12, row 8): JSON, errors, the SPA, /metrics, 304s and
// unrouted requests all carry X-Content-Type-Options: nosniff.
func TestNosniffOnEveryAnswer(t *testing.T) {
	t.Parallel()
	env := owedtest.NewEnv(t, "")
	_, ann := env.User("ann", models.RoleAuthor)
	mine := env.Do(http.MethodGet, "/api/listeners/mine", ann, nil)
	for what, r := range map[string]owedtest.Response{
		"json":       env.Do(http.MethodGet, "/api/songs", "", nil),
		"401":        env.Do(http.MethodGet, "/api/admin/jobs", "", nil),
		"403":        env.Do(http.MethodGet, "/api/admin/jobs", ann, nil),
		"404":        env.Do(http.MethodGet, "/api/nothing", "", nil),
		"405":        env.Do(http.MethodDelete, "/api/songs", "", nil),
		"400":        env.Do(http.MethodPost, "/api/listeners/pitches", ann, "{"),
		"spa":        env.Do(http.MethodGet, "/admin/", "", nil),
		"spa module": env.Do(http.MethodGet, "/admin/plugins/budgets.js", "", nil),
		"metrics":    env.Do(http.MethodGet, "/metrics", "", nil),
		"healthz":    env.Do(http.MethodGet, "/healthz", "", nil),
		"head":       env.Do(http.MethodHead, "/api/songs", "", nil),
		"304":        env.Do(http.MethodGet, "/api/listeners/mine", ann, nil, "If-None-Match", mine.Header.Get("ETag")),
	} {
		if what == "304" && r.Status != http.StatusNotModified {
			t.Errorf("304: got %d", r.Status)
		}
		if got := r.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s (%d): X-Content-Type-Options %q", what, r.Status, got)
		}
	}
}

// TestCountersFromIntegrationsAreBounded (issue 12, row 7): a count past 2^53-1 (or negative)
// is refused with 400 and changes nothing; the backfill's sums cannot wrap, even over rows
// written before the bound.
func TestCountersFromIntegrationsAreBounded(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		s := newSX(t, db)
		a, b := s.create("c1"), s.create("c2")
		for _, id := range []int64{a, b} {
			s.push(id, fmt.Sprintf("https://cdn.example/%d.png", id))
			s.setState(id, "paused")
		}
		path := func(id int64) string { return fmt.Sprintf("/api/scrapes/%d", id) }
		for _, v := range []string{"9223372036854775807", "9007199254740992", "-1", "18446744073709551616", "1e300"} {
			r := s.do(http.MethodPatch, path(a), s.bot, `{"downloaded":`+v+`}`)
			wantError(t, r, http.StatusBadRequest, "invalid", "downloaded")
			r = s.do(http.MethodPost, path(a)+"/media", s.bot, `{"media":[{"url":"https://cdn.example/x.png","kind":"image","bytes":`+v+`}]}`)
			// Past int64 the JSON decoder names the field by its type's path (media.bytes).
			if e := obj(r.JSON()["error"]); r.Status != http.StatusBadRequest || !strings.HasSuffix(fmt.Sprint(e["field"]), ".bytes") {
				t.Errorf("media bytes %s: %d %s", v, r.Status, r.Body)
			}
		}
		const top = 1<<53 - 1
		for _, id := range []int64{a, b} {
			if r := s.do(http.MethodPatch, path(id), s.bot, map[string]any{"downloaded": int64(top)}); r.Status != http.StatusOK {
				t.Fatalf("downloaded 2^53-1: %d %s", r.Status, r.Body)
			}
		}
		totals := func() float64 {
			st := s.do(http.MethodGet, "/api/backfill", s.env.AdminToken, nil).JSON()
			return obj(st["totals"])["downloaded"].(float64)
		}
		if got := totals(); got != 2*top {
			t.Errorf("totals.downloaded = %v, want %v", got, float64(2*top))
		}
		// Rows written before the bound (or by raw SQL) saturate instead of wrapping negative.
		if _, err := s.env.App.Store.RawExec(context.Background(), `UPDATE scrapes SET downloaded = ?`, int64(math.MaxInt64)); err != nil {
			t.Fatal(err)
		}
		if got := totals(); got != math.MaxInt64 {
			t.Errorf("totals.downloaded over two scrapes at 2^63-1 = %v, want the int64 maximum", got)
		}
	})
}

// TestAnotherAuthorsSongAnswersLikeAMissingOne (issue 12, row 6): commenting on another
// author's unpublished song, and revising it, answer exactly as a missing song does.
func TestAnotherAuthorsSongAnswersLikeAMissingOne(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		song, _ := w.song(asAuthor, "")
		public, _ := w.song(asAuthor, models.VerdictAllow)
		for _, c := range []struct {
			path string
			body any
		}{
			{"/api/listeners/songs/%d/comments", map[string]string{"body": "hi"}},
			{"/api/listeners/songs/%d/revisions", map[string]string{"code": `s("bd")`}},
		} {
			missing := w.do(http.MethodPost, fmt.Sprintf(c.path, 987654321), asOther, c.body)
			theirs := w.do(http.MethodPost, fmt.Sprintf(c.path, song), asOther, c.body)
			checkError(t, theirs, http.StatusNotFound, "not_found", "")
			if theirs.Status != missing.Status || string(theirs.Body) != string(missing.Body) {
				t.Errorf("%s on another's song: %d %s; on a missing one: %d %s", c.path, theirs.Status, theirs.Body, missing.Status, missing.Body)
			}
		}
		// Revising another author's public song is refused the same way.
		r := w.do(http.MethodPost, fmt.Sprintf("/api/listeners/songs/%d/revisions", public), asOther, map[string]string{"code": "s()"})
		checkError(t, r, http.StatusNotFound, "not_found", "")
	})
}
