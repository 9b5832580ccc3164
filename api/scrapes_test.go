package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// sx is a running owed for the scrape and backfill route tests, with a bot and an author,
// media gaps off and the write rate limit off.
type sx struct {
	t      *testing.T
	env    *owedtest.Env
	bot    string
	author string
}

func newSX(t *testing.T, db string, configure ...func(*app.Config)) *sx {
	t.Helper()
	env := owedtest.NewEnv(t, db, append([]func(*app.Config){func(c *app.Config) {
		c.MediaMinGap, c.MediaMaxGap = 0, 0
		c.WriteRate = 0
	}}, configure...)...)
	s := &sx{t: t, env: env}
	_, s.bot = env.User("bo", models.RoleBot)
	_, s.author = env.User("ann", models.RoleAuthor)
	return s
}

func (s *sx) do(method, path, token string, body any, headers ...string) owedtest.Response {
	s.t.Helper()
	return s.env.Do(method, path, token, body, headers...)
}

// create makes a scrape of chat as the bot and returns its id.
func (s *sx) create(chat string) int64 {
	s.t.Helper()
	r := s.do(http.MethodPost, "/api/scrapes", s.bot, map[string]any{"chatId": chat, "guildId": "g-" + chat, "backend": "puppet", "mode": "history"})
	if r.Status != http.StatusCreated {
		s.t.Fatalf("create scrape: %d %s", r.Status, r.Body)
	}
	var out struct{ ID int64 }
	r.Decode(s.t, &out)
	return out.ID
}

func (s *sx) push(id int64, urls ...string) {
	s.t.Helper()
	var rows []map[string]any
	for _, u := range urls {
		rows = append(rows, map[string]any{"url": u, "kind": "image"})
	}
	r := s.do(http.MethodPost, fmt.Sprintf("/api/scrapes/%d/media", id), s.bot, map[string]any{"media": rows})
	if r.Status != http.StatusAccepted {
		s.t.Fatalf("push: %d %s", r.Status, r.Body)
	}
}

func (s *sx) setState(id int64, state string) {
	s.t.Helper()
	if r := s.do(http.MethodPatch, fmt.Sprintf("/api/scrapes/%d", id), s.bot, map[string]any{"state": state}); r.Status != http.StatusOK {
		s.t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
}

// backfillAll starts every chat's backfill (batches of 10, no pause) and runs the queue to its
// end.
func (s *sx) backfillAll() {
	s.t.Helper()
	if r := s.do(http.MethodPut, "/api/backfill/settings", s.env.AdminToken, map[string]any{"batchSize": 10, "batchPauseMs": 0, "auto": false}); r.Status != 200 {
		s.t.Fatalf("settings: %d %s", r.Status, r.Body)
	}
	if r := s.do(http.MethodPost, "/api/backfill/start", s.env.AdminToken, nil); r.Status != 200 {
		s.t.Fatalf("start: %d %s", r.Status, r.Body)
	}
	if err := s.env.App.Backfill.RunQueue(context.Background()); err != nil {
		s.t.Fatal(err)
	}
}

func (s *sx) count(table string) int64 {
	s.t.Helper()
	var n int64
	if err := s.env.App.Store.RawScan(context.Background(), &n, `SELECT COUNT(*) FROM `+table); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// wantError checks the error shape: status, code and the field at fault.
func wantError(t *testing.T, r owedtest.Response, status int, code, field string) {
	t.Helper()
	var e struct {
		Error struct {
			Code, Message string
			Field         *string
		}
	}
	if err := json.Unmarshal(r.Body, &e); err != nil || r.Status != status || e.Error.Code != code || e.Error.Message == "" {
		t.Errorf("answer %d %s, want %d %s", r.Status, r.Body, status, code)
		return
	}
	got := ""
	if e.Error.Field != nil {
		got = *e.Error.Field
	}
	if got != field {
		t.Errorf("error field %q, want %q (%s)", got, field, r.Body)
	}
}

func TestScrapeRoutes(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		s := newSX(t, db)
		r := s.do(http.MethodPost, "/api/scrapes", s.bot, map[string]any{"chatId": "c1", "guildId": "g1", "backend": "slopbot", "mode": "history"})
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		created := r.JSON()
		for k, want := range map[string]any{"state": "active", "chatId": "c1", "guildId": "g1", "backend": "slopbot", "mode": "history", "downloaded": 0.0} {
			if created[k] != want {
				t.Errorf("created %s = %v, want %v", k, created[k], want)
			}
		}
		id := int64(created["id"].(float64))
		if created["pushedAt"] != created["createdAt"] {
			t.Errorf("a new walk holds the lock from its creation: pushedAt %v, createdAt %v", created["pushedAt"], created["createdAt"])
		}

		s.env.Clock.Advance(time.Minute)
		r = s.do(http.MethodPost, fmt.Sprintf("/api/scrapes/%d/media", id), s.bot, map[string]any{"media": []any{
			map[string]any{"url": "https://cdn.example/1.png", "kind": "image", "bytes": 1234},
			map[string]any{"url": "http://cdn.example/2.gif", "kind": "gif"},
			map[string]any{"url": "https://cdn.example/3.mp4", "kind": "video"},
		}})
		if r.Status != http.StatusAccepted || string(bytes.TrimSpace(r.Body)) != `{"accepted":3}` {
			t.Fatalf("push: %d %s", r.Status, r.Body)
		}
		got := s.do(http.MethodGet, fmt.Sprintf("/api/scrapes/%d", id), s.bot, nil).JSON()
		if got["pushedAt"] == got["createdAt"] {
			t.Error("a push did not refresh the scrape's last push")
		}
		counts := got["counts"].(map[string]any)
		if counts["pending"] != 3.0 || counts["total"] != 3.0 || counts["pendingByKind"].(map[string]any)["gif"] != 1.0 {
			t.Errorf("counts = %v", counts)
		}

		r = s.do(http.MethodGet, fmt.Sprintf("/api/scrapes/%d/media?state=pending&limit=2", id), s.bot, nil)
		page := r.JSON()
		rows := page["media"].([]any)
		if r.Status != http.StatusOK || len(rows) != 2 || page["nextCursor"] == nil {
			t.Fatalf("media page: %d %s", r.Status, r.Body)
		}
		first := rows[0].(map[string]any)
		if first["id"] == nil || first["url"] != "https://cdn.example/1.png" || first["bytes"] != 1234.0 || first["state"] != "pending" || first["previewUrl"] != nil {
			t.Errorf("first row = %v", first)
		}
		r = s.do(http.MethodGet, fmt.Sprintf("/api/scrapes/%d/media?state=pending&limit=2&cursor=%s", id, page["nextCursor"]), s.bot, nil)
		if rows := r.JSON()["media"].([]any); len(rows) != 1 || rows[0].(map[string]any)["kind"] != "video" {
			t.Errorf("second page: %s", r.Body)
		}
		if rows := s.do(http.MethodGet, fmt.Sprintf("/api/scrapes/%d/media?state=cached", id), s.bot, nil).JSON()["media"].([]any); len(rows) != 0 {
			t.Errorf("cached rows = %v, want none", rows)
		}

		r = s.do(http.MethodPatch, fmt.Sprintf("/api/scrapes/%d", id), s.bot, map[string]any{"state": "done", "downloaded": 2})
		if got := r.JSON(); r.Status != http.StatusOK || got["state"] != "done" || got["downloaded"] != 2.0 {
			t.Errorf("patch: %d %s", r.Status, r.Body)
		}
		// Back to active: the walk resumes and takes the lock again.
		s.env.Clock.Advance(time.Minute)
		r = s.do(http.MethodPatch, fmt.Sprintf("/api/scrapes/%d", id), s.env.AdminToken, map[string]any{"state": "active"})
		if got := r.JSON(); r.Status != http.StatusOK || got["state"] != "active" || got["pushedAt"] != got["updatedAt"] {
			t.Errorf("patch back to active: %d %s", r.Status, r.Body)
		}

		other := s.create("c2")
		third := s.create("c3")
		r = s.do(http.MethodGet, "/api/scrapes?limit=2", s.bot, nil)
		list1 := r.JSON()
		if n := len(list1["scrapes"].([]any)); n != 2 || list1["nextCursor"] == nil {
			t.Fatalf("list page 1: %s", r.Body)
		}
		r = s.do(http.MethodGet, "/api/scrapes?limit=2&cursor="+list1["nextCursor"].(string), s.bot, nil)
		if rows := r.JSON()["scrapes"].([]any); len(rows) != 1 || int64(rows[0].(map[string]any)["id"].(float64)) != third {
			t.Errorf("list page 2: %s", r.Body)
		}
		if rows := s.do(http.MethodGet, "/api/scrapes?chatId=c2", s.bot, nil).JSON()["scrapes"].([]any); len(rows) != 1 ||
			int64(rows[0].(map[string]any)["id"].(float64)) != other {
			t.Errorf("list by chat: %v", rows)
		}

		r = s.do(http.MethodDelete, fmt.Sprintf("/api/scrapes/%d", id), s.bot, nil)
		if r.Status != http.StatusAccepted || r.JSON()["state"] != "pending-delete" {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		wantError(t, s.do(http.MethodPost, fmt.Sprintf("/api/scrapes/%d/media", id), s.bot, mediaBody(1)), 409, "conflict", "")
		wantError(t, s.do(http.MethodPatch, fmt.Sprintf("/api/scrapes/%d", id), s.bot, map[string]any{"state": "paused"}), 409, "conflict", "")
		if err := s.env.App.Backfill.RunDeletes(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := s.do(http.MethodGet, fmt.Sprintf("/api/scrapes/%d", id), s.bot, nil).JSON(); got["state"] != "deleted" {
			t.Errorf("after the delete: %v", got)
		}
		for _, sc := range s.do(http.MethodGet, "/api/scrapes", s.bot, nil).JSON()["scrapes"].([]any) {
			if int64(sc.(map[string]any)["id"].(float64)) == id {
				t.Error("a deleted scrape is still listed")
			}
		}
		if n := s.count("media"); n != 0 {
			t.Errorf("%d media rows left", n)
		}
	})
}

// A push is all or nothing: any bad row answers 400 naming it, and nothing is written.
func TestPushMediaRefusesBadRows(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		s := newSX(t, db)
		id := s.create("c1")
		good := map[string]any{"url": "https://cdn.example/a.png", "kind": "image"}
		with := func(bad map[string]any) map[string]any {
			return map[string]any{"media": []any{good, good, good, bad, good}}
		}
		var tooMany []any
		for range 1001 {
			tooMany = append(tooMany, good)
		}
		path := fmt.Sprintf("/api/scrapes/%d/media", id)
		for _, c := range []struct {
			name   string
			body   any
			status int
			code   string
			field  string
		}{
			{"no media", map[string]any{}, 400, "invalid", "media"},
			{"an empty list", map[string]any{"media": []any{}}, 400, "invalid", "media"},
			{"1001 rows", map[string]any{"media": tooMany}, 413, "too_large", "media"},
			{"an ftp URL", with(map[string]any{"url": "ftp://cdn.example/a.png", "kind": "image"}), 400, "invalid", "media[3].url"},
			{"a relative URL", with(map[string]any{"url": "/a.png", "kind": "image"}), 400, "invalid", "media[3].url"},
			{"a javascript URL", with(map[string]any{"url": "javascript:alert(1)", "kind": "image"}), 400, "invalid", "media[3].url"},
			{"a URL with a space", with(map[string]any{"url": "https://cdn.example/a b.png", "kind": "image"}), 400, "invalid", "media[3].url"},
			{"a huge URL", with(map[string]any{"url": "https://cdn.example/" + strings.Repeat("a", 5000), "kind": "image"}), 400, "invalid", "media[3].url"},
			{"no URL", with(map[string]any{"kind": "image"}), 400, "invalid", "media[3].url"},
			{"an unknown kind", with(map[string]any{"url": "https://cdn.example/a.pdf", "kind": "document"}), 400, "invalid", "media[3].kind"},
			{"no kind", with(map[string]any{"url": "https://cdn.example/a.png"}), 400, "invalid", "media[3].kind"},
			{"negative bytes", with(map[string]any{"url": "https://cdn.example/a.png", "kind": "image", "bytes": -1}), 400, "invalid", "media[3].bytes"},
		} {
			t.Run(c.name, func(t *testing.T) {
				wantError(t, s.do(http.MethodPost, path, s.bot, c.body), c.status, c.code, c.field)
				if n := s.count("media"); n != 0 {
					t.Errorf("%d rows written", n)
				}
			})
		}
		wantError(t, s.do(http.MethodPost, "/api/scrapes/987654/media", s.bot, map[string]any{"media": []any{good}}), 404, "not_found", "")
		s.push(id, "https://cdn.example/ok.png")
		if n := s.count("media"); n != 1 {
			t.Errorf("%d rows after a good push, want 1", n)
		}
	})
}

func TestScrapeCreateAndPatchRefuseBadInput(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		s := newSX(t, db)
		for _, c := range []struct {
			name  string
			body  any
			field string
		}{
			{"no chatId", map[string]any{"backend": "puppet", "mode": "history"}, "chatId"},
			{"a blank chatId", map[string]any{"chatId": " ", "backend": "puppet", "mode": "history"}, "chatId"},
			{"a long chatId", map[string]any{"chatId": strings.Repeat("9", 101), "backend": "puppet", "mode": "history"}, "chatId"},
			{"a numeric chatId", map[string]any{"chatId": 5, "backend": "puppet", "mode": "history"}, "chatId"},
			{"a control character", map[string]any{"chatId": "a\nb", "backend": "puppet", "mode": "history"}, "chatId"},
			{"a blank guildId", map[string]any{"chatId": "c", "guildId": "", "backend": "puppet", "mode": "history"}, "guildId"},
			{"no backend", map[string]any{"chatId": "c", "mode": "history"}, "backend"},
			{"a bad backend", map[string]any{"chatId": "c", "backend": "Pup pet", "mode": "history"}, "backend"},
			{"no mode", map[string]any{"chatId": "c", "backend": "puppet"}, "mode"},
		} {
			t.Run(c.name, func(t *testing.T) {
				wantError(t, s.do(http.MethodPost, "/api/scrapes", s.bot, c.body), 400, "invalid", c.field)
				if n := s.count("scrapes"); n != 0 {
					t.Errorf("%d scrapes written", n)
				}
			})
		}
		id := s.create("c1")
		before := s.do(http.MethodGet, fmt.Sprintf("/api/scrapes/%d", id), s.bot, nil).Body
		for _, c := range []struct {
			name  string
			body  any
			field string
		}{
			{"nothing to change", map[string]any{}, "state"},
			{"a delete state", map[string]any{"state": "deleted"}, "state"},
			{"an unknown state", map[string]any{"state": "walking"}, "state"},
			{"a negative downloaded", map[string]any{"downloaded": -1}, "downloaded"},
			{"a fractional downloaded", map[string]any{"downloaded": 1.5}, "downloaded"},
		} {
			t.Run(c.name, func(t *testing.T) {
				wantError(t, s.do(http.MethodPatch, fmt.Sprintf("/api/scrapes/%d", id), s.bot, c.body), 400, "invalid", c.field)
			})
		}
		if after := s.do(http.MethodGet, fmt.Sprintf("/api/scrapes/%d", id), s.bot, nil).Body; !bytes.Equal(before, after) {
			t.Errorf("refused patches changed the scrape:\n%s\n%s", before, after)
		}
		wantError(t, s.do(http.MethodPatch, "/api/scrapes/987654", s.bot, map[string]any{"state": "done"}), 404, "not_found", "")
		wantError(t, s.do(http.MethodDelete, "/api/scrapes/987654", s.bot, nil), 404, "not_found", "")
		wantError(t, s.do(http.MethodGet, "/api/scrapes/987654/media", s.bot, nil), 404, "not_found", "")
		wantError(t, s.do(http.MethodGet, "/api/scrapes?state=deleted", s.bot, nil), 400, "invalid", "state")
		wantError(t, s.do(http.MethodGet, fmt.Sprintf("/api/scrapes/%d/media?state=lost", id), s.bot, nil), 400, "invalid", "state")
	})
}

// Scrapes are the bot's and the admin's; the backfill is the admin's.
func TestScrapeAndBackfillRoutesAuthorisation(t *testing.T) {
	t.Parallel()
	s := newSX(t, "sqlite:"+t.TempDir()+"/owed.db")
	id := s.create("c1")
	for _, c := range []struct{ method, path, roles string }{
		{http.MethodGet, "/api/scrapes", "bot admin"},
		{http.MethodGet, fmt.Sprintf("/api/scrapes/%d", id), "bot admin"},
		{http.MethodGet, fmt.Sprintf("/api/scrapes/%d/media", id), "bot admin"},
		{http.MethodGet, "/api/backfill", "admin"},
		{http.MethodGet, "/api/backfill/settings", "admin"},
	} {
		for _, as := range []struct{ name, token string }{{"anonymous", ""}, {"author", s.author}, {"bot", s.bot}, {"admin", s.env.AdminToken}} {
			r := s.do(c.method, c.path, as.token, nil)
			switch {
			case as.token == "":
				wantError(t, r, 401, "unauthorized", "")
			case !strings.Contains(c.roles, as.name):
				wantError(t, r, 403, "forbidden", "")
			case r.Status != http.StatusOK:
				t.Errorf("%s %s as %s: %d %s", c.method, c.path, as.name, r.Status, r.Body)
			}
		}
	}
	before := s.count("scrapes")
	wantError(t, s.do(http.MethodPost, "/api/scrapes", "", scrapeBody()), 401, "unauthorized", "")
	wantError(t, s.do(http.MethodPost, "/api/scrapes", s.author, scrapeBody()), 403, "forbidden", "")
	wantError(t, s.do(http.MethodPost, "/api/backfill/start", s.bot, nil), 403, "forbidden", "")
	wantError(t, s.do(http.MethodPut, "/api/backfill/settings", s.bot, map[string]any{"batchSize": 1, "batchPauseMs": 0, "auto": true}), 403, "forbidden", "")
	if s.count("scrapes") != before || s.count("backfill_jobs") != 0 {
		t.Error("a refused call wrote")
	}
}

// The preview route serves the cached JPEG of a row (found by the row's id alone), and 404
// for anything not cached.
func TestMediaPreviewServesTheCachedJPEG(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		s := newSX(t, db, allowPrivateMedia) // the CDN is on loopback
		img := image.NewRGBA(image.Rect(0, 0, 40, 30))
		for i := range img.Pix {
			img.Pix[i] = 200
		}
		var pngData bytes.Buffer
		png.Encode(&pngData, img)
		cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/ok.png" {
				w.Write(pngData.Bytes())
				return
			}
			w.WriteHeader(http.StatusInternalServerError)
		}))
		defer cdn.Close()
		id := s.create("c1")
		s.push(id, cdn.URL+"/ok.png")
		r := s.do(http.MethodPost, fmt.Sprintf("/api/scrapes/%d/media", id), s.bot, map[string]any{"media": []any{
			map[string]any{"url": cdn.URL + "/clip.mp4", "kind": "video"}}})
		if r.Status != http.StatusAccepted {
			t.Fatalf("push: %d %s", r.Status, r.Body)
		}
		s.setState(id, "done")
		s.backfillAll()
		var rows []map[string]any
		for _, m := range s.do(http.MethodGet, fmt.Sprintf("/api/scrapes/%d/media", id), s.bot, nil).JSON()["media"].([]any) {
			rows = append(rows, m.(map[string]any))
		}
		var cached, other map[string]any
		for _, m := range rows {
			if m["state"] == "cached" {
				cached = m
			} else {
				other = m
			}
		}
		if cached == nil || other == nil {
			t.Fatalf("rows = %v, want one cached and one not", rows)
		}
		r = s.do(http.MethodGet, cached["previewUrl"].(string), s.bot, nil)
		if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "image/jpeg" {
			t.Fatalf("preview: %d %s %q", r.Status, r.Header.Get("Content-Type"), r.Body)
		}
		thumb, err := jpeg.Decode(bytes.NewReader(r.Body))
		if err != nil || thumb.Bounds().Dx() != 40 {
			t.Errorf("preview is not the JPEG thumbnail: %v %v", err, thumb)
		}
		if int64(len(r.Body)) != int64(cached["storedBytes"].(float64)) {
			t.Errorf("preview of %d bytes, row says %v", len(r.Body), cached["storedBytes"])
		}
		wantError(t, s.do(http.MethodGet, fmt.Sprintf("/api/media/%d/preview", int64(other["id"].(float64))), s.bot, nil), 404, "not_found", "")
		wantError(t, s.do(http.MethodGet, "/api/media/987654/preview", s.env.AdminToken, nil), 404, "not_found", "")
		wantError(t, s.do(http.MethodGet, cached["previewUrl"].(string), s.author, nil), 403, "forbidden", "")
		wantError(t, s.do(http.MethodGet, cached["previewUrl"].(string), "", nil), 401, "unauthorized", "")
		wantError(t, s.do(http.MethodGet, "/api/media/..%2f..%2fowed.db/preview", s.bot, nil), 404, "not_found", "")
	})
}
