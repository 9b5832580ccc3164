package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/owed/owed/owedtest"
)

// signIn exchanges token for a session and returns the cookie set.
func (w *world) signIn(t *testing.T, token string) *http.Cookie {
	t.Helper()
	r := w.do(http.MethodPost, "/api/session", asAnon, map[string]string{"token": token})
	if r.Status != http.StatusNoContent {
		t.Fatalf("sign in: %d %s", r.Status, r.Body)
	}
	for _, line := range r.Header.Values("Set-Cookie") {
		c, err := http.ParseSetCookie(line)
		if err == nil && c.Name == "owed_session" {
			return c
		}
	}
	t.Fatalf("sign in set no session cookie: %v", r.Header.Values("Set-Cookie"))
	return nil
}

// TestBrowserSession: a token is exchanged for an HttpOnly, SameSite=Strict cookie; with it
// reads work, writes need the X-Owed-Request header, and signing out ends it.
func TestBrowserSession(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newJobsWorld(t, db).world
		c := w.signIn(t, w.tok[asAdmin])
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Value == "" || c.MaxAge <= 0 {
			t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, a lifetime", c)
		}
		cookie := "owed_session=" + c.Value

		r := w.env.Do(http.MethodGet, "/api/session", "", nil, "Cookie", cookie)
		if u := obj(r.JSON()["user"]); r.Status != http.StatusOK || u["role"] != "admin" || num(u["id"]) != w.uid[asAdmin] {
			t.Errorf("who is signed in: %d %s", r.Status, r.Body)
		}
		if r = w.env.Do(http.MethodGet, "/api/admin/jobs", "", nil, "Cookie", cookie); r.Status != http.StatusOK {
			t.Errorf("a read with the cookie: %d %s", r.Status, r.Body)
		}

		// A write without the header is refused whole: a cross-site form cannot add it.
		before := w.snapshot()
		r = w.env.Do(http.MethodPost, "/api/admin/jobs/retry", "", map[string]any{}, "Cookie", cookie)
		checkError(t, r, http.StatusForbidden, "csrf", "")
		r = w.env.Do(http.MethodPost, "/api/admin/users", "", map[string]any{"name": "eve", "role": "admin"}, "Cookie", cookie)
		checkError(t, r, http.StatusForbidden, "csrf", "")
		w.unchanged(t, before, "a session write without X-Owed-Request")
		r = w.env.Do(http.MethodPost, "/api/admin/jobs/retry", "", map[string]any{}, "Cookie", cookie, "X-Owed-Request", "1")
		if r.Status != http.StatusOK || num(r.JSON()["retried"]) != 4 {
			t.Errorf("a session write with the header: %d %s", r.Status, r.Body)
		}

		// Signing out is a write too; then the cookie is cleared and worth nothing.
		checkError(t, w.env.Do(http.MethodDelete, "/api/session", "", nil, "Cookie", cookie), http.StatusForbidden, "csrf", "")
		r = w.env.Do(http.MethodDelete, "/api/session", "", nil, "Cookie", cookie, "X-Owed-Request", "1")
		if r.Status != http.StatusNoContent {
			t.Errorf("sign out: %d %s", r.Status, r.Body)
		}
		cleared := false
		for _, line := range r.Header.Values("Set-Cookie") {
			if c, err := http.ParseSetCookie(line); err == nil && c.Name == "owed_session" && c.Value == "" && c.MaxAge < 0 {
				cleared = true
			}
		}
		if !cleared {
			t.Errorf("sign out did not clear the cookie: %v", r.Header.Values("Set-Cookie"))
		}
		checkError(t, w.env.Do(http.MethodGet, "/api/session", "", nil, "Cookie", cookie), http.StatusUnauthorized, "unauthorized", "")
		checkError(t, w.env.Do(http.MethodGet, "/api/admin/jobs", "", nil, "Cookie", cookie), http.StatusUnauthorized, "unauthorized", "")

		// A bad token makes no session.
		before = w.snapshot()
		r = w.do(http.MethodPost, "/api/session", asAnon, map[string]string{"token": "owed_not_a_token"})
		checkError(t, r, http.StatusUnauthorized, "unauthorized", "token")
		if len(r.Header.Values("Set-Cookie")) != 0 {
			t.Errorf("a refused sign-in set %v", r.Header.Values("Set-Cookie"))
		}
		w.unchanged(t, before, "a refused sign-in")

		// An author's session may publish (with the header), and ends after its lifetime.
		cookie = "owed_session=" + w.signIn(t, w.tok[asAuthor]).Value
		r = w.env.Do(http.MethodPost, "/api/listeners/pitches", "", map[string]string{"body": "from the browser"}, "Cookie", cookie, "X-Owed-Request", "1")
		if r.Status != http.StatusCreated {
			t.Errorf("an author's session publishing: %d %s", r.Status, r.Body)
		}
		checkError(t, w.env.Do(http.MethodGet, "/api/admin/jobs", "", nil, "Cookie", cookie), http.StatusForbidden, "forbidden", "")
		w.env.Clock.Advance(12*time.Hour + time.Second)
		checkError(t, w.env.Do(http.MethodGet, "/api/listeners/mine", "", nil, "Cookie", cookie), http.StatusUnauthorized, "unauthorized", "")
	})
}
