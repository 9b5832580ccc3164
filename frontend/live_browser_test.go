package frontend_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// TestLiveFromAnotherOrigin: the example page of docs/live.md, served from a second origin
// listed in OWED_CORS_ORIGINS, follows its author's view through EventSource with a ticket and
// through a fetch long poll: it gets the view at once and each change after. The same page
// from an origin not listed gets nothing.
func TestLiveFromAnotherOrigin(t *testing.T) {
	exe := chromiumPath(t)
	page, err := os.ReadFile("../docs/examples/live.html")
	if err != nil {
		t.Fatal(err)
	}
	serve := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	}
	site := httptest.NewServer(http.HandlerFunc(serve))
	defer site.Close()
	other := httptest.NewServer(http.HandlerFunc(serve))
	defer other.Close()

	env := owedtest.NewEnv(t, "", func(c *app.Config) { c.CORSOrigins = site.URL })
	_, token := env.User("ann", models.RoleAuthor)
	// No background work: each write is one change of the view, and nothing changes it after.
	if err := env.App.Content.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	pitch := func(body string) {
		t.Helper()
		if r := env.Do(http.MethodPost, "/api/listeners/pitches", token, map[string]string{"body": body}); r.Status != http.StatusCreated {
			t.Fatalf("pitch: %d %s", r.Status, r.Body)
		}
	}
	pitch("a first pitch")
	fragment := "#owed=" + env.Server.URL + "&token=" + token

	b := newBrowser(t, exe, site.URL, 0)
	t.Cleanup(b.checkProblems)
	b.do(t, "open the page on the listed origin", chromedp.Navigate(site.URL+"/live.html"+fragment))
	b.waitJS(t, "the stream's first event and the long poll's first view",
		`window.owedLive && owedLive.stream.length >= 1 && owedLive.poll.length >= 1`)
	b.waitJS(t, "the long poll held", `document.getElementById("poll-state").textContent === "following"`)
	streamSeen := eval[int](t, b, `owedLive.stream.length`)
	pollSeen := eval[int](t, b, `owedLive.poll.length`)
	pitch("a second pitch")
	b.waitJS(t, "the change through the stream and the long poll",
		`owedLive.stream.length > `+itoa(streamSeen)+` && owedLive.poll.length > `+itoa(pollSeen))
	now := env.Do(http.MethodGet, "/api/listeners/mine", token, nil).Header.Get("ETag")
	if s, p := eval[string](t, b, `owedLive.stream[owedLive.stream.length-1]`), eval[string](t, b, `owedLive.poll[owedLive.poll.length-1]`); s != now || p != now {
		t.Errorf("the stream is at %s and the long poll at %s; the view is at %s", s, p, now)
	}
	if n := eval[int](t, b, `document.querySelectorAll("#items tr").length`); n != 2 {
		t.Errorf("the page shows %d items, want 2", n)
	}
	if errs := eval[[]string](t, b, `owedLive.errors`); len(errs) != 0 {
		t.Errorf("errors on the listed origin: %v", errs)
	}

	// An origin not listed: the browser hands the page nothing.
	nb := newBrowser(t, exe, other.URL, 0)
	nb.do(t, "open the page on an unlisted origin", chromedp.Navigate(other.URL+"/live.html"+fragment))
	nb.waitJS(t, "the ticket and the long poll refused", `window.owedLive && owedLive.errors.some(e => e.startsWith("ticket")) && owedLive.errors.some(e => e.startsWith("poll"))`)
	if n := eval[int](t, nb, `owedLive.stream.length + owedLive.poll.length`); n != 0 {
		t.Errorf("the unlisted origin got %d views", n)
	}
}

func itoa(n int) string {
	s := ""
	if n == 0 {
		return "0"
	}
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}
