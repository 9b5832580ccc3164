package frontend_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/scheduler"
)

// world is a real owed (SQLite, fake clock, fake model) seeded with data for every panel of
// the admin SPA: authors with allowed, blocked and pending items (why upstream, unreachable,
// unanswered and budget), attempt events spread over the last hour, budgets, webhooks with
// delivered, retried and cancelled deliveries, and backfill jobs in every state a seeded
// server can show (done with a measured rate, paused under a rate limit, idle, and a walk
// holding the media-traffic lock).
type world struct {
	t       *testing.T
	env     *owedtest.Env
	sweeper *scheduler.Content

	users map[string]int64  // name → id
	toks  map[string]string // name → token

	// Jobs by what they wait for: one of each kind the tests look for.
	upstreamJob int64
	budgetJob   int64

	hooks    map[string]int64 // "all", "screens", "dead" → webhook id
	receiver *hookReceiver

	// offset is the fake clock minus the wall clock once seeding ends; a goroutine keeps the
	// fake clock that far ahead of the wall clock from then on, and the browser's Date is
	// shifted by the same amount, so "in 3m" means the same on both sides.
	offset time.Duration
}

func seedWorld(t *testing.T) *world {
	t.Helper()
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db", func(c *app.Config) {
		c.WebhooksAllowPrivate = true
		c.MediaAllowPrivate = true // the CDN is on loopback
		// The seeding runs the backfill without gaps; realistic gaps are set afterwards so the
		// panel shows a realistic estimate.
		c.MediaMinGap, c.MediaMaxGap = 0, 0
	})
	w := &world{t: t, env: env, users: map[string]int64{}, toks: map[string]string{}, hooks: map[string]int64{}}

	// Quiet: the app's own background work (inline screens, scores after a write) is stopped,
	// and the seeding settles the owed work with a runner of its own when it says so.
	w.sweeper = env.Quiet()

	for _, u := range []struct {
		name string
		role models.Role
	}{
		{"ada", models.RoleAuthor}, {"bo", models.RoleAuthor}, {"cy", models.RoleAuthor}, {"dee", models.RoleAuthor},
		{"archiver", models.RoleBot},
	} {
		w.users[u.name], w.toks[u.name] = env.User(u.name, u.role)
	}
	w.ok(env.Do(http.MethodPut, fmt.Sprintf("/api/admin/users/%d/budget", w.users["bo"]), owedtest.AdminToken,
		map[string]any{"dailyLimit": 4}), http.StatusOK, "bo's budget")
	w.ok(env.Do(http.MethodPut, fmt.Sprintf("/api/admin/users/%d/budget", w.users["dee"]), owedtest.AdminToken,
		map[string]any{"dailyLimit": 150}), http.StatusOK, "dee's budget")

	w.seedWebhooks()
	w.seedContent()
	w.seedBackfill()
	w.deliver()
	// The dead receiver's subscription is disabled: its pending deliveries end cancelled.
	w.ok(env.Do(http.MethodPatch, fmt.Sprintf("/api/admin/webhooks/%d", w.hooks["dead"]), owedtest.AdminToken,
		map[string]any{"active": false}), http.StatusOK, "disable the dead webhook")

	// From now on the fake clock runs at the wall clock's pace, offset ahead of it.
	w.offset = time.Until(env.Clock.Now())
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if now := time.Now().Add(w.offset); now.After(env.Clock.Now()) {
					env.Clock.Set(now)
				}
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return w
}

func (w *world) ok(r owedtest.Response, status int, what string) owedtest.Response {
	w.t.Helper()
	if r.Status != status {
		w.t.Fatalf("%s: %d %s", what, r.Status, r.Body)
	}
	return r
}

// sweep runs every due job now with the seeding's runner, until nothing is due.
func (w *world) sweep() {
	w.t.Helper()
	for range 5 {
		n, err := w.sweeper.Sweep(context.Background(), 0)
		if err != nil {
			w.t.Fatalf("sweep: %v", err)
		}
		if n == 0 {
			return
		}
	}
}

// deliver runs webhook delivery passes as the app's loop does.
func (w *world) deliver() {
	w.t.Helper()
	if _, err := w.env.App.Webhooks.RunDue(context.Background()); err != nil {
		w.t.Fatalf("deliver: %v", err)
	}
}

func (w *world) post(who, path string, body any) map[string]any {
	w.t.Helper()
	return w.ok(w.env.Do(http.MethodPost, path, w.toks[who], body), http.StatusCreated, "POST "+path).JSON()
}

var songTitles = []string{"Tide", "Low Sun", "Paper Boats", "Static Bloom", "Night Bus", "Glass Orchard", "Ferrous",
	"Quiet Engines", "Salt Lines", "Northbound", "Moth Light", "Dry Season", "Copper Rain", "Long Division"}

// seedContent writes items minute by minute over the first 40 minutes of the hour, sweeping
// as it goes, so the overview's chart has a shape; then leaves jobs pending for each why.
func (w *world) seedContent() {
	env := w.env
	authors := []string{"ada", "cy", "dee"}
	n := 0
	var public []int64
	for minute := range 40 {
		if minute%3 == 1 {
			env.Clock.Advance(time.Minute)
			continue
		}
		// Some minutes are busy, most are not.
		items := 1 + (minute*7)%4
		if minute%9 == 0 {
			items += 3
		}
		block := minute%8 == 5
		if block {
			env.Model.SetVerdict("block", 0.97)
		}
		for i := range items {
			who := authors[(minute+i)%len(authors)]
			switch (minute + i) % 4 {
			case 0, 1:
				song := w.post(who, "/api/listeners/songs", map[string]string{"title": songTitles[n%len(songTitles)], "code": fmt.Sprintf(`s("bd*%d sd")`, n%7+1)})
				if !block {
					public = append(public, int64(song["song"].(map[string]any)["id"].(float64)))
				}
			case 2:
				w.post(who, "/api/listeners/pitches", map[string]string{"body": "a remix contest for " + songTitles[n%len(songTitles)]})
			case 3:
				w.post(who, "/api/listeners/pitches", map[string]string{"body": "collab wanted: drums"})
			}
			n++
		}
		w.sweep()
		if block {
			env.Model.SetVerdict("allow", 0.93)
		}
		// Listeners comment on songs once they are public.
		if minute%5 == 0 && len(public) > 0 && env.Do(http.MethodGet, fmt.Sprintf("/api/songs/%d", public[len(public)-1]), "", nil).Status == http.StatusOK {
			w.post(authors[(minute+1)%3], fmt.Sprintf("/api/listeners/songs/%d/comments", public[len(public)-1]),
				map[string]string{"body": "the hats on the bridge are great"})
			w.sweep()
		}
		w.deliver()
		env.Clock.Advance(time.Minute)
	}

	// Six minutes on, deliveries that failed twice get their third attempt (5 s, then 5 min).
	env.Clock.Advance(6 * time.Minute)
	w.deliver()

	// bo's budget is 4 calls a day: two screens (1 each) pass, then each score (3) is refused
	// whole and waits for the reset at 00:00 UTC. The screens run with a limit of 2, so that
	// whichever order the sweep's goroutines take (one song's score may be claimed before the
	// other's screen is charged), no score fits; then the limit is 4 again.
	setLimit := func(n int) {
		w.ok(env.Do(http.MethodPut, fmt.Sprintf("/api/admin/users/%d/budget", w.users["bo"]), owedtest.AdminToken,
			map[string]any{"dailyLimit": n}), http.StatusOK, "bo's budget")
	}
	setLimit(2)
	w.post("bo", "/api/listeners/songs", map[string]string{"title": "Budget Blues", "code": `s("bd bd")`})
	w.post("bo", "/api/listeners/songs", map[string]string{"title": "Overdraft", "code": `s("hh*8")`})
	w.sweep()
	w.sweep()
	setLimit(4)
	jobs, err := owedtest.ListJobs(context.Background(), env.App.Store, models.JobFilter{UserID: w.users["bo"], Why: models.WhyBudget}, 0, 10)
	if err != nil || len(jobs) == 0 {
		w.t.Fatalf("bo's budget jobs: %v %v", jobs, err)
	}
	w.budgetJob = jobs[0].ID
	env.Clock.Advance(time.Minute)

	// The model answers 503 for a while, asking for 20 minutes: these jobs wait as upstream.
	env.Model.Fail(http.StatusServiceUnavailable, map[string]string{"Retry-After": "1200"})
	w.post("cy", "/api/listeners/pitches", map[string]string{"body": "live session next friday?"})
	w.post("dee", "/api/listeners/songs", map[string]string{"title": "Outage", "code": `s("bd ~ sd ~")`})
	w.post("ada", "/api/listeners/pitches", map[string]string{"body": "looking for a vocalist"})
	w.sweep()
	env.Clock.Advance(2 * time.Minute)
	env.Model.Reset()
	jobs, err = owedtest.ListJobs(context.Background(), env.App.Store, models.JobFilter{Why: models.WhyUpstream}, 0, 10)
	if err != nil || len(jobs) < 3 {
		w.t.Fatalf("upstream jobs: %v %v", jobs, err)
	}
	w.upstreamJob = jobs[0].ID

	// A network failure (unreachable) and an answer that is not the expected JSON (unanswered).
	env.Model.DropConnections()
	w.post("dee", "/api/listeners/pitches", map[string]string{"body": "anyone up for a jam?"})
	w.sweep()
	env.Model.Reset()
	env.Model.Garbage()
	w.post("cy", "/api/listeners/pitches", map[string]string{"body": "new sample pack out"})
	w.sweep()
	env.Model.Reset()
	env.Clock.Advance(time.Minute)
	w.deliver()
}

// hookReceiver answers webhooks: /all takes everything; /screens fails some messages once or
// twice (by their webhook-id) before taking them; /new takes everything.
type hookReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	tries map[string]int // attempts by path and webhook-id
	order map[string]int // /screens messages in the order they first arrived
}

func (w *world) seedWebhooks() {
	r := &hookReceiver{tries: map[string]int{}, order: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		id := req.Header.Get("webhook-id")
		r.mu.Lock()
		r.tries[req.URL.Path+" "+id]++
		try := r.tries[req.URL.Path+" "+id]
		r.mu.Unlock()
		if req.URL.Path == "/screens" {
			// The n-th message fails n%3 times before it is taken.
			r.mu.Lock()
			n, seen := r.order[id]
			if !seen {
				n = len(r.order)
				r.order[id] = n
			}
			r.mu.Unlock()
			if try <= n%3 {
				if try == 1 {
					rw.WriteHeader(http.StatusServiceUnavailable)
				} else {
					rw.WriteHeader(http.StatusInternalServerError)
				}
				return
			}
		}
		rw.WriteHeader(http.StatusNoContent)
	}))
	w.t.Cleanup(r.Close)
	w.receiver = r

	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/hooks/owed"
	dead.Close() // connection refused from now on

	for _, h := range []struct {
		key, url string
		events   []string
	}{
		{"all", r.URL + "/all", []string{"*"}},
		{"screens", r.URL + "/screens", []string{"item.screened"}},
		{"dead", deadURL, []string{"song.scored", "backfill.finished"}},
	} {
		m := w.ok(w.env.Do(http.MethodPost, "/api/admin/webhooks", owedtest.AdminToken, map[string]any{"url": h.url, "events": h.events}),
			http.StatusCreated, "create webhook "+h.key).JSON()
		w.hooks[h.key] = int64(m["webhook"].(map[string]any)["id"].(float64))
	}
}

// cdn serves the chats' media: PNG images, GIFs, undecodable "images" (failed), 404s
// (suspect, then unverified) and one 429 with Retry-After (a rate limit for the engine).
// Every fetch moves the fake clock 1.2 s, so the backfill's measured rate is real.
type cdn struct {
	*httptest.Server
	mu      sync.Mutex
	limited bool
	onLimit func()
}

func newCDN(t *testing.T, w *world) *cdn {
	var pngData, gifData bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 48, 32))
	for x := range 48 {
		for y := range 32 {
			img.Set(x, y, color.RGBA{uint8(x * 5), uint8(y * 7), 160, 255})
		}
	}
	png.Encode(&pngData, img)
	pal := image.NewPaletted(image.Rect(0, 0, 16, 16), []color.Color{color.Black, color.White})
	gif.EncodeAll(&gifData, &gif.GIF{Image: []*image.Paletted{pal, pal}, Delay: []int{10, 10}})
	c := &cdn{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		w.env.Clock.Advance(1200 * time.Millisecond)
		p := req.URL.Path
		switch {
		case p == "/memes/limit.gif":
			c.mu.Lock()
			first := !c.limited
			c.limited = true
			c.mu.Unlock()
			if first {
				rw.Header().Set("Retry-After", "900")
				rw.WriteHeader(http.StatusTooManyRequests)
				c.mu.Lock()
				f := c.onLimit
				c.mu.Unlock()
				if f != nil {
					f()
				}
				return
			}
			rw.Header().Set("Content-Type", "image/gif")
			rw.Write(gifData.Bytes())
		case strings.HasPrefix(p, "/gone/"):
			http.NotFound(rw, req)
		case strings.HasPrefix(p, "/broken/"):
			rw.Header().Set("Content-Type", "image/png")
			rw.Write([]byte("this is not a png"))
		case strings.HasSuffix(p, ".gif"):
			rw.Header().Set("Content-Type", "image/gif")
			rw.Write(gifData.Bytes())
		default:
			rw.Header().Set("Content-Type", "image/png")
			rw.Write(pngData.Bytes())
		}
	}))
	t.Cleanup(c.Close)
	return c
}

// scrape creates a scrape through the bot's routes, pushes its media and sets its state.
func (w *world) scrape(chat, guild, backend, mode string, media []map[string]any, state string) int64 {
	w.t.Helper()
	body := map[string]any{"chatId": chat, "backend": backend, "mode": mode}
	if guild != "" {
		body["guildId"] = guild
	}
	s := w.post("archiver", "/api/scrapes", body)
	id := int64(s["id"].(float64))
	total := len(media)
	for len(media) > 0 {
		n := min(len(media), 1000)
		w.ok(w.env.Do(http.MethodPost, fmt.Sprintf("/api/scrapes/%d/media", id), w.toks["archiver"], map[string]any{"media": media[:n]}),
			http.StatusAccepted, "push media")
		media = media[n:]
	}
	if state != "active" {
		w.ok(w.env.Do(http.MethodPatch, fmt.Sprintf("/api/scrapes/%d", id), w.toks["archiver"],
			map[string]any{"state": state, "downloaded": total}), http.StatusOK, "patch scrape")
	}
	return id
}

func mediaRows(base, dir string, kind string, from, n int, bytes int64) []map[string]any {
	out := make([]map[string]any, 0, n)
	ext := map[string]string{"image": "png", "gif": "gif", "video": "mp4", "audio": "ogg"}[kind]
	for i := from; i < from+n; i++ {
		out = append(out, map[string]any{"url": fmt.Sprintf("%s/%s/%d.%s", base, dir, i, ext), "kind": kind, "bytes": bytes + int64(i*977)})
	}
	return out
}

func concat(parts ...[]map[string]any) []map[string]any {
	var out []map[string]any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// seedBackfill makes four chats' jobs: #general done (run to the end here, with a measured
// rate), #memes paused by the admin after a 429 (the rate limit still holds), #releases and
// #archive-2019 idle; then a live walk in #live-room holds the media-traffic lock.
func (w *world) seedBackfill() {
	ctx := context.Background()
	env := w.env
	c := newCDN(w.t, w)
	bf := env.App.Backfill
	if err := bf.SetSettings(ctx, scheduler.BackfillSettings{BatchSize: 20, BatchPauseMs: 0}); err != nil {
		w.t.Fatal(err)
	}

	w.scrape("general", "g-music", "puppet", "history", concat(
		mediaRows(c.URL, "general", "image", 0, 34, 180_000),
		mediaRows(c.URL, "general", "gif", 0, 8, 900_000),
		mediaRows(c.URL, "broken", "image", 0, 3, 40_000),
		mediaRows(c.URL, "gone", "image", 0, 2, 70_000),
		mediaRows(c.URL, "general", "video", 0, 5, 8_000_000),
		mediaRows(c.URL, "general", "audio", 0, 2, 3_000_000),
	), "done")
	w.scrape("general", "g-music", "puppet", "live", mediaRows(c.URL, "general", "image", 100, 12, 150_000), "paused")
	w.scrape("memes", "g-music", "slopbot", "history", concat(
		mediaRows(c.URL, "memes", "gif", 0, 45, 1_200_000),
		[]map[string]any{{"url": c.URL + "/memes/limit.gif", "kind": "gif"}},
		mediaRows(c.URL, "memes", "gif", 45, 60, 1_100_000),
		mediaRows(c.URL, "memes", "image", 0, 30, 200_000),
		mediaRows(c.URL, "memes", "video", 0, 6, 12_000_000),
	), "paused")
	w.scrape("releases", "g-label", "slopbot", "history", concat(
		mediaRows(c.URL, "releases", "image", 0, 28, 400_000),
		mediaRows(c.URL, "releases", "audio", 0, 9, 6_000_000),
	), "done")
	w.scrape("archive-2019", "", "puppet", "history", mediaRows(c.URL, "archive", "image", 0, 14, 90_000), "failed")

	// #general runs to the end.
	if err := bf.StartJobs(ctx, "general"); err != nil {
		w.t.Fatal(err)
	}
	if err := bf.RunQueue(ctx); err != nil {
		w.t.Fatalf("run #general: %v", err)
	}

	// #memes runs until the CDN answers 429 (15 minutes), and the admin pauses it meanwhile.
	limited := make(chan struct{})
	var once sync.Once
	c.mu.Lock()
	c.onLimit = func() { once.Do(func() { close(limited) }) }
	c.mu.Unlock()
	if err := bf.StartJobs(ctx, "memes"); err != nil {
		w.t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- bf.RunQueue(ctx) }()
	select {
	case <-limited:
	case <-time.After(30 * time.Second):
		w.t.Fatal("#memes never reached the rate limit")
	}
	if err := bf.PauseJobs(ctx, "memes"); err != nil {
		w.t.Fatal(err)
	}
	select {
	case err := <-ran:
		if err != nil {
			w.t.Fatalf("run #memes: %v", err)
		}
	case <-time.After(30 * time.Second):
		w.t.Fatal("#memes did not pause")
	}

	// The settings and gaps an operator would run with.
	if err := bf.SetSettings(ctx, scheduler.BackfillSettings{BatchSize: 100, BatchPauseMs: 2000}); err != nil {
		w.t.Fatal(err)
	}
	if err := env.App.Media.SetGaps(250*time.Millisecond, 750*time.Millisecond); err != nil {
		w.t.Fatal(err)
	}
	// A walk runs in #live-room: it holds the media-traffic lock while it pushes.
	w.scrape("live-room", "g-music", "puppet", "live", mediaRows(c.URL, "live", "image", 0, 6, 120_000), "active")

	st, err := bf.Status(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	states := map[string]string{}
	for _, j := range st.Jobs {
		states[j.ChatID] = j.State
	}
	if states["general"] != "done" || states["memes"] != "paused" || states["releases"] != "idle" || st.LimitedUntil == nil || st.WalkingUntil == nil {
		w.t.Fatalf("backfill seed: states %v, limitedUntil %v, walkingUntil %v", states, st.LimitedUntil, st.WalkingUntil)
	}
}
