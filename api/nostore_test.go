package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/owed/owed/models"
)

// secretsNotStored fails an answer that carries a token or a secret (a "token" or "secret"
// string anywhere in its JSON) without Cache-Control: no-store. Every JSON answer the API
// tests receive goes through it (answerChecker).
func secretsNotStored(t *testing.T, route string, res *http.Response, v any) {
	t.Helper()
	if key := secretKey(v); key != "" && res.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("%s answered %d with a %q but Cache-Control %q, want no-store", route, res.StatusCode, key, res.Header.Get("Cache-Control"))
	}
}

// cookieNotStored fails an answer that sets a cookie without Cache-Control: no-store.
func cookieNotStored(t *testing.T, req *http.Request, res *http.Response) {
	t.Helper()
	if len(res.Header.Values("Set-Cookie")) > 0 && res.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("%s %s set a cookie with Cache-Control %q, want no-store", req.Method, req.URL.Path, res.Header.Get("Cache-Control"))
	}
}

// secretKey is the name of the first non-empty "token" or "secret" string in v, or "".
func secretKey(v any) string {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && s != "" && (k == "token" || k == "secret") {
				return k
			}
			if k := secretKey(x); k != "" {
				return k
			}
		}
	case []any:
		for _, x := range v {
			if k := secretKey(x); k != "" {
				return k
			}
		}
	}
	return ""
}

// TestNoStoreOnSecrets (issue 23): every answer carrying a token or a secret — user creation,
// token rotation, sign-in and the session, webhook creation — has Cache-Control: no-store, its
// errors too; other answers are left to their own caching.
func TestNoStoreOnSecrets(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "sqlite:"+t.TempDir()+"/owed.db")
	admin := w.env.AdminToken
	_, author := w.env.User("someone", models.RoleAuthor)
	id := w.freshUser()
	for _, c := range []struct {
		method, path, token string
		body                any
		status              int
	}{
		{http.MethodPost, "/api/admin/users", admin, map[string]string{"name": "newcomer", "role": "author"}, 201},
		{http.MethodPost, "/api/admin/users", admin, map[string]string{"name": "", "role": "author"}, 400},
		{http.MethodPost, "/api/admin/users", author, map[string]string{"name": "x", "role": "author"}, 403},
		{http.MethodPost, fmt.Sprintf("/api/admin/users/%d/token", id), admin, nil, 200},
		{http.MethodPost, "/api/admin/users/999999/token", admin, nil, 404},
		{http.MethodPost, "/api/session", "", map[string]string{"token": author}, 204},
		{http.MethodPost, "/api/session", "", map[string]string{"token": "owed_wrong"}, 401},
		{http.MethodGet, "/api/session", author, nil, 200},
		{http.MethodDelete, "/api/session", "", nil, 204},
		{http.MethodPost, "/api/admin/webhooks", admin, webhookBody(), 201},
		{http.MethodPost, "/api/admin/webhooks", admin, map[string]any{"url": "ftp://x", "events": []string{"*"}}, 400},
	} {
		r := w.env.Do(c.method, c.path, c.token, c.body)
		if r.Status != c.status {
			t.Fatalf("%s %s: %d %s, want %d", c.method, c.path, r.Status, r.Body, c.status)
		}
		if got := r.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s %s (%d): Cache-Control %q, want no-store", c.method, c.path, r.Status, got)
		}
	}
	for _, path := range []string{"/api/songs", "/api/admin/users", "/api/admin/webhooks"} {
		if got := w.env.Do(http.MethodGet, path, admin, nil).Header.Get("Cache-Control"); got == "no-store" {
			t.Errorf("GET %s: no-store on an answer without a secret", path)
		}
	}
}

// TestSecretKeyFindsSecrets: the harness's check sees a token or a secret at any depth.
func TestSecretKeyFindsSecrets(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]any{
		"token":  map[string]any{"user": map[string]any{"id": 1.0}, "token": "owed_x"},
		"secret": map[string]any{"webhook": map[string]any{"secret": "whsec_x"}},
		"":       map[string]any{"items": []any{map[string]any{"token": ""}}},
	} {
		if got := secretKey(want); got != v {
			t.Errorf("secretKey(%v) = %q, want %q", want, got, v)
		}
	}
}
