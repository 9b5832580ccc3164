package api_test

import (
	"fmt"
	"image"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/owed/owed/app"
	"github.com/owed/owed/owedtest"
)

// allowPrivateMedia turns OWED_MEDIA_ALLOW_PRIVATE on, for tests whose CDN is on loopback.
func allowPrivateMedia(c *app.Config) { c.MediaAllowPrivate = true }

// TestPushRefusesNonPublicMediaAddresses: a media URL whose host is written as a loopback,
// private or otherwise non-public address is refused at the push with a 400 naming the row,
// and nothing of the push is kept; with OWED_MEDIA_ALLOW_PRIVATE on it is accepted. A name is
// accepted: where it leads is judged when it is fetched.
func TestPushRefusesNonPublicMediaAddresses(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		s := newSX(t, db)
		id := s.create("c1")
		for _, u := range []string{"http://127.0.0.1:8080/a.png", "http://[::1]/a.png", "http://10.0.0.7/a.png",
			"http://169.254.169.254/latest/meta-data", "http://[64:ff9b::7f00:1]/a.png", "http://[2002:7f00:1::1]/a.png",
			"http://[::7f00:1]/a.png", "http://0.1.2.3/a.png", "http://198.18.0.1/a.png", "http://240.0.0.1/a.png",
			"http://255.255.255.255/a.png", "http://[fec0::1]/a.png", "http://[::ffff:127.0.0.1]/a.png"} {
			r := s.do(http.MethodPost, fmt.Sprintf("/api/scrapes/%d/media", id), s.bot, map[string]any{"media": []any{
				map[string]any{"url": "https://cdn.example/ok.png", "kind": "image"},
				map[string]any{"url": u, "kind": "image"}}})
			checkError(t, r, http.StatusBadRequest, "invalid", "media[1].url")
			if !strings.Contains(string(r.Body), "OWED_MEDIA_ALLOW_PRIVATE") {
				t.Errorf("%s: the refusal does not name the setting: %s", u, r.Body)
			}
		}
		r := s.do(http.MethodPost, fmt.Sprintf("/api/scrapes/%d/media", id), s.bot, map[string]any{"media": []any{
			map[string]any{"url": "ftp://cdn.example/a.png", "kind": "image"}}})
		checkError(t, r, http.StatusBadRequest, "invalid", "media[0].url")
		if n := s.do(http.MethodGet, fmt.Sprintf("/api/scrapes/%d", id), s.bot, nil).JSON()["counts"].(map[string]any)["total"]; n != 0.0 {
			t.Fatalf("%v rows kept from refused pushes", n)
		}
		s.push(id, "https://cdn.example/a.png", "http://localhost:8080/a.png", "https://93.184.215.14/a.png")

		open := newSX(t, db, allowPrivateMedia)
		open.push(open.create("c2"), "http://127.0.0.1:8080/a.png", "http://[::1]/a.png", "http://10.0.0.7/a.png")
	})
}

// TestBackfillNeverFetchesInternalMedia (issue 12, row 1): a bot pushes media rows whose host
// name resolves to loopback (which the push cannot see), and the backfill runs: each row ends
// failed, an open port like a closed one, and the internal server gets no request. (Redirects
// into the inside are refused at the hop: media.TestRedirectToLoopbackFails.)
func TestBackfillNeverFetchesInternalMedia(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		var hits atomic.Int64
		inside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			png.Encode(w, image.NewGray(image.Rect(0, 0, 8, 8)))
		}))
		defer inside.Close()
		port := inside.Listener.Addr().(*net.TCPAddr).Port
		closed := httptest.NewServer(http.NotFoundHandler())
		closedPort := closed.Listener.Addr().(*net.TCPAddr).Port
		closed.Close()

		s := newSX(t, db)
		id := s.create("c1")
		s.push(id, fmt.Sprintf("http://localhost:%d/secret.png", port), fmt.Sprintf("http://localhost:%d/secret.png", closedPort))
		s.setState(id, "done")
		s.backfillAll()
		rows := s.do(http.MethodGet, fmt.Sprintf("/api/scrapes/%d/media", id), s.bot, nil).JSON()["media"].([]any)
		if len(rows) != 2 {
			t.Fatalf("%d rows", len(rows))
		}
		for _, m := range rows {
			if st := m.(map[string]any)["state"]; st != "failed" {
				t.Errorf("row %v: state %v, want failed (an open port and a closed one alike)", m.(map[string]any)["url"], st)
			}
		}
		if n := hits.Load(); n != 0 {
			t.Fatalf("the internal server got %d requests", n)
		}
	})
}
