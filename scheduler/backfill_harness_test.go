package scheduler_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/png"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/media"
	"github.com/owed/owed/metrics"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
	"github.com/owed/owed/scheduler"
)

// bfCDN is a media CDN that injects every fault the engine must classify. Paths:
//
//	/img/N.png        a PNG                       → cached
//	/gif/N.gif        a GIF                       → cached
//	/video/N, /audio/N                            → skipped (never fetched)
//	/garbage/N        200 with bytes that are no image → failed
//	/status/C/N       always status C (403, 404, 410, 5xx → suspect; 400 → failed)
//	/flaky/C/N        status C once, then a PNG   → suspect, then cached on the retry
//	/slow/N           answers after the engine's timeout → suspect (timeout)
//	/429h/S/N         429 with Retry-After: S once, then a PNG
//	/429j/S/N         429 with a JSON {"retry_after": S} once, then a PNG
//	/steady/N.png     a PNG, but every limitEvery-th request to /steady/ answers 429 with
//	                  Retry-After: retryAfter (steady rate limiting, as a chat platform does)
//	/seq/A,B,…/N      the k-th request answers the k-th of A, B, … (the last one for ever
//	                  after): 200 a PNG, g garbage, 429 with Retry-After: 1, else that status
type bfCDN struct {
	srv *httptest.Server

	mu    sync.Mutex
	hits  map[string]int
	order []string
	onHit func(path string) // called before answering, outside the lock
	// hang, when it says so for a path, holds the answer until the request is given up.
	hang func(path string) bool
	// limitEvery and retryAfter shape the /steady/ rows' rate limiting; steadyHits counts them.
	limitEvery int
	retryAfter string
	steadyHits int
}

var (
	pngBytes = func() []byte {
		img := image.NewRGBA(image.Rect(0, 0, 8, 6))
		for i := range img.Pix {
			img.Pix[i] = 0x80
		}
		var b bytes.Buffer
		png.Encode(&b, img)
		return b.Bytes()
	}()
	gifBytes = func() []byte {
		img := image.NewPaletted(image.Rect(0, 0, 6, 6), []color.Color{color.Black, color.White})
		var b bytes.Buffer
		gif.Encode(&b, img, nil)
		return b.Bytes()
	}()
)

func newCDN(t testing.TB) *bfCDN {
	c := &bfCDN{hits: map[string]int{}}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *bfCDN) url(path string) string { return c.srv.URL + path }

func (c *bfCDN) hitsOf(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits[path]
}

func (c *bfCDN) served() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.order...)
}

func (c *bfCDN) serve(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.hits[r.URL.Path]++
	n := c.hits[r.URL.Path]
	c.order = append(c.order, r.URL.Path)
	hook, hang := c.onHit, c.hang
	limit := false
	if strings.HasPrefix(r.URL.Path, "/steady/") {
		c.steadyHits++
		limit = c.limitEvery > 0 && c.steadyHits%c.limitEvery == 0
	}
	retryAfter := c.retryAfter
	c.mu.Unlock()
	if hook != nil {
		hook(r.URL.Path)
	}
	if hang != nil && hang(r.URL.Path) {
		<-r.Context().Done()
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	code := func() int { v, _ := strconv.Atoi(parts[1]); return v }
	switch parts[0] {
	case "img":
		w.Header().Set("Content-Type", "image/png")
		w.Write(pngBytes)
	case "gif":
		w.Header().Set("Content-Type", "image/gif")
		w.Write(gifBytes)
	case "garbage":
		w.Write([]byte("<html>not an image</html>"))
	case "status":
		w.WriteHeader(code())
	case "flaky":
		if n == 1 {
			w.WriteHeader(code())
			return
		}
		w.Write(pngBytes)
	case "slow":
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	case "429h":
		if n == 1 {
			w.Header().Set("Retry-After", parts[1])
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Write(pngBytes)
	case "steady":
		if limit {
			w.Header().Set("Retry-After", retryAfter)
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Write(pngBytes)
	case "seq":
		answers := strings.Split(parts[1], ",")
		switch a := answers[min(n, len(answers))-1]; a {
		case "200":
			w.Write(pngBytes)
		case "g":
			w.Write([]byte("<html>not an image</html>"))
		case "429":
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			c, _ := strconv.Atoi(a)
			w.WriteHeader(c)
		}
	case "429j":
		if n == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, `{"message":"You are being rate limited.","retry_after":%s,"global":false}`, parts[1])
			return
		}
		w.Write(pngBytes)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// bfLogs keeps the queue's log records for assertions on its per-batch lines.
type bfLogs struct {
	mu   sync.Mutex
	recs []bfRecord
}

type bfRecord struct {
	msg   string
	attrs map[string]any
}

func (l *bfLogs) Enabled(context.Context, slog.Level) bool { return true }
func (l *bfLogs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *bfLogs) WithGroup(string) slog.Handler            { return l }
func (l *bfLogs) Handle(_ context.Context, r slog.Record) error {
	rec := bfRecord{msg: r.Message, attrs: map[string]any{}}
	r.Attrs(func(a slog.Attr) bool { rec.attrs[a.Key] = a.Value.Any(); return true })
	l.mu.Lock()
	l.recs = append(l.recs, rec)
	l.mu.Unlock()
	if os.Getenv("OWED_TEST_LOG") != "" {
		fmt.Println(r.Message, rec.attrs)
	}
	return nil
}

// named returns the records with the message.
func (l *bfLogs) named(msg string) []bfRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []bfRecord
	for _, r := range l.recs {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// bf is a backfill queue on a fresh database with a fake clock at owedtest.Start, a fake
// sleep that moves it, and a media engine fetching from a fault-injecting CDN.
type bf struct {
	t       testing.TB
	ctx     context.Context
	url     string
	store   *models.Store
	clk     *clocktest.Fake
	cdn     *bfCDN
	engine  *media.Engine
	q       *scheduler.Backfill
	logs    *bfLogs
	metrics *metrics.Metrics
	dir     string

	mu      sync.Mutex
	sleeps  []time.Duration
	onSleep func(d time.Duration) // called by every sleep (the queue's and the engine's gaps)
}

type bfOption func(*bfOptions)

type bfOptions struct {
	minGap, maxGap time.Duration
	timeout        time.Duration
	owner          string
	walkIdle       time.Duration
	rateWindow     time.Duration
	lease, poll    time.Duration
}

func newBF(t testing.TB, databaseURL string, opts ...bfOption) *bf {
	t.Helper()
	o := bfOptions{minGap: 500 * time.Millisecond, maxGap: 500 * time.Millisecond, timeout: 5 * time.Second,
		owner: "proc-a", walkIdle: 10 * time.Minute, lease: 2 * time.Minute}
	for _, f := range opts {
		f(&o)
	}
	clk := clocktest.NewFake(owedtest.Start)
	b := &bf{t: t, ctx: context.Background(), url: databaseURL, clk: clk, cdn: newCDN(t), logs: &bfLogs{}, dir: t.TempDir()}
	b.store = owedtest.Store(t, databaseURL, clk)
	b.metrics = metrics.New(nil)
	b.build(o)
	return b
}

// build makes the engine and queue (again, for a restart) on b's store.
func (b *bf) build(o bfOptions) {
	b.t.Helper()
	var err error
	b.engine, err = media.New(media.Config{PreviewDir: b.dir, MinGap: o.minGap, MaxGap: o.maxGap, Timeout: o.timeout,
		AllowPrivate: true, Clock: b.stepping(), Rand: func() float64 { return 0.5 }})
	if err != nil {
		b.t.Fatalf("engine: %v", err)
	}
	if err := b.engine.SetGaps(o.minGap, o.maxGap); err != nil {
		b.t.Fatalf("gaps: %v", err)
	}
	b.q = scheduler.NewBackfill(b.store, b.engine, b.stepping(), slog.New(b.logs), b.metrics, scheduler.BackfillConfig{
		WalkIdle: o.walkIdle, Lease: o.lease, Poll: o.poll, Owner: o.owner, RateWindow: o.rateWindow})
}

// withTimeout sets the engine's fetch timeout (the /slow rows need a short one).
func withTimeout(d time.Duration) bfOption { return func(o *bfOptions) { o.timeout = d } }

// withRateWindow picks the rate model: a positive window the smoothed recent rate, negative
// the plain one (zero: owed's default).
func withRateWindow(d time.Duration) bfOption { return func(o *bfOptions) { o.rateWindow = d } }

// withLease sets the queue lease and the longest single wait (BackfillConfig.Lease, Poll).
func withLease(lease, poll time.Duration) bfOption {
	return func(o *bfOptions) { o.lease, o.poll = lease, poll }
}

func withGaps(minGap, maxGap time.Duration) bfOption {
	return func(o *bfOptions) { o.minGap, o.maxGap = minGap, maxGap }
}

// stepping is the queue's and the engine's clock: b.clk, whose timers fire at once after
// moving it by their duration, each wait recorded and passed to the onSleep hook first.
func (b *bf) stepping() clocktest.Stepping {
	return clocktest.Stepping{Fake: b.clk, OnWait: func(d time.Duration) {
		b.mu.Lock()
		b.sleeps = append(b.sleeps, d)
		hook := b.onSleep
		b.mu.Unlock()
		if hook != nil {
			hook(d)
		}
	}}
}

func (b *bf) setOnSleep(f func(time.Duration)) {
	b.mu.Lock()
	b.onSleep = f
	b.mu.Unlock()
}

func (b *bf) settings(size int, pauseMs int64) {
	b.t.Helper()
	if err := b.q.SetSettings(b.ctx, scheduler.BackfillSettings{BatchSize: size, BatchPauseMs: pauseMs}); err != nil {
		b.t.Fatalf("settings: %v", err)
	}
}

// kindOf infers a row's kind from its CDN path.
func kindOf(path string) models.MediaKind {
	switch {
	case strings.HasPrefix(path, "/gif/"):
		return models.MediaGIF
	case strings.HasPrefix(path, "/video/"):
		return models.MediaVideo
	case strings.HasPrefix(path, "/audio/"):
		return models.MediaAudio
	}
	return models.MediaImage
}

// scrape makes a scrape of chat with media rows at the CDN paths, then sets its state.
func (b *bf) scrape(chat, backend string, state models.ScrapeState, paths ...string) int64 {
	b.t.Helper()
	guild := "guild-" + chat
	sc, err := b.store.CreateScrape(b.ctx, models.NewScrape{ChatID: chat, GuildID: &guild, Backend: backend, Mode: "history"})
	if err != nil {
		b.t.Fatalf("create scrape: %v", err)
	}
	if len(paths) > 0 {
		items := make([]models.NewMedia, len(paths))
		for i, p := range paths {
			items[i] = models.NewMedia{Kind: kindOf(p), URL: b.cdn.url(p)}
		}
		if _, err := b.store.AddMedia(b.ctx, sc.ID, items); err != nil {
			b.t.Fatalf("add media: %v", err)
		}
	}
	if state != models.ScrapeActive {
		if _, err := b.store.UpdateScrape(b.ctx, sc.ID, &state, nil); err != nil {
			b.t.Fatalf("scrape state: %v", err)
		}
	}
	return sc.ID
}

// paths makes n CDN paths from a pattern with one %d.
func paths(pattern string, from, n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf(pattern, from+i)
	}
	return out
}

func (b *bf) start(chat string) {
	b.t.Helper()
	if err := b.q.StartJobs(b.ctx, chat); err != nil {
		b.t.Fatalf("start %q: %v", chat, err)
	}
}

func (b *bf) run() {
	b.t.Helper()
	if err := b.q.RunQueue(b.ctx); err != nil {
		b.t.Fatalf("run queue: %v", err)
	}
}

func (b *bf) status() scheduler.BackfillStatus {
	b.t.Helper()
	st, err := b.q.Status(b.ctx)
	if err != nil {
		b.t.Fatalf("status: %v", err)
	}
	return st
}

// job finds chat's job in the status; nil when the status hides it.
func (b *bf) job(st scheduler.BackfillStatus, chat string) *scheduler.BackfillJobStatus {
	for i := range st.Jobs {
		if st.Jobs[i].ChatID == chat {
			return &st.Jobs[i]
		}
	}
	return nil
}

func (b *bf) mustJob(st scheduler.BackfillStatus, chat string) scheduler.BackfillJobStatus {
	b.t.Helper()
	j := b.job(st, chat)
	if j == nil {
		b.t.Fatalf("chat %s is not in the status", chat)
	}
	return *j
}

// rowStates maps each row's CDN path to its preview state.
func (b *bf) rowStates(scrapeID int64) map[string]string {
	b.t.Helper()
	rows, err := b.store.ListMedia(b.ctx, scrapeID, "", 0, 10000)
	if err != nil {
		b.t.Fatalf("list media: %v", err)
	}
	out := map[string]string{}
	for _, r := range rows {
		out[strings.TrimPrefix(r.URL, b.cdn.srv.URL)] = string(r.State)
	}
	return out
}

// lateInAWalk owes chat-l a job of rows rows behind a walk (chat-w: the queue waits 10 min),
// runs the queue, and calls check once late in that wait (9 min in); it fails the test when the
// queue never waited that long.
func (b *bf) lateInAWalk(rows int, check func()) {
	b.t.Helper()
	b.settings(2, 0)
	b.scrape("chat-l", "puppet", models.ScrapeDone, paths("/img/%d.png", 1, rows)...)
	b.scrape("chat-w", "puppet", models.ScrapeActive)
	b.start("")
	checks := 0
	b.setOnSleep(func(time.Duration) {
		if checks == 0 && b.clk.Now().Sub(owedtest.Start) >= 9*time.Minute {
			checks++
			check()
		}
	})
	b.run()
	if checks != 1 {
		b.t.Fatal("the queue did not wait for the walk")
	}
}

// wantLiveLease checks that owner holds the queue lease now, unexpired (from any goroutine).
func (b *bf) wantLiveLease(owner string) {
	r, err := b.store.BackfillRunnerState(context.Background())
	if err != nil || strOf(r.Owner) != owner || r.LeaseUntil.UnixMilli() <= b.clk.Now().UnixMilli() {
		b.t.Errorf("runner = %+v (%v), want %s's live lease", r, err, owner)
	}
}

func (b *bf) exec(q string, args ...any) {
	b.t.Helper()
	if _, err := b.store.RawExec(b.ctx, q, args...); err != nil {
		b.t.Fatalf("exec %s: %v", q, err)
	}
}

// checkCounters compares the maintained totals with a recount of the media rows.
func (b *bf) checkCounters() {
	b.t.Helper()
	cols := `pending, cached, failed, suspect, unverified, skipped, total, stored_bytes, pending_image, pending_gif, pending_video, pending_audio`
	recount := `SELECT s.id AS scrape_id,
		COUNT(CASE WHEN m.state = 'pending' THEN 1 END) AS pending, COUNT(CASE WHEN m.state = 'cached' THEN 1 END) AS cached,
		COUNT(CASE WHEN m.state = 'failed' THEN 1 END) AS failed, COUNT(CASE WHEN m.state = 'suspect' THEN 1 END) AS suspect,
		COUNT(CASE WHEN m.state = 'unverified' THEN 1 END) AS unverified, COUNT(CASE WHEN m.state = 'skipped' THEN 1 END) AS skipped,
		COUNT(m.id) AS total, COALESCE(SUM(m.stored_bytes), 0) AS stored_bytes,
		COUNT(CASE WHEN m.state = 'pending' AND m.kind = 'image' THEN 1 END) AS pending_image,
		COUNT(CASE WHEN m.state = 'pending' AND m.kind = 'gif' THEN 1 END) AS pending_gif,
		COUNT(CASE WHEN m.state = 'pending' AND m.kind = 'video' THEN 1 END) AS pending_video,
		COUNT(CASE WHEN m.state = 'pending' AND m.kind = 'audio' THEN 1 END) AS pending_audio
		FROM scrapes s LEFT JOIN media m ON m.scrape_id = s.id GROUP BY s.id ORDER BY s.id`
	type totals struct {
		ScrapeID     int64 `gorm:"column:scrape_id"`
		Pending      int64 `gorm:"column:pending"`
		Cached       int64 `gorm:"column:cached"`
		Failed       int64 `gorm:"column:failed"`
		Suspect      int64 `gorm:"column:suspect"`
		Unverified   int64 `gorm:"column:unverified"`
		Skipped      int64 `gorm:"column:skipped"`
		Total        int64 `gorm:"column:total"`
		StoredBytes  int64 `gorm:"column:stored_bytes"`
		PendingImage int64 `gorm:"column:pending_image"`
		PendingGIF   int64 `gorm:"column:pending_gif"`
		PendingVideo int64 `gorm:"column:pending_video"`
		PendingAudio int64 `gorm:"column:pending_audio"`
	}
	var kept, counted []totals
	if err := b.store.RawScan(b.ctx, &kept, `SELECT scrape_id, `+cols+` FROM scrape_totals ORDER BY scrape_id`); err != nil {
		b.t.Fatal(err)
	}
	if err := b.store.RawScan(b.ctx, &counted, recount); err != nil {
		b.t.Fatal(err)
	}
	if a, c := fmt.Sprintf("%+v", kept), fmt.Sprintf("%+v", counted); a != c {
		b.t.Errorf("totals drifted:\n kept    %s\n counted %s", a, c)
	}
}
