package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
	"github.com/owed/owed/webhooks"
)

// Crash tests: a real `owed serve` is killed with SIGKILL (no shutdown, no lease released) in
// the middle of a backfill batch and in the middle of webhook deliveries, then started again
// on the same database and data directory. Nothing owed may be lost or recorded twice.

// must fails the test unless the call answered want.
func (p *process) must(want int, method, path, token string, body any) map[string]any {
	p.t.Helper()
	status, out := p.call(method, path, token, body)
	if status != want {
		p.t.Fatalf("%s %s: %d %v, want %d", method, path, status, out, want)
	}
	return out
}

// kill ends the process with SIGKILL: no shutdown runs, no lease is released.
func (p *process) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// slowCDN serves media slowly enough that a batch is always under way when the test kills
// owed. Paths: /img/N.png a PNG (cached), /garbage/N bytes that are no image (failed),
// /missing/N 404 (suspect, then unverified after its one retry). It counts the hits per path
// and the requests in flight.
type slowCDN struct {
	srv      *httptest.Server
	delay    time.Duration
	inFlight atomic.Int64

	mu   sync.Mutex
	hits map[string]int
}

var tinyPNG = func() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 12, 8))
	for i := range img.Pix {
		img.Pix[i] = byte(i)
	}
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}()

func newSlowCDN(t *testing.T, delay time.Duration) *slowCDN {
	c := &slowCDN{delay: delay, hits: map[string]int{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.inFlight.Add(1)
		defer c.inFlight.Add(-1)
		c.mu.Lock()
		c.hits[r.URL.Path]++
		c.mu.Unlock()
		select {
		case <-time.After(c.delay):
		case <-r.Context().Done():
			return
		}
		switch {
		case strings.HasPrefix(r.URL.Path, "/img/"):
			w.Header().Set("Content-Type", "image/png")
			w.Write(tinyPNG)
		case strings.HasPrefix(r.URL.Path, "/garbage/"):
			w.Write([]byte("<html>no image here</html>"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *slowCDN) hitsOf(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits[path]
}

// mediaRow is a media row as the database holds it.
type mediaRow struct {
	id    int64
	url   string
	state string
}

// TestKilledMidBackfillBatchLosesNothing pushes media through the bot's routes, starts the
// backfill and kills owed while a batch is fetching. Started again, the job resumes by itself
// (its state is a row), and every media row ends in a final state: none pending, none lost,
// and no row that was recorded before the kill is fetched again.
func TestKilledMidBackfillBatchLosesNothing(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, dbURL string) {
		t.Parallel() // each dialect's processes wait on leases and slow peers, not on the CPU
		cdn := newSlowCDN(t, 70*time.Millisecond)
		env := []string{"OWED_DATABASE_URL=" + dbURL, "OWED_DATA_DIR=" + t.TempDir(), "OWED_ADMIN_TOKEN=" + owedtest.AdminToken,
			"OWED_DATABASE_MAX_CONNS=8", "OWED_WRITE_RATE=0", "OWED_LEASE=3s", "OWED_WALK_IDLE=1s", "OWED_SWEEP_EVERY=1s",
			"OWED_MEDIA_MIN_GAP_MS=0", "OWED_MEDIA_MAX_GAP_MS=10", "OWED_MEDIA_ALLOW_PRIVATE=1"} // the CDN is on loopback
		first := startOwed(t, env...)
		admin := owedtest.AdminToken
		bot := first.must(http.StatusCreated, http.MethodPost, "/api/admin/users", admin, map[string]string{"name": "bo", "role": "bot"})["token"].(string)

		// 90 rows: 60 images, 10 garbage, 10 missing (404), 10 videos.
		want := map[string]string{} // url → its final state
		var rows []map[string]any
		add := func(path, kind, state string) {
			u := cdn.srv.URL + path
			want[u] = state
			rows = append(rows, map[string]any{"url": u, "kind": kind})
		}
		for i := range 60 {
			add(fmt.Sprintf("/img/%d.png", i), "image", "cached")
			if i%6 == 0 {
				add(fmt.Sprintf("/garbage/%d", i), "image", "failed")
				add(fmt.Sprintf("/missing/%d", i), "gif", "unverified")
				add(fmt.Sprintf("/video/%d.mp4", i), "video", "skipped")
			}
		}
		sc := first.must(http.StatusCreated, http.MethodPost, "/api/scrapes", bot,
			map[string]any{"chatId": "chat-crash", "guildId": "g-1", "backend": "puppet", "mode": "history"})
		scrape := int64(sc["id"].(float64))
		for i := 0; i < len(rows); i += 50 {
			first.must(http.StatusAccepted, http.MethodPost, fmt.Sprintf("/api/scrapes/%d/media", scrape), bot,
				map[string]any{"media": rows[i:min(i+50, len(rows))]})
		}
		first.must(http.StatusOK, http.MethodPatch, fmt.Sprintf("/api/scrapes/%d", scrape), bot, map[string]string{"state": "done"})
		first.must(http.StatusOK, http.MethodPut, "/api/backfill/settings", admin, map[string]any{"batchSize": 40, "batchPauseMs": 0, "auto": false})
		first.must(http.StatusOK, http.MethodPost, "/api/backfill/start", admin, map[string]any{"chatId": "chat-crash"})

		db := openDB(t, dbURL)
		count := func(state string) int {
			return countRows(t, db, `SELECT COUNT(*) FROM media WHERE scrape_id = $1 AND state = $2`, scrape, state)
		}
		// Kill in the middle of the first batch of 40: some rows recorded, a fetch in flight.
		wait.Within(t, 20*time.Second, "the first batch to be under way", func() bool {
			return count("cached") >= 8 && cdn.inFlight.Load() > 0
		})
		first.kill()

		recorded := map[string]string{} // rows already final at the kill
		pendingAtKill := 0
		for _, r := range listMedia(t, db, scrape) {
			if r.state == "pending" || r.state == "suspect" {
				pendingAtKill++
			} else {
				recorded[r.url] = r.state
			}
		}
		if pendingAtKill == 0 || len(recorded) == 0 {
			t.Fatalf("the kill left %d rows owed and %d recorded; the test proves nothing", pendingAtKill, len(recorded))
		}
		if n := countRows(t, db, `SELECT COUNT(*) FROM backfill_jobs WHERE chat_id = 'chat-crash' AND state = 'running'`); n != 1 {
			t.Fatalf("the job is not running at the kill (%d)", n)
		}
		// Started again at once: nobody starts the job; the new process takes the queue as soon
		// as the dead one's lease (OWED_LEASE) runs out, at its next kick (every OWED_SWEEP_EVERY).
		restarted := time.Now()
		second := startOwed(t, env...)
		final := func() int {
			return countRows(t, db, `SELECT COUNT(*) FROM media WHERE scrape_id = $1 AND state NOT IN ('pending', 'suspect')`, scrape)
		}
		wait.Within(t, 30*time.Second, "the job to resume after the restart", func() bool { return final() > len(recorded) })
		resumedAfter := time.Since(restarted)
		wait.Within(t, 40*time.Second, "the job to finish after the restart", func() bool {
			return countRows(t, db, `SELECT COUNT(*) FROM backfill_jobs WHERE chat_id = 'chat-crash' AND state = 'done'`) == 1
		})
		resumed := time.Since(restarted)

		got := listMedia(t, db, scrape)
		if len(got) != len(want) {
			t.Fatalf("%d media rows after the crash, want %d", len(got), len(want))
		}
		for _, r := range got {
			if r.state != want[r.url] {
				t.Errorf("%s ended %s, want %s", r.url, r.state, want[r.url])
			}
			path := strings.TrimPrefix(r.url, cdn.srv.URL)
			fetchedOnce := strings.HasPrefix(path, "/img/") || strings.HasPrefix(path, "/garbage/") // missing rows get a retry; videos no fetch
			if _, ok := recorded[r.url]; ok && fetchedOnce && cdn.hitsOf(path) != 1 {
				t.Errorf("%s was recorded before the kill yet fetched %d times", path, cdn.hitsOf(path))
			}
			if r.state == "cached" {
				if status, _ := second.call(http.MethodGet, fmt.Sprintf("/api/media/%d/preview", r.id), bot, nil); status != http.StatusOK {
					t.Errorf("the preview of cached row %d answers %d", r.id, status)
				}
			}
		}
		if n := countRows(t, db, `SELECT pending + suspect FROM scrape_totals WHERE scrape_id = $1`, scrape); n != 0 {
			t.Errorf("the scrape's totals still count %d rows owed", n)
		}
		if n := countRows(t, db, `SELECT total FROM scrape_totals WHERE scrape_id = $1`, scrape); n != len(want) {
			t.Errorf("the scrape's totals count %d rows, want %d", n, len(want))
		}
		t.Logf("killed with %d rows recorded and %d owed; restarted at once, the job resumed after %s and finished after %s; all %d rows final",
			len(recorded), pendingAtKill, resumedAfter.Round(time.Millisecond), resumed.Round(time.Millisecond), len(got))
		if err := second.stop(syscall.SIGTERM); err != nil {
			t.Errorf("graceful stop: %v", err)
		}
	})
}

func listMedia(t *testing.T, db *sql.DB, scrape int64) []mediaRow {
	t.Helper()
	rs, err := db.Query(`SELECT id, url, state FROM media WHERE scrape_id = $1 ORDER BY id`, scrape)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []mediaRow
	for rs.Next() {
		var r mediaRow
		if err := rs.Scan(&r.id, &r.url, &r.state); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// slowReceiver is a webhook receiver that verifies every delivery's signature and holds each
// one a while before answering 204. Once holdAfter deliveries are acknowledged it holds every
// new one until release (or its caller gives up) and says so on held, so a test can kill owed
// the moment a delivery is surely in flight, however fast or slow the machine (a held delivery
// must not outlast owed's attempt timeout: the kill follows held at once). It notes each
// webhook-id as seen on arrival and as acknowledged once its 204 is written.
type slowReceiver struct {
	srv       *httptest.Server
	delay     time.Duration
	holdAfter int64
	inFlight  atomic.Int64
	ackedN    atomic.Int64
	released  chan struct{}
	release   func()
	held      chan struct{} // closed when the first delivery is held
	holding   sync.Once

	mu     sync.Mutex
	secret string
	seen   map[string]int
	acked  map[string]int
	bad    []string
}

func newSlowReceiver(t *testing.T, delay time.Duration, holdAfter int64) *slowReceiver {
	rc := &slowReceiver{delay: delay, holdAfter: holdAfter, seen: map[string]int{}, acked: map[string]int{},
		released: make(chan struct{}), held: make(chan struct{})}
	rc.release = sync.OnceFunc(func() { close(rc.released) })
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.inFlight.Add(1)
		defer rc.inFlight.Add(-1)
		if rc.ackedN.Load() >= rc.holdAfter {
			rc.holding.Do(func() { close(rc.held) })
			select {
			case <-rc.released:
			case <-r.Context().Done():
				return // owed died holding this delivery
			}
		}
		body, err := io.ReadAll(r.Body)
		id := r.Header.Get("webhook-id")
		rc.mu.Lock()
		secret := rc.secret
		rc.seen[id]++
		if err == nil {
			err = webhooks.Verify(secret, r.Header, body, time.Now())
		}
		if err != nil {
			rc.bad = append(rc.bad, fmt.Sprintf("%s: %v", id, err))
		}
		rc.mu.Unlock()
		select {
		case <-time.After(rc.delay):
		case <-r.Context().Done():
			return // owed died holding this delivery
		}
		w.WriteHeader(http.StatusNoContent)
		rc.mu.Lock()
		rc.acked[id]++
		rc.mu.Unlock()
		rc.ackedN.Add(1)
	}))
	t.Cleanup(rc.srv.Close)
	t.Cleanup(rc.release) // before Close, which waits for the held requests
	return rc
}

// blockTagged makes the model block every screened text holding "#block" and answer as usual
// otherwise.
func blockTagged(w http.ResponseWriter, r *http.Request) bool {
	raw, _ := readAndRestore(r)
	var req struct {
		Task    string
		Subject struct{ Text string }
	}
	json.Unmarshal(raw, &req)
	if req.Task != "screen" || !strings.Contains(req.Subject.Text, "#block") {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"answers":[{"verdict":"block","confidence":0.8}]}`)
	return true
}

// TestKilledMidWebhookDeliveriesLosesNothing publishes items to a subscribed, slow receiver
// and kills owed while deliveries are in flight. Started again, every delivery arrives (at
// least once: each webhook-id is acknowledged by the receiver, a few of them twice), every
// item has exactly one verdict and one item.screened delivery, and every allowed revision
// exactly one score and one song.scored delivery.
func TestKilledMidWebhookDeliveriesLosesNothing(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, dbURL string) {
		t.Parallel() // each dialect's processes wait on leases and slow peers, not on the CPU
		model := modeltest.New(t)
		model.Handle(blockTagged)
		model.KeepRequests(false)
		recv := newSlowReceiver(t, 400*time.Millisecond, 5)
		env := []string{"OWED_DATABASE_URL=" + dbURL, "OWED_DATA_DIR=" + t.TempDir(), "OWED_ADMIN_TOKEN=" + owedtest.AdminToken,
			"OWED_MODEL_URL=" + model.URL(), "OWED_DATABASE_MAX_CONNS=8", "OWED_WRITE_RATE=0", "OWED_LEASE=6s",
			"OWED_SWEEP_EVERY=1s", "OWED_INLINE_WAIT=0s", "OWED_DAILY_BUDGET=100000", "OWED_SWEEP_CONCURRENCY=8",
			"OWED_WEBHOOKS_ALLOW_PRIVATE=1", "OWED_LOG_LEVEL=info"}
		first := startOwed(t, env...)
		admin := owedtest.AdminToken
		hook := first.must(http.StatusCreated, http.MethodPost, "/api/admin/webhooks", admin,
			map[string]any{"url": recv.srv.URL + "/hooks", "events": []string{"*"}})
		recv.mu.Lock()
		recv.secret = hook["secret"].(string)
		recv.mu.Unlock()
		author := first.must(http.StatusCreated, http.MethodPost, "/api/admin/users", admin, map[string]string{"name": "ann", "role": "author"})["token"].(string)

		// 12 songs with a second revision each and 20 pitches; every fourth text is blocked.
		type item struct {
			kind    string
			id      int64
			blocked bool
		}
		var items []item
		text := func(i int, s string) string {
			if i%4 == 0 {
				return s + " #block"
			}
			return s
		}
		for i := range 12 {
			out := first.must(http.StatusCreated, http.MethodPost, "/api/listeners/songs", author,
				map[string]string{"title": fmt.Sprintf("Song %d", i), "code": text(i, fmt.Sprintf(`s("bd*%d")`, i+1))})
			song := int64(out["song"].(map[string]any)["id"].(float64))
			rev := int64(out["revision"].(map[string]any)["id"].(float64))
			items = append(items, item{"revision", rev, i%4 == 0})
			out = first.must(http.StatusCreated, http.MethodPost, fmt.Sprintf("/api/listeners/songs/%d/revisions", song), author,
				map[string]string{"code": text(i+1, fmt.Sprintf(`s("hh*%d")`, i+1))})
			items = append(items, item{"revision", int64(out["revision"].(map[string]any)["id"].(float64)), (i+1)%4 == 0})
		}
		for i := range 20 {
			out := first.must(http.StatusCreated, http.MethodPost, "/api/listeners/pitches", author,
				map[string]string{"body": text(i, fmt.Sprintf("pitch %d", i))})
			items = append(items, item{"pitch", int64(out["pitch"].(map[string]any)["id"].(float64)), i%4 == 0})
		}
		allowedRevisions := 0
		for _, it := range items {
			if it.kind == "revision" && !it.blocked {
				allowedRevisions++
			}
		}
		wantDeliveries := len(items) + allowedRevisions

		db := openDB(t, dbURL)
		delivered := func() int {
			return countRows(t, db, `SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'delivered'`)
		}
		// Killed the moment a delivery is held, five having been acknowledged: within owed's
		// attempt timeout (half the 6 s lease), so no held delivery fails first.
		select {
		case <-recv.held:
		case <-time.After(20 * time.Second):
			t.Fatal("no delivery was under way within 20 s")
		}
		first.kill()
		recv.release() // the restarted owed's deliveries are answered as usual
		atKill := delivered()
		leased := countRows(t, db, `SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending' AND lease_owner IS NOT NULL`)
		if leased == 0 || atKill >= wantDeliveries {
			t.Fatalf("the kill found %d deliveries leased and %d of %d delivered; the test proves nothing", leased, atKill, wantDeliveries)
		}

		restarted := time.Now()
		second := startOwed(t, env...)
		// An attempt the loaded machine makes miss its deadline is retried after its backoff (a
		// job's first is a minute), which the wait leaves room for; what is left is listed.
		if !wait.For(150*time.Second, func() bool {
			return countRows(t, db, `SELECT COUNT(*) FROM content_jobs`) == 0 &&
				countRows(t, db, `SELECT COUNT(*) FROM webhook_deliveries`) == wantDeliveries && delivered() == wantDeliveries
		}) {
			t.Fatalf("not settled 150 s after the restart (%d of %d deliveries delivered):\n%s", delivered(), wantDeliveries,
				leftRows(t, db, `SELECT task, kind, item_id, why, attempts, due_at, lease_until, lease_owner FROM content_jobs`,
					`SELECT id, event, status, attempts, failures, due_at, last_status, last_error, lease_owner FROM webhook_deliveries
					WHERE status <> 'delivered'`))
		}
		settled := time.Since(restarted)

		// Exactly one verdict per item, the one the model gave; one score per allowed revision.
		for _, it := range items {
			var verdict string
			if err := db.QueryRow(`SELECT verdict FROM screens WHERE kind = $1 AND item_id = $2`, it.kind, it.id).Scan(&verdict); err != nil {
				t.Errorf("%s %d has no verdict: %v", it.kind, it.id, err)
			} else if want := map[bool]string{true: "block", false: "allow"}[it.blocked]; verdict != want {
				t.Errorf("%s %d: verdict %s, want %s", it.kind, it.id, verdict, want)
			}
			if it.kind == "revision" {
				want := 1
				if it.blocked {
					want = 0
				}
				if n := countRows(t, db, `SELECT COUNT(*) FROM scores WHERE revision_id = $1`, it.id); n != want {
					t.Errorf("revision %d has %d scores, want %d", it.id, n, want)
				}
			}
		}
		if n := countRows(t, db, `SELECT COUNT(*) FROM screens`); n != len(items) {
			t.Errorf("%d verdicts, want %d", n, len(items))
		}
		if n := countRows(t, db, `SELECT COUNT(*) FROM events WHERE outcome IN ('allow', 'block')`); n != len(items) {
			t.Errorf("%d verdict events, want exactly %d", n, len(items))
		}
		if n := countRows(t, db, `SELECT COUNT(*) FROM events WHERE outcome = 'scored'`); n != allowedRevisions {
			t.Errorf("%d score events, want exactly %d", n, allowedRevisions)
		}

		// One delivery per result, each with its own webhook-id, and each reporting a
		// different result.
		rs, err := db.Query(`SELECT msg_id, event, payload FROM webhook_deliveries`)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		reported := map[string]int{}
		for rs.Next() {
			var id, event, payload string
			if err := rs.Scan(&id, &event, &payload); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
			var p struct {
				Data struct {
					Kind       string
					ID         int64
					RevisionID int64
				}
			}
			json.Unmarshal([]byte(payload), &p)
			switch event {
			case "item.screened":
				reported[fmt.Sprintf("screened %s %d", p.Data.Kind, p.Data.ID)]++
			case "song.scored":
				reported[fmt.Sprintf("scored %d", p.Data.RevisionID)]++
			default:
				t.Errorf("unexpected delivery of %s", event)
			}
		}
		rs.Close()
		if len(reported) != wantDeliveries {
			t.Errorf("the deliveries report %d distinct results, want %d", len(reported), wantDeliveries)
		}
		for what, n := range reported {
			if n != 1 {
				t.Errorf("%s is reported by %d deliveries, want 1", what, n)
			}
		}
		slices.Sort(ids)
		if len(slices.Compact(slices.Clone(ids))) != len(ids) {
			t.Errorf("webhook-ids repeat across deliveries")
		}

		// The receiver acknowledged every webhook-id at least once, and saw no other.
		recv.mu.Lock()
		defer recv.mu.Unlock()
		if len(recv.bad) > 0 {
			t.Errorf("deliveries with bad signatures: %v", recv.bad)
		}
		twice := 0
		for _, id := range ids {
			if recv.acked[id] == 0 {
				t.Errorf("delivery %s was never acknowledged by the receiver", id)
			}
			if recv.seen[id] > 1 {
				twice++
			}
		}
		if len(recv.seen) != len(ids) {
			t.Errorf("the receiver saw %d webhook-ids, owed holds %d", len(recv.seen), len(ids))
		}
		t.Logf("killed with %d of %d deliveries done and %d in flight; restarted, all settled in %s; %d webhook-ids arrived more than once",
			atKill, wantDeliveries, leased, settled.Round(time.Millisecond), twice)
		if err := second.stop(syscall.SIGTERM); err != nil {
			t.Errorf("graceful stop: %v", err)
		}
	})
}
