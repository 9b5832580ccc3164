package api_test

import (
	"net/http"
	"testing"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// The store says "not found" one way (models.ErrNotFound, naming what was missing), and the
// error handler answers it 404 with that name: no handler maps it itself.
func TestNotFoundNamesWhatTheStoreMissed(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		e := owedtest.NewEnv(t, db)
		_, ann := e.User("ann", models.RoleAuthor)
		_, bot := e.User("bot", models.RoleBot)
		for _, c := range []struct {
			method, path, token string
			body                any
			want                string
		}{
			{http.MethodGet, "/api/admin/jobs/999", owedtest.AdminToken, nil, "job not found"},
			{http.MethodPost, "/api/admin/jobs/999/retry", owedtest.AdminToken, nil, "job not found"},
			{http.MethodPost, "/api/listeners/songs/999/revisions", ann, map[string]any{"title": "t", "code": "s()"}, "song not found"},
			{http.MethodPost, "/api/listeners/songs/999/comments", ann, map[string]any{"body": "hi"}, "song not found"},
			{http.MethodDelete, "/api/listeners/comments/999", ann, nil, "comment not found"},
			{http.MethodGet, "/api/songs/999", ann, nil, "song not found"},
			{http.MethodPatch, "/api/admin/users/999", owedtest.AdminToken, map[string]any{"disabled": true}, "user not found"},
			{http.MethodPost, "/api/admin/users/999/token", owedtest.AdminToken, nil, "user not found"},
			{http.MethodPost, "/api/admin/webhooks/999/secret", owedtest.AdminToken, nil, "webhook not found"},
			{http.MethodDelete, "/api/admin/webhooks/999", owedtest.AdminToken, nil, "webhook not found"},
			{http.MethodGet, "/api/scrapes/999", bot, nil, "scrape not found"},
			{http.MethodDelete, "/api/scrapes/999", bot, nil, "scrape not found"},
		} {
			res := e.Do(c.method, c.path, c.token, c.body)
			if res.Status != http.StatusNotFound || res.ErrorCode() != "not_found" {
				t.Errorf("%s %s: %d %s, want 404 not_found", c.method, c.path, res.Status, res.Body)
				continue
			}
			if msg, _ := res.JSON()["error"].(map[string]any)["message"].(string); msg != c.want {
				t.Errorf("%s %s: message %q, want %q", c.method, c.path, msg, c.want)
			}
		}
	})
}
