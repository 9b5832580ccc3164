package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// TestRotateTokenAndDisableUser (issue 12, row 10): rotating a token shows the new one once
// and ends the old token and every session of the user at once; disabling a user locks out
// their token and sessions on every route while their owed work stays; enabling lets them
// back in.
func TestRotateTokenAndDisableUser(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		ann, old := w.uid[asAuthor], w.tok[asAuthor]
		pitch := w.pitch(asAuthor, "") // owes a screen job
		cookie := "owed_session=" + w.signIn(t, old).Value
		withCookie := func(method, path string) owedtest.Response {
			return w.env.Do(method, path, "", nil, "Cookie", cookie)
		}
		if r := withCookie(http.MethodGet, "/api/listeners/mine"); r.Status != http.StatusOK {
			t.Fatalf("the session before: %d", r.Status)
		}

		r := w.do(http.MethodPost, fmt.Sprintf("/api/admin/users/%d/token", ann), asAdmin, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("rotate: %d %s", r.Status, r.Body)
		}
		got := r.JSON()
		if keys := keysOf(got); fmt.Sprint(keys) != "[id name role token]" || num(got["id"]) != ann || got["name"] != "ann" || got["role"] != "author" {
			t.Errorf("rotate answered %s, want {id,name,role,token}", r.Body)
		}
		fresh, _ := got["token"].(string)
		if fresh == "" || fresh == old {
			t.Fatalf("new token %q", fresh)
		}
		checkError(t, w.env.Do(http.MethodGet, "/api/listeners/mine", old, nil), http.StatusUnauthorized, "unauthorized", "")
		checkError(t, withCookie(http.MethodGet, "/api/listeners/mine"), http.StatusUnauthorized, "unauthorized", "")
		checkError(t, w.env.Do(http.MethodPost, "/api/session", "", map[string]string{"token": old}), http.StatusUnauthorized, "unauthorized", "token")
		if r := w.env.Do(http.MethodGet, "/api/listeners/mine", fresh, nil); r.Status != http.StatusOK {
			t.Fatalf("the new token: %d %s", r.Status, r.Body)
		}
		cookie = "owed_session=" + w.signIn(t, fresh).Value

		// Disable: the token and the session stop working on every route, reads and writes.
		r = w.do(http.MethodPatch, fmt.Sprintf("/api/admin/users/%d", ann), asAdmin, map[string]any{"disabled": true})
		if r.Status != http.StatusOK || r.JSON()["disabled"] != true || num(r.JSON()["id"]) != ann {
			t.Fatalf("disable: %d %s", r.Status, r.Body)
		}
		for _, c := range []struct{ method, path string }{
			{http.MethodGet, "/api/listeners/mine"}, {http.MethodPost, "/api/listeners/pitches"},
			{http.MethodGet, "/api/songs"}, {http.MethodGet, "/api/session"},
			{http.MethodDelete, fmt.Sprintf("/api/listeners/pitches/%d", pitch)},
		} {
			r := w.env.Do(c.method, c.path, fresh, map[string]string{"body": "x"})
			checkError(t, r, http.StatusUnauthorized, "unauthorized", "")
			if r := withCookie(c.method, c.path); r.Status != http.StatusUnauthorized && r.Status != http.StatusForbidden && c.path != "/api/songs" {
				t.Errorf("%s %s with a disabled user's session: %d %s", c.method, c.path, r.Status, r.Body)
			}
		}
		checkError(t, w.env.Do(http.MethodPost, "/api/session", "", map[string]string{"token": fresh}), http.StatusUnauthorized, "unauthorized", "token")
		// Their owed work is not lost: the job stays, and the sweep still does it.
		w.job(models.TaskScreen, models.KindPitch, pitch)
		if n := w.sweep(); n != 1 {
			t.Errorf("the sweep ran %d jobs, want the disabled author's screen", n)
		}
		var users struct{ Users []map[string]any }
		w.do(http.MethodGet, "/api/admin/users", asAdmin, nil).Decode(t, &users)
		found := false
		for _, u := range users.Users {
			if num(u["id"]) == ann {
				found = u["disabled"] == true
			}
		}
		if !found {
			t.Errorf("the user list does not show ann disabled: %v", users.Users)
		}

		r = w.do(http.MethodPatch, fmt.Sprintf("/api/admin/users/%d", ann), asAdmin, map[string]any{"disabled": false})
		if r.Status != http.StatusOK || r.JSON()["disabled"] != false {
			t.Fatalf("enable: %d %s", r.Status, r.Body)
		}
		r = w.env.Do(http.MethodGet, "/api/listeners/mine", fresh, nil)
		if items := list(r.JSON()["items"]); r.Status != http.StatusOK || len(items) != 1 || obj(items[0])["verdict"] == nil {
			t.Errorf("enabled again, the pitch screened meanwhile: %d %s", r.Status, r.Body)
		}
		checkError(t, withCookie(http.MethodGet, "/api/listeners/mine"), http.StatusUnauthorized, "unauthorized", "") // disabling ended it
	})
}

// TestLastAdminCannotBeDisabled: disabling the last enabled admin is refused with 409 and
// changes nothing; with another admin it is allowed; rotating one's own token keeps the
// session it was done from.
func TestLastAdminCannotBeDisabled(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		me := w.uid[asAdmin]
		before := w.snapshot()
		checkError(t, w.do(http.MethodPatch, fmt.Sprintf("/api/admin/users/%d", me), asAdmin, map[string]any{"disabled": true}),
			http.StatusConflict, "conflict", "disabled")
		w.unchanged(t, before, "disabling the last admin")

		other, otherTok := w.env.User("root2", models.RoleAdmin)
		if r := w.do(http.MethodPatch, fmt.Sprintf("/api/admin/users/%d", me), asAdmin, map[string]any{"disabled": true}); r.Status != http.StatusOK {
			t.Fatalf("disabling an admin while another is enabled: %d %s", r.Status, r.Body)
		}
		checkError(t, w.env.Do(http.MethodPatch, fmt.Sprintf("/api/admin/users/%d", other), otherTok, map[string]any{"disabled": true}),
			http.StatusConflict, "conflict", "disabled")

		// Rotating one's own token from a session: that session goes on, others end.
		mine := "owed_session=" + w.signIn(t, otherTok).Value
		elsewhere := "owed_session=" + w.signIn(t, otherTok).Value
		r := w.env.Do(http.MethodPost, fmt.Sprintf("/api/admin/users/%d/token", other), "", nil, "Cookie", mine, "X-Owed-Request", "1")
		if r.Status != http.StatusOK {
			t.Fatalf("rotate own token: %d %s", r.Status, r.Body)
		}
		if r := w.env.Do(http.MethodGet, "/api/session", "", nil, "Cookie", mine); r.Status != http.StatusOK {
			t.Errorf("the session the rotation was done from: %d", r.Status)
		}
		checkError(t, w.env.Do(http.MethodGet, "/api/session", "", nil, "Cookie", elsewhere), http.StatusUnauthorized, "unauthorized", "")
	})
}

// TestUserRoutesRefuseBadCalls: who may call them, unknown ids and bad bodies, each in the
// error shape and changing nothing.
func TestUserRoutesRefuseBadCalls(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		ann := w.uid[asAuthor]
		rotate := fmt.Sprintf("/api/admin/users/%d/token", ann)
		patch := fmt.Sprintf("/api/admin/users/%d", ann)
		body := map[string]any{"disabled": true}
		before := w.snapshot()
		for _, c := range []struct {
			what, method, path string
			as                 role
			body               any
			status             int
			code, field        string
		}{
			{"anonymous rotate", http.MethodPost, rotate, asAnon, nil, 401, "unauthorized", ""},
			{"author rotate", http.MethodPost, rotate, asAuthor, nil, 403, "forbidden", ""},
			{"bot rotate", http.MethodPost, rotate, asBot, nil, 403, "forbidden", ""},
			{"unknown user rotate", http.MethodPost, "/api/admin/users/987654321/token", asAdmin, nil, 404, "not_found", ""},
			{"bad id rotate", http.MethodPost, "/api/admin/users/abc/token", asAdmin, nil, 404, "not_found", ""},
			{"anonymous patch", http.MethodPatch, patch, asAnon, body, 401, "unauthorized", ""},
			{"author patch", http.MethodPatch, patch, asAuthor, body, 403, "forbidden", ""},
			{"bot patch", http.MethodPatch, patch, asBot, body, 403, "forbidden", ""},
			{"unknown user patch", http.MethodPatch, "/api/admin/users/987654321", asAdmin, body, 404, "not_found", ""},
			{"empty body", http.MethodPatch, patch, asAdmin, `{}`, 400, "invalid", "disabled"},
			{"null", http.MethodPatch, patch, asAdmin, `{"disabled":null}`, 400, "invalid", "disabled"},
			{"a string", http.MethodPatch, patch, asAdmin, `{"disabled":"yes"}`, 400, "invalid", "disabled"},
			{"unknown field", http.MethodPatch, patch, asAdmin, `{"disabled":true,"role":"admin"}`, 400, "invalid", "role"},
			{"not JSON", http.MethodPatch, patch, asAdmin, `{`, 400, "invalid", ""},
		} {
			t.Run(c.what, func(t *testing.T) {
				checkError(t, w.do(c.method, c.path, c.as, c.body), c.status, c.code, c.field)
			})
		}
		w.unchanged(t, before, "refused user calls")
	})
}
