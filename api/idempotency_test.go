package api_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// count counts rows of the store's database.
func count(t *testing.T, s *models.Store, q string, args ...any) int {
	t.Helper()
	return int(owedtest.Count(t, s, q, args...))
}

// Two replicas on one database: a key's answer is the caller's, kept once, replayed by either.
func TestIdempotencyKeyOnTwoReplicas(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		a := owedtest.NewEnv(t, db)
		b := owedtest.NewEnv(t, db, func(c *app.Config) { c.AdminToken = owedtest.AdminToken })
		store := a.App.Store
		_, ann := a.User("ann", models.RoleAuthor)
		_, ben := a.User("ben", models.RoleAuthor)
		pitches := func() int { return count(t, store, `SELECT COUNT(*) FROM pitches`) }

		// The first answer, then the same request on the other replica: the same answer, replayed.
		first := a.Do(http.MethodPost, "/api/listeners/pitches", ann, map[string]string{"body": "a pitch"}, "Idempotency-Key", "k-1")
		if first.Status != http.StatusCreated || first.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("first: %d %s %v", first.Status, first.Body, first.Header)
		}
		again := b.Do(http.MethodPost, "/api/listeners/pitches", ann, map[string]string{"body": "a pitch"}, "Idempotency-Key", "k-1")
		if again.Status != http.StatusCreated || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
			t.Fatalf("replay: %d %s %v; first %s", again.Status, again.Body, again.Header, first.Body)
		}
		if !strings.HasPrefix(again.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("replay's content type: %q", again.Header.Get("Content-Type"))
		}
		if n := pitches(); n != 1 {
			t.Fatalf("%d pitches after a replay, want 1", n)
		}
		// The same JSON written otherwise (whitespace, escapes) is the same request: a replay.
		for _, body := range []string{"{ \"body\" :\n\t\"a pitch\" }", `{"body":"a\u0020pitch"}`} {
			if r := b.Do(http.MethodPost, "/api/listeners/pitches", ann, body, "Idempotency-Key", "k-1"); r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("the same JSON %q: %d %s", body, r.Status, r.Body)
			}
		}
		// ... and in another key order.
		song := a.Do(http.MethodPost, "/api/listeners/songs", ann, `{"title":"t","code":"x"}`, "Idempotency-Key", "k-order")
		if r := b.Do(http.MethodPost, "/api/listeners/songs", ann, `{"code":"x","title":"t"}`, "Idempotency-Key", "k-order"); song.Status != http.StatusCreated ||
			r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "true" || string(r.Body) != string(song.Body) {
			t.Fatalf("the same JSON in another key order: %d %s, first %d %s", r.Status, r.Body, song.Status, song.Body)
		}
		// The same key with another body: 422, nothing written.
		other := b.Do(http.MethodPost, "/api/listeners/pitches", ann, map[string]string{"body": "another pitch"}, "Idempotency-Key", "k-1")
		if other.Status != http.StatusUnprocessableEntity || other.ErrorCode() != "idempotency_mismatch" {
			t.Fatalf("mismatch: %d %s", other.Status, other.Body)
		}
		// ... or another route.
		other = a.Do(http.MethodPost, "/api/listeners/songs", ann, map[string]string{"title": "t", "code": "x"}, "Idempotency-Key", "k-1")
		if other.Status != http.StatusUnprocessableEntity || other.ErrorCode() != "idempotency_mismatch" {
			t.Fatalf("mismatch on another route: %d %s", other.Status, other.Body)
		}
		// Keys are per user: ben's k-1 is his own.
		if r := b.Do(http.MethodPost, "/api/listeners/pitches", ben, map[string]string{"body": "a pitch"}, "Idempotency-Key", "k-1"); r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("another user's key: %d %s", r.Status, r.Body)
		}
		if n := pitches(); n != 2 {
			t.Fatalf("%d pitches, want 2", n)
		}

		// A bad key: 400 naming the header, nothing written.
		for _, k := range []string{strings.Repeat("k", 256), "tab\there", "ünï"} {
			r := a.Do(http.MethodPost, "/api/listeners/pitches", ann, map[string]string{"body": "bad key"}, "Idempotency-Key", k)
			if r.Status != http.StatusBadRequest || r.ErrorCode() != "invalid" {
				t.Fatalf("key %q: %d %s", k, r.Status, r.Body)
			}
		}
		if n := pitches(); n != 2 {
			t.Fatalf("bad keys wrote: %d pitches", n)
		}
		// 255 characters is a key; so is a structured-field string.
		if r := a.Do(http.MethodPost, "/api/listeners/pitches", ann, map[string]string{"body": "long key"}, "Idempotency-Key", strings.Repeat("k", 255)); r.Status != http.StatusCreated {
			t.Fatalf("255-character key: %d %s", r.Status, r.Body)
		}

		// A first request that failed wrote nothing and keeps nothing: its repeat runs.
		if r := a.Do(http.MethodPost, "/api/listeners/pitches", ann, map[string]string{"body": " "}, "Idempotency-Key", "k-2"); r.Status != http.StatusBadRequest {
			t.Fatalf("blank pitch: %d %s", r.Status, r.Body)
		}
		if r := b.Do(http.MethodPost, "/api/listeners/pitches", ann, map[string]string{"body": "now right"}, "Idempotency-Key", "k-2"); r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("after a failed first: %d %s", r.Status, r.Body)
		}

		// DELETE: replayed as 204.
		var p struct{ Pitch struct{ ID int64 } }
		first.Decode(t, &p)
		path := "/api/listeners/pitches/" + itoa64(p.Pitch.ID)
		if r := a.Do(http.MethodDelete, path, ann, nil, "Idempotency-Key", "d-1"); r.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if r := b.Do(http.MethodDelete, path, ann, nil, "Idempotency-Key", "d-1"); r.Status != http.StatusNoContent || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("delete replayed: %d %s %v", r.Status, r.Body, r.Header)
		}
		if r := b.Do(http.MethodDelete, path, ann, nil); r.Status != http.StatusNotFound {
			t.Fatalf("delete without a key after it: %d", r.Status)
		}

		// Admin writes too; an answer that shows a secret once is not kept, nor shown again.
		users := count(t, store, `SELECT COUNT(*) FROM users`)
		mk := map[string]string{"name": "cat", "role": "author"}
		if r := a.Do(http.MethodPost, "/api/admin/users", a.AdminToken, mk, "Idempotency-Key", "u-1"); r.Status != http.StatusCreated {
			t.Fatalf("create user: %d %s", r.Status, r.Body)
		}
		r := b.Do(http.MethodPost, "/api/admin/users", a.AdminToken, mk, "Idempotency-Key", "u-1")
		if r.Status != http.StatusConflict || r.ErrorCode() != "idempotency_answer_not_kept" || strings.Contains(string(r.Body), "owed_") {
			t.Fatalf("create user again: %d %s", r.Status, r.Body)
		}
		if n := count(t, store, `SELECT COUNT(*) FROM users`); n != users+1 {
			t.Fatalf("%d users, want %d", n, users+1)
		}
		if n := count(t, store, `SELECT COUNT(*) FROM idempotency_keys WHERE answer IS NOT NULL AND status = 0`); n != 0 {
			t.Fatalf("%d secret answers kept", n)
		}
		hold := map[string]any{"screen": true}
		h1 := a.Do(http.MethodPut, "/api/admin/holds", a.AdminToken, hold, "Idempotency-Key", "h-1")
		h2 := b.Do(http.MethodPut, "/api/admin/holds", a.AdminToken, hold, "Idempotency-Key", "h-1")
		if h1.Status != http.StatusOK || h2.Status != http.StatusOK || h2.Header.Get("Idempotent-Replayed") != "true" || string(h1.Body) != string(h2.Body) {
			t.Fatalf("holds: %d %s / %d %s", h1.Status, h1.Body, h2.Status, h2.Body)
		}
		a.Do(http.MethodPut, "/api/admin/holds", a.AdminToken, map[string]any{"screen": false})

		// In flight: while the first request waits for its inline screen, a repeat on the other
		// replica is told so, and nothing is written twice.
		a.Model.Delay(1500 * time.Millisecond)
		var wg sync.WaitGroup
		var slow owedtest.Response
		wg.Add(1)
		go func() {
			defer wg.Done()
			slow = a.Do(http.MethodPost, "/api/listeners/pitches", ann, map[string]string{"body": "slow"}, "Idempotency-Key", "k-3")
		}()
		wait.Until(t, "the first request's write", func() bool {
			return count(t, store, `SELECT COUNT(*) FROM pitches WHERE body = 'slow'`) > 0
		})
		r = b.Do(http.MethodPost, "/api/listeners/pitches", ann, map[string]string{"body": "slow"}, "Idempotency-Key", "k-3")
		if r.Status != http.StatusConflict || r.ErrorCode() != "idempotency_in_flight" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("in flight: %d %s", r.Status, r.Body)
		}
		wg.Wait()
		if slow.Status != http.StatusCreated {
			t.Fatalf("slow: %d %s", slow.Status, slow.Body)
		}
		r = b.Do(http.MethodPost, "/api/listeners/pitches", ann, map[string]string{"body": "slow"}, "Idempotency-Key", "k-3")
		if r.Status != http.StatusCreated || string(r.Body) != string(slow.Body) || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("after the first: %d %s, first %s", r.Status, r.Body, slow.Body)
		}
		if n := count(t, store, `SELECT COUNT(*) FROM pitches WHERE body = 'slow'`); n != 1 {
			t.Fatalf("%d slow pitches", n)
		}
		a.Model.Delay(0)

		// Past the TTL a key is forgotten: the same request runs again; the pruner removes it.
		a.Clock.Advance(app.Defaults().IdempotencyTTL + time.Minute)
		r = a.Do(http.MethodPost, "/api/listeners/pitches", ann, map[string]string{"body": "a pitch"}, "Idempotency-Key", "k-1")
		if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("past the TTL: %d %s", r.Status, r.Body)
		}
		before := count(t, store, `SELECT COUNT(*) FROM idempotency_keys`)
		pruned, err := store.Prune(context.Background(), a.Clock.Now(), models.Retention{Idempotency: app.Defaults().IdempotencyTTL}, 0)
		if err != nil {
			t.Fatal(err)
		}
		after := count(t, store, `SELECT COUNT(*) FROM idempotency_keys`)
		if pruned.IdempotencyKeys == 0 || after != before-int(pruned.IdempotencyKeys) || after != 1 {
			t.Fatalf("pruned %d of %d keys, %d left; want all but the fresh one", pruned.IdempotencyKeys, before, after)
		}
	})
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
