package media

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is the engine's clock; its timers record the wait and advance
// the clock instead of waiting.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	fired := make(chan time.Time, 1)
	fired <- c.now
	return fired, func() {}
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// cdn is a test media server. Every request is counted and stamped with the
// fake clock's time; routes are registered per test.
type cdn struct {
	t     *testing.T
	srv   *httptest.Server
	clock *fakeClock
	hits  atomic.Int64

	mu    sync.Mutex
	times []time.Time
	paths []string
}

func newCDN(t *testing.T, clock *fakeClock, routes map[string]http.HandlerFunc) *cdn {
	t.Helper()
	c := &cdn{t: t, clock: clock}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		c.mu.Lock()
		c.times = append(c.times, clock.Now())
		c.paths = append(c.paths, r.URL.Path)
		c.mu.Unlock()
		h, ok := routes[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *cdn) url(path string) string { return c.srv.URL + path }

func (c *cdn) Times() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.times...)
}

func serveBytes(contentType string, data []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(data)
	}
}

func serveStatus(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, http.StatusText(code), code)
	}
}

func newTestEngine(t *testing.T, clock *fakeClock, mods ...func(*Config)) *Engine {
	t.Helper()
	cfg := Config{
		PreviewDir: filepath.Join(t.TempDir(), "previews"),
		Clock:      clock,
		Timeout:    5 * time.Second,
		// The test CDN listens on loopback; the guard's own tests turn this off.
		AllowPrivate: true,
	}
	for _, m := range mods {
		m(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

func image1(id int64, u string) Item { return Item{ID: id, Kind: KindImage, URL: u} }

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := Config{PreviewDir: "x"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := map[string]Config{
		"no dir":         {},
		"min over max":   {PreviewDir: "x", MinGap: time.Second, MaxGap: 10 * time.Millisecond},
		"negative min":   {PreviewDir: "x", MinGap: -1, MaxGap: time.Second},
		"only min set":   {PreviewDir: "x", MinGap: time.Second},
		"neg timeout":    {PreviewDir: "x", Timeout: -1},
		"neg bytes":      {PreviewDir: "x", MaxBytes: -1},
		"neg pixels":     {PreviewDir: "x", MaxPixels: -1},
		"neg thumb":      {PreviewDir: "x", ThumbSize: -1},
		"neg rate limit": {PreviewDir: "x", DefaultRateLimit: -time.Second},
	}
	for name, cfg := range bad {
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, cfg)
		}
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}

func TestNewDefaultsAndDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "a", "b")
	e, err := New(Config{PreviewDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("preview dir not created: %v", err)
	}
	if lo, hi := e.Gaps(); lo != 250*time.Millisecond || hi != 750*time.Millisecond {
		t.Fatalf("default gaps %v..%v", lo, hi)
	}
	c := e.cfg
	if c.Timeout != 30*time.Second || c.MaxBytes != 32<<20 || c.MaxPixels != 50_000_000 ||
		c.ThumbSize != 320 || c.DefaultRateLimit != time.Minute {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if l := e.RateLimit(); l.Active || !l.Until.IsZero() || l.Remaining != 0 {
		t.Fatalf("fresh engine limited: %+v", l)
	}
}

func TestSetGaps(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t, newFakeClock())
	if err := e.SetGaps(2*time.Second, time.Second); err == nil {
		t.Fatal("SetGaps accepted min > max")
	}
	if err := e.SetGaps(-time.Second, time.Second); err == nil {
		t.Fatal("SetGaps accepted a negative gap")
	}
	if err := e.SetGaps(time.Second, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if lo, hi := e.Gaps(); lo != time.Second || hi != 3*time.Second {
		t.Fatalf("gaps %v..%v", lo, hi)
	}
	if err := e.SetGaps(0, 0); err != nil {
		t.Fatalf("zero gaps: %v", err)
	}
}

// decodeThumb checks the stored thumbnail of id against the result and returns it.
func decodeThumb(t *testing.T, e *Engine, id int64, res Result) image.Image {
	t.Helper()
	if res.Outcome != Cached {
		t.Fatalf("outcome %q (%s), want cached", res.Outcome, res.Err)
	}
	path := e.PreviewPath(id)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("thumbnail missing: %v", err)
	}
	if res.Bytes != st.Size() || res.Bytes == 0 {
		t.Fatalf("Bytes %d, file size %d", res.Bytes, st.Size())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("thumbnail is not a JPEG: %v", err)
	}
	return img
}

func near(c color.Color, want color.RGBA) bool {
	r, g, b, _ := c.RGBA()
	d := func(a uint32, b uint8) bool { return math.Abs(float64(a>>8)-float64(b)) <= 24 }
	return d(r, want.R) && d(g, want.G) && d(b, want.B)
}

func TestPreviewCachesFormats(t *testing.T) {
	t.Parallel()
	webp, err := os.ReadFile(webpFixture)
	if err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	c := newCDN(t, clock, map[string]http.HandlerFunc{
		"/a.png":     serveBytes("image/png", pngBytes(t, 640, 480)),
		"/b.jpg":     serveBytes("image/jpeg", jpegBytes(t, 600, 800)),
		"/c.gif":     serveBytes("image/gif", gifBytes(t, 400, 300)),
		"/d.webp":    serveBytes("image/webp", webp),
		"/small.png": serveBytes("image/png", pngBytes(t, 100, 50)),
	})
	e := newTestEngine(t, clock)

	cases := []struct {
		id         int64
		kind, path string
		w, h       int
		check      func(t *testing.T, img image.Image)
	}{
		{1, KindImage, "/a.png", 320, 240, func(t *testing.T, img image.Image) {
			// The transparent quadrant is flattened onto white.
			if c := img.At(10, 10); !near(c, color.RGBA{255, 255, 255, 255}) {
				t.Errorf("transparent corner is %v, want white", c)
			}
		}},
		{2, KindImage, "/b.jpg", 240, 320, nil},
		{3, KindGIF, "/c.gif", 320, 240, func(t *testing.T, img image.Image) {
			if c := img.At(160, 120); !near(c, color.RGBA{255, 0, 0, 255}) {
				t.Errorf("gif thumbnail is %v, want the red first frame", c)
			}
		}},
		{4, KindImage, "/d.webp", 320, 213, func(t *testing.T, img image.Image) {
			if c := img.At(100, 100); !near(c, color.RGBA{webpColor.R, webpColor.G, webpColor.B, 255}) {
				t.Errorf("webp thumbnail is %v, want %v", c, webpColor)
			}
		}},
		{5, KindImage, "/small.png", 100, 50, nil},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			res := e.Preview(context.Background(), Item{ID: tc.id, Kind: tc.kind, URL: c.url(tc.path)})
			if res.Status != http.StatusOK {
				t.Errorf("status %d", res.Status)
			}
			img := decodeThumb(t, e, tc.id, res)
			b := img.Bounds()
			if b.Dx() > 320 || b.Dy() > 320 {
				t.Fatalf("thumbnail %v exceeds 320", b)
			}
			if b.Dx() != tc.w || b.Dy() != tc.h {
				t.Fatalf("thumbnail %dx%d, want %dx%d", b.Dx(), b.Dy(), tc.w, tc.h)
			}
			if tc.check != nil {
				tc.check(t, img)
			}
		})
	}
	// No temporary files are left beside the thumbnails.
	_ = filepath.WalkDir(e.cfg.PreviewDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".tmp-") {
			t.Errorf("leftover temp file %s", p)
		}
		return nil
	})
}

func TestGapBetweenRequests(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	png := pngBytes(t, 8, 8)
	c := newCDN(t, clock, map[string]http.HandlerFunc{"/p.png": serveBytes("image/png", png)})
	rands := []float64{0, 0.5, 0.999}
	var next int
	e := newTestEngine(t, clock, func(cfg *Config) {
		cfg.MinGap, cfg.MaxGap = 200*time.Millisecond, 600*time.Millisecond
		cfg.Rand = func() float64 { r := rands[next%len(rands)]; next++; return r }
	})
	for i := range 4 {
		if res := e.Preview(context.Background(), image1(int64(i), c.url("/p.png"))); res.Outcome != Cached {
			t.Fatalf("request %d: %+v", i, res)
		}
	}
	sleeps := clock.Sleeps()
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 599600 * time.Microsecond}
	if len(sleeps) != len(want) {
		t.Fatalf("sleeps %v, want %v (none before the first request)", sleeps, want)
	}
	for i, d := range sleeps {
		if d < 200*time.Millisecond || d > 600*time.Millisecond {
			t.Errorf("gap %v outside [200ms, 600ms]", d)
		}
		if d != want[i] {
			t.Errorf("gap %d = %v, want %v", i, d, want[i])
		}
	}
	times := c.Times()
	for i := 1; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d < 200*time.Millisecond || d > 600*time.Millisecond {
			t.Errorf("requests %d and %d are %v apart", i-1, i, d)
		}
	}

	// Time already spent since the previous request counts towards the gap.
	if err := e.SetGaps(200*time.Millisecond, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	e.Preview(context.Background(), image1(9, c.url("/p.png")))
	if got := clock.Sleeps(); len(got) != len(want) {
		t.Fatalf("slept %v after an idle second", got[len(want):])
	}
	clock.Advance(100 * time.Millisecond)
	e.Preview(context.Background(), image1(10, c.url("/p.png")))
	if got := clock.Sleeps(); len(got) != len(want)+1 || got[len(want)] != 100*time.Millisecond {
		t.Fatalf("sleeps %v, want a final 100ms (200ms gap, 100ms already passed)", got)
	}
}

func TestSkipsVideoAndAudio(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	c := newCDN(t, clock, nil)
	e := newTestEngine(t, clock)
	for _, kind := range []string{KindVideo, KindAudio, "sticker"} {
		res := e.Preview(context.Background(), Item{ID: 1, Kind: kind, URL: c.url("/x")})
		if res.Outcome != Skipped || res.Status != 0 || res.Bytes != 0 {
			t.Errorf("%s: %+v, want skipped", kind, res)
		}
	}
	if n := c.hits.Load(); n != 0 {
		t.Fatalf("%d requests for skipped kinds", n)
	}
	if s := clock.Sleeps(); len(s) != 0 {
		t.Fatalf("slept %v for skipped kinds", s)
	}
}

func TestNonHTTPURLFails(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t, newFakeClock())
	for _, u := range []string{"", "file:///etc/passwd", "ftp://x/y.png", "http://", "::"} {
		if res := e.Preview(context.Background(), image1(1, u)); res.Outcome != Failed {
			t.Errorf("%q: %+v, want failed", u, res)
		}
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	png := pngBytes(t, 8, 8)
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    time.Duration
	}{
		{"header", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusTooManyRequests)
		}, 5 * time.Second},
		{"json body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"message":"You are being rate limited.","retry_after":2.5,"global":false}`))
		}, 2500 * time.Millisecond},
		{"http date", func(w http.ResponseWriter, r *http.Request) {
			// The handler reads the fake clock, as a server's clock would agree with ours.
			w.Header().Set("Retry-After", newFakeClock().Now().Add(90*time.Second).Format(http.TimeFormat))
			w.WriteHeader(http.StatusTooManyRequests)
		}, 90 * time.Second},
		{"nothing said", serveStatus(http.StatusTooManyRequests), 7 * time.Second},
		{"absurd", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "1e300")
			w.WriteHeader(http.StatusTooManyRequests)
		}, MaxRateLimitWait},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			c := newCDN(t, clock, map[string]http.HandlerFunc{"/limited": tc.handler, "/p.png": serveBytes("image/png", png)})
			e := newTestEngine(t, clock, func(cfg *Config) { cfg.DefaultRateLimit = 7 * time.Second })

			start := clock.Now()
			res := e.Preview(context.Background(), image1(1, c.url("/limited")))
			if res.Outcome != RateLimited || res.Status != http.StatusTooManyRequests {
				t.Fatalf("result %+v, want ratelimited 429", res)
			}
			if res.Outcome.State() != "" {
				t.Fatalf("ratelimited changes the row to %q", res.Outcome.State())
			}
			l := e.RateLimit()
			if !l.Active || !l.Until.Equal(start.Add(tc.want)) || l.Remaining != tc.want {
				t.Fatalf("limit %+v, want until now+%v", l, tc.want)
			}

			// While limited, nothing is requested and nothing waits.
			hits, sleeps := c.hits.Load(), len(clock.Sleeps())
			res = e.Preview(context.Background(), image1(2, c.url("/p.png")))
			if res.Outcome != RateLimited || res.Status != 0 {
				t.Fatalf("during the limit: %+v", res)
			}
			if c.hits.Load() != hits || len(clock.Sleeps()) != sleeps {
				t.Fatal("a request was made while rate limited")
			}

			clock.Advance(tc.want)
			if l := e.RateLimit(); l.Active {
				t.Fatalf("still limited after Until: %+v", l)
			}
			if res := e.Preview(context.Background(), image1(3, c.url("/p.png"))); res.Outcome != Cached {
				t.Fatalf("after the limit: %+v", res)
			}
			if c.hits.Load() != hits+1 {
				t.Fatal("requests did not resume")
			}
		})
	}
}

func TestRateLimitNeverShortens(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := newTestEngine(t, clock)
	e.limitFor(time.Minute)
	e.limitFor(time.Second)
	if l := e.RateLimit(); l.Remaining != time.Minute {
		t.Fatalf("limit shortened to %v", l.Remaining)
	}
}

func TestSuspectStatuses(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	routes := map[string]http.HandlerFunc{}
	codes := []int{403, 404, 408, 410, 500, 502, 503}
	for _, code := range codes {
		routes["/"+strconv.Itoa(code)] = serveStatus(code)
	}
	c := newCDN(t, clock, routes)
	e := newTestEngine(t, clock)
	for _, code := range codes {
		u := c.url("/" + strconv.Itoa(code))
		res := e.Preview(context.Background(), image1(1, u))
		if res.Outcome != Suspect || res.Status != code {
			t.Errorf("%d: %+v, want suspect", code, res)
		}
		res = e.Preview(context.Background(), Item{ID: 1, Kind: KindGIF, URL: u, Retry: true})
		if res.Outcome != Unverified || res.Status != code {
			t.Errorf("%d retry: %+v, want unverified", code, res)
		}
	}
	if l := e.RateLimit(); l.Active {
		t.Fatal("a suspect status rate limited the engine")
	}
}

func TestFailedStatusesAndContent(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	png := pngBytes(t, 64, 64)
	c := newCDN(t, clock, map[string]http.HandlerFunc{
		"/400":     serveStatus(400),
		"/401":     serveStatus(401),
		"/garbage": serveBytes("image/png", []byte("definitely not an image, just some bytes")),
		"/empty":   serveBytes("image/png", nil),
		"/big": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(png)))
			_, _ = w.Write(png)
		},
		"/big-chunked": func(w http.ResponseWriter, r *http.Request) {
			// Flushing first forces chunked encoding: no Content-Length to trust.
			w.(http.Flusher).Flush()
			for range 100 {
				if _, err := w.Write(png); err != nil {
					return
				}
			}
		},
		"/huge-header": serveBytes("image/png", hugePNGHeader(100000, 100000)),
		"/many-pixels": serveBytes("image/png", png),
	})
	e := newTestEngine(t, clock, func(cfg *Config) { cfg.MaxBytes = int64(len(png)) - 1 })
	few := newTestEngine(t, clock, func(cfg *Config) { cfg.MaxPixels = 64*64 - 1 })
	cases := []struct {
		e      *Engine
		path   string
		status int
		reason string
	}{
		{e, "/400", 400, "status 400"},
		{e, "/401", 401, "status 401"},
		{e, "/garbage", 200, "undecodable"},
		{e, "/empty", 200, "undecodable"},
		{e, "/big", 200, "too large"},
		{e, "/big-chunked", 200, "too large"},
		{few, "/huge-header", 200, "too many pixels"},
		{few, "/many-pixels", 200, "too many pixels"},
	}
	for _, tc := range cases {
		for _, retry := range []bool{false, true} {
			res := tc.e.Preview(context.Background(), Item{ID: 7, Kind: KindImage, URL: c.url(tc.path), Retry: retry})
			if res.Outcome != Failed || res.Status != tc.status || !strings.Contains(res.Err, tc.reason) {
				t.Errorf("%s (retry %v): %+v, want failed %d %q", tc.path, retry, res, tc.status, tc.reason)
			}
		}
		if _, err := os.Stat(tc.e.PreviewPath(7)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left a thumbnail: %v", tc.path, err)
		}
	}
}

// The default 50M-pixel cap must reject a header-only bomb before decoding.
func TestHugeHeaderDefaultLimits(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	c := newCDN(t, clock, map[string]http.HandlerFunc{
		"/bomb.png": serveBytes("image/png", hugePNGHeader(100000, 100000)),
	})
	e := newTestEngine(t, clock)
	res := e.Preview(context.Background(), image1(1, c.url("/bomb.png")))
	if res.Outcome != Failed || !strings.Contains(res.Err, "100000x100000") {
		t.Fatalf("%+v, want failed for too many pixels", res)
	}
}

func TestTimeoutIsSuspect(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	c := newCDN(t, clock, map[string]http.HandlerFunc{
		"/hang": func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
		"/slow-body": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "image/png")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("\x89PNG"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		},
	})
	e := newTestEngine(t, clock, func(cfg *Config) { cfg.Timeout = 50 * time.Millisecond })
	for _, p := range []string{"/hang", "/slow-body"} {
		res := e.Preview(context.Background(), image1(1, c.url(p)))
		if res.Outcome != Suspect || !strings.Contains(res.Err, "timeout") {
			t.Errorf("%s: %+v, want suspect timeout", p, res)
		}
		res = e.Preview(context.Background(), Item{ID: 1, Kind: KindImage, URL: c.url(p), Retry: true})
		if res.Outcome != Unverified {
			t.Errorf("%s retry: %+v, want unverified", p, res)
		}
	}
}

func TestConnectionRefusedIsSuspect(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	e := newTestEngine(t, newFakeClock())
	res := e.Preview(context.Background(), image1(1, "http://"+addr+"/x.png"))
	if res.Outcome != Suspect || res.Status != 0 || !strings.Contains(res.Err, "refused") {
		t.Fatalf("%+v, want suspect connection refused", res)
	}
	if strings.Contains(res.Err, "/x.png") {
		t.Fatalf("reason leaks the URL: %q", res.Err)
	}
}

func TestCanceledContextIsPending(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	c := newCDN(t, clock, map[string]http.HandlerFunc{
		"/hang": func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
	})
	e := newTestEngine(t, clock)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	res := e.Preview(ctx, image1(1, c.url("/hang")))
	if res.Outcome != Pending || res.Outcome.State() != "" {
		t.Fatalf("%+v, want pending", res)
	}
}

func TestStoreFailureIsPending(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	c := newCDN(t, clock, map[string]http.HandlerFunc{"/p.png": serveBytes("image/png", pngBytes(t, 8, 8))})
	e := newTestEngine(t, clock)
	// A file where the shard directory should be makes the write fail.
	if err := os.WriteFile(filepath.Dir(e.PreviewPath(3)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res := e.Preview(context.Background(), image1(3, c.url("/p.png")))
	if res.Outcome != Pending || !strings.Contains(res.Err, "store") {
		t.Fatalf("%+v, want pending on a local write failure", res)
	}
	var recorded int
	_, err := e.Batch(context.Background(), []Item{image1(3, c.url("/p.png"))}, func(Item, Result) error {
		recorded++
		return nil
	})
	if err == nil || recorded != 0 {
		t.Fatalf("Batch: err %v, recorded %d; want an error and nothing recorded", err, recorded)
	}
}

func TestBatch(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	png := pngBytes(t, 16, 16)
	c := newCDN(t, clock, map[string]http.HandlerFunc{
		"/ok.png": serveBytes("image/png", png),
		"/junk":   serveBytes("text/plain", []byte("junk")),
		"/gone":   serveStatus(http.StatusGone),
		"/limited": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
		},
	})
	e := newTestEngine(t, clock)
	items := []Item{
		image1(1, c.url("/ok.png")),
		{ID: 2, Kind: KindVideo, URL: c.url("/v.mp4")},
		image1(3, c.url("/junk")),
		image1(4, c.url("/gone")),
		{ID: 5, Kind: KindImage, URL: c.url("/gone"), Retry: true},
		image1(6, c.url("/limited")),
		image1(7, c.url("/ok.png")),
		{ID: 8, Kind: KindAudio, URL: c.url("/a.ogg")},
	}
	var got []int64
	states := map[int64]string{}
	counts, err := e.Batch(context.Background(), items, func(it Item, res Result) error {
		got = append(got, it.ID)
		states[it.ID] = res.Outcome.State()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := BatchResult{Cached: 1, Skipped: 1, Failed: 1, Suspect: 1, Unverified: 1, RateLimited: 1}
	if counts != want {
		t.Fatalf("counts %+v, want %+v", counts, want)
	}
	if len(got) != 6 || got[5] != 6 {
		t.Fatalf("recorded %v, want 1..6 and nothing after the 429", got)
	}
	wantStates := map[int64]string{1: StateCached, 2: StateSkipped, 3: StateFailed, 4: StateSuspect, 5: StateUnverified, 6: ""}
	for id, s := range wantStates {
		if states[id] != s {
			t.Errorf("row %d state %q, want %q", id, states[id], s)
		}
	}
	if n := c.hits.Load(); n != 5 {
		t.Fatalf("%d requests, want 5 (the 429 stops the batch)", n)
	}

	// The next batch, still inside the limit, stops at once without a request.
	counts, err = e.Batch(context.Background(), items[6:], func(Item, Result) error { return nil })
	if err != nil || counts != (BatchResult{RateLimited: 1}) || c.hits.Load() != 5 {
		t.Fatalf("limited batch: %+v %v, hits %d", counts, err, c.hits.Load())
	}
}

func TestBatchRecordErrorStops(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	c := newCDN(t, clock, map[string]http.HandlerFunc{"/ok.png": serveBytes("image/png", pngBytes(t, 4, 4))})
	e := newTestEngine(t, clock)
	boom := errors.New("db down")
	var calls int
	counts, err := e.Batch(context.Background(), []Item{image1(1, c.url("/ok.png")), image1(2, c.url("/ok.png"))},
		func(Item, Result) error { calls++; return boom })
	if !errors.Is(err, boom) || calls != 1 || counts != (BatchResult{}) {
		t.Fatalf("err %v, calls %d, counts %+v", err, calls, counts)
	}
	if c.hits.Load() != 1 {
		t.Fatalf("%d requests after the record error", c.hits.Load())
	}
}

func TestBatchCanceled(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	c := newCDN(t, clock, nil)
	e := newTestEngine(t, clock)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.Batch(ctx, []Item{image1(1, c.url("/x"))}, func(Item, Result) error {
		t.Error("recorded after cancel")
		return nil
	})
	if !errors.Is(err, context.Canceled) || c.hits.Load() != 0 {
		t.Fatalf("err %v, hits %d", err, c.hits.Load())
	}
}

func TestPreviewPathAndRemove(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t, newFakeClock())
	root := e.cfg.PreviewDir + string(filepath.Separator)
	seen := map[string]bool{}
	for _, id := range []int64{0, 1, 255, 256, 12345, -1, math.MaxInt64, math.MinInt64} {
		p := e.PreviewPath(id)
		if !strings.HasPrefix(p, root) || filepath.Clean(p) != p {
			t.Errorf("PreviewPath(%d) = %q escapes %q", id, p, root)
		}
		if rel, _ := filepath.Rel(e.cfg.PreviewDir, p); strings.Count(rel, string(filepath.Separator)) != 1 {
			t.Errorf("PreviewPath(%d) = %q is not shard/file", id, p)
		}
		if seen[p] {
			t.Errorf("PreviewPath(%d) = %q collides", id, p)
		}
		seen[p] = true
	}

	if err := e.RemovePreview(42); err != nil {
		t.Fatalf("removing a missing preview: %v", err)
	}
	p := e.PreviewPath(42)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.RemovePreview(42); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("preview still there: %v", err)
	}
}

func TestOutcomeState(t *testing.T) {
	t.Parallel()
	want := map[Outcome]string{
		Cached: StateCached, Skipped: StateSkipped, Failed: StateFailed, Suspect: StateSuspect,
		Unverified: StateUnverified, RateLimited: "", Pending: "",
	}
	for o, s := range want {
		if o.State() != s {
			t.Errorf("%s.State() = %q, want %q", o, o.State(), s)
		}
	}
}

// Concurrent callers share one gap schedule: with a fixed gap, no two
// requests start closer than the gap on the engine's clock.
func TestConcurrentPreviews(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	c := newCDN(t, clock, map[string]http.HandlerFunc{"/ok.png": serveBytes("image/png", pngBytes(t, 32, 32))})
	e := newTestEngine(t, clock, func(cfg *Config) {
		cfg.MinGap, cfg.MaxGap = 100*time.Millisecond, 100*time.Millisecond
	})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if res := e.Preview(context.Background(), image1(int64(i), c.url("/ok.png"))); res.Outcome != Cached {
				t.Errorf("item %d: %+v", i, res)
			}
		})
	}
	wg.Wait()
	var total time.Duration
	for _, d := range clock.Sleeps() {
		total += d
	}
	if c.hits.Load() != 8 || total < 7*100*time.Millisecond {
		t.Fatalf("hits %d, total wait %v; want 8 requests spread by at least 700ms", c.hits.Load(), total)
	}
}
