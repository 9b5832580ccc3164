// Command eta measures how well the backfill's ETAs predict what really happens (issue 13).
//
// It runs a real owed (app.New on a fresh SQLite file, served on loopback) against a CDN
// stand-in on loopback whose service time per request is known and adjustable, and for each
// scenario it pushes four chats through the bot's routes, presses "Start all", pauses one chat
// at once, and samples GET /api/backfill every second until the other three are done. Then it
// compares every ETA the status gave with when things really happened: a job's start (its first
// request at the CDN) and finish (its finishedAt).
//
// Scenarios (the event comes 60 s after the queue's first request, while the second job runs
// and the third is queued):
//
//	steady    the CDN serves at one rate throughout
//	slowing   the CDN's service time grows by half (its rate falls by a third)
//	429       the CDN answers one 429 with Retry-After: 10
//	walk      the bot starts a walk in another chat; it holds the media lock for OWED_WALK_IDLE (15 s)
//	steady429 steady 429s, from the first request to the last: every 30th request answers 429
//	          with Retry-After: 1 (about a fifth of the time goes on waiting), no event
//
// For etaStartMs (queued jobs), etaMs (the running job: to its finish; a queued job: its run
// time), etaTotalMs (every scheduled job's finish) and the totals' etaTotalMs (the end of the
// queue), it prints the median and worst relative error |predicted − actual| / actual. A sample
// counts once a job of the queue has run 30 s — from the first sample whose status reports a
// measured rate (before that the rate is an estimate by design) — and when the actual figure is
// at least 10 s (below, a second of sampling is already 10 %).
//
//	cd bench && go run ./cmd/eta                          # every scenario, owed's rate model
//	go run ./cmd/eta -scenario steady -rate ewma -window 1m -trace /tmp/after.json
//	go run ./cmd/eta -chart before.json,after.json -labels before,after -out ../docs/eta-steady.svg
//
// To measure owed before issue 13, build against that tree with -tags etabefore (it has no rate
// models to choose from): see docs/benchmarks.md.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/owed/owed/app"
)

const adminToken = "owed_eta_bench_admin_0123456789abcdef" // OWED_ADMIN_TOKEN: 32 characters or more

// The queue: three chats run in turn (smallest first, as Start all takes them) and a fourth is
// paused right after the start; at the default 100 ms a request and a 200 ms pause every 20
// rows (about 480 rows a minute with owed's own work per row) they run about 40 s, 45 s and
// 50 s: each longer than the 30 s before a rate is measured.
var chats = []struct {
	id     string
	rows   int
	paused bool
}{
	{"c-small", 320, false},
	{"p-paused", 340, true},
	{"b-mid", 360, false},
	{"a-large", 400, false},
}

const (
	eventAfter   = 60 * time.Second
	countAfter   = 30 * time.Second
	minActual    = 10 * time.Second
	walkIdle     = 15 * time.Second
	limitSeconds = 10
	// The steady429 scenario: every steadyEvery-th request answers 429 with Retry-After
	// steadySeconds.
	steadyEvery   = 30
	steadySeconds = 1
)

func main() {
	var (
		scenarios = flag.String("scenario", "steady,slowing,429,walk,steady429", "scenarios to run, comma-separated")
		rate      = flag.String("rate", "default", "rate model: default (owed's choice), plain, ewma")
		window    = flag.Duration("window", time.Minute, "the ewma model's time constant")
		service   = flag.Duration("service", 100*time.Millisecond, "the CDN's service time per request")
		trace     = flag.String("trace", "", "write every sample and the actual times to this JSON file")
		label     = flag.String("label", "", "a label for the table (default: the rate model)")
		chart     = flag.String("chart", "", "draw a chart from trace files (comma-separated) instead of running")
		reeval    = flag.String("evaluate", "", "print the tables of trace files (comma-separated, labelled by -labels) instead of running")
		labels    = flag.String("labels", "", "the traces' labels in the chart, comma-separated")
		chartOf   = flag.String("chart-scenario", "steady", "the scenario the chart shows")
		out       = flag.String("out", "eta.svg", "the chart to write")
	)
	flag.Parse()
	if *chart != "" {
		if err := drawChart(strings.Split(*chart, ","), strings.Split(*labels, ","), *chartOf, *out); err != nil {
			fail(err)
		}
		return
	}
	if *reeval != "" {
		var rows []tableRow
		names := strings.Split(*labels, ",")
		for i, f := range strings.Split(*reeval, ",") {
			raw, err := os.ReadFile(f)
			if err != nil {
				fail(err)
			}
			var trs []scenarioTrace
			if err := json.Unmarshal(raw, &trs); err != nil {
				fail(fmt.Errorf("%s: %w", f, err))
			}
			name := f
			if i < len(names) && names[i] != "" {
				name = names[i]
			}
			for _, tr := range trs {
				rows = append(rows, evaluate(tr, name)...)
			}
		}
		printTable(rows)
		return
	}
	if *label == "" {
		*label = *rate
	}
	var traces []scenarioTrace
	var rows []tableRow
	for _, name := range strings.Split(*scenarios, ",") {
		tr, err := runScenario(name, *rate, *window, *service)
		if err != nil {
			fail(fmt.Errorf("%s: %w", name, err))
		}
		traces = append(traces, tr)
		rows = append(rows, evaluate(tr, *label)...)
	}
	printTable(rows)
	if *trace != "" {
		raw, err := json.MarshalIndent(traces, "", " ")
		if err != nil {
			fail(err)
		}
		if err := os.WriteFile(*trace, raw, 0o644); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "eta:", err)
	os.Exit(1)
}

// status is what the bench reads of GET /api/backfill's answer (the API's BackfillStatus
// schema): the jobs' states, finishes and ETAs, and the queue's total ETA.
type status struct {
	Jobs   []jobStatus `json:"jobs"`
	Totals struct {
		EtaTotalMs *int64 `json:"etaTotalMs"`
	} `json:"totals"`
}

// jobStatus is what the bench reads of one job of the status.
type jobStatus struct {
	ChatID       string  `json:"chatId"`
	State        string  `json:"state"`
	FinishedAt   *string `json:"finishedAt"`
	RateMeasured bool    `json:"rateMeasured"`
	EtaMs        *int64  `json:"etaMs"`
	EtaStartMs   *int64  `json:"etaStartMs"`
	EtaTotalMs   *int64  `json:"etaTotalMs"`
}

// sample is one status read, at At ms after the queue's first request.
type sample struct {
	At     int64  `json:"at"`
	Status status `json:"status"`
}

// scenarioTrace is one scenario's samples and what really happened (ms after the queue's
// first request).
type scenarioTrace struct {
	Scenario string           `json:"scenario"`
	Samples  []sample         `json:"samples"`
	Start    map[string]int64 `json:"start"`
	Finish   map[string]int64 `json:"finish"`
}

// cdn is the media CDN stand-in: every request takes the service time, then answers a PNG
// (or, once when asked, a 429; or, when every is set, a 429 every so many requests). It
// records each chat's first request.
type cdn struct {
	srv      *httptest.Server
	service  atomic.Int64 // ns a request takes
	limit    atomic.Bool  // the next request answers 429
	every    atomic.Int64 // when > 0, every every-th request answers 429 with Retry-After: steadySeconds
	requests atomic.Int64
	png      []byte

	mu    sync.Mutex
	first map[string]time.Time
	t0    time.Time
}

func newCDN(service time.Duration) *cdn {
	img := image.NewRGBA(image.Rect(0, 0, 32, 24))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	var b bytes.Buffer
	png.Encode(&b, img)
	c := &cdn{png: b.Bytes(), first: map[string]time.Time{}}
	c.service.Store(int64(service))
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	return c
}

func (c *cdn) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	chat := strings.Split(strings.Trim(r.URL.Path, "/"), "/")[0]
	c.mu.Lock()
	if c.t0.IsZero() {
		c.t0 = now
	}
	if _, ok := c.first[chat]; !ok {
		c.first[chat] = now
	}
	c.mu.Unlock()
	time.Sleep(time.Duration(c.service.Load()))
	if c.limit.CompareAndSwap(true, false) {
		w.Header().Set("Retry-After", strconv.Itoa(limitSeconds))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	if every := c.every.Load(); c.requests.Add(1)%max(every, 1) == 0 && every > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(steadySeconds))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Write(c.png)
}

func (c *cdn) started() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t0, !c.t0.IsZero()
}

// client talks to the owed under test.
type client struct {
	base string
	http *http.Client
}

func (c *client) do(method, path, token string, body, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

func runScenario(name, rate string, window, service time.Duration) (scenarioTrace, error) {
	tr := scenarioTrace{Scenario: name, Start: map[string]int64{}, Finish: map[string]int64{}}
	switch name {
	case "steady", "slowing", "429", "walk", "steady429":
	default:
		return tr, fmt.Errorf("unknown scenario %q", name)
	}
	dir, err := os.MkdirTemp("", "owed-eta-")
	if err != nil {
		return tr, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	c := newCDN(service)
	defer c.srv.Close()
	if name == "steady429" {
		c.every.Store(steadyEvery)
	}
	env := map[string]string{
		"OWED_DATA_DIR": dir, "OWED_DATABASE_URL": "sqlite:" + filepath.Join(dir, "owed.db"), "OWED_ADMIN_TOKEN": adminToken,
		"OWED_MEDIA_MIN_GAP_MS": "0", "OWED_MEDIA_MAX_GAP_MS": "0", "OWED_WALK_IDLE": walkIdle.String(),
		"OWED_WRITE_RATE": "0", "OWED_LOG_FORMAT": "text",
		// The CDN stand-in is on loopback; owed builds that guard media fetches need this.
		"OWED_MEDIA_ALLOW_PRIVATE": "1",
	}
	cfg, err := app.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		return tr, err
	}
	opts := appOptions(rate, window)
	opts.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	opts.Out = io.Discard
	a, err := app.New(ctx, cfg, opts)
	if err != nil {
		return tr, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return tr, err
	}
	if err := a.Serve(ctx, ln); err != nil {
		return tr, err
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		a.Shutdown(sctx)
	}()
	cl := &client{base: "http://" + ln.Addr().String(), http: &http.Client{Timeout: 30 * time.Second}}

	var bot struct {
		Token string `json:"token"`
	}
	if err := cl.do(http.MethodPost, "/api/admin/users", adminToken, map[string]string{"name": "archiver", "role": "bot"}, &bot); err != nil {
		return tr, err
	}
	for _, ch := range chats {
		var sc struct {
			ID int64 `json:"id"`
		}
		if err := cl.do(http.MethodPost, "/api/scrapes", bot.Token, map[string]string{"chatId": ch.id, "guildId": "g", "backend": "puppet", "mode": "history"}, &sc); err != nil {
			return tr, err
		}
		media := make([]map[string]string, ch.rows)
		for i := range media {
			media[i] = map[string]string{"url": fmt.Sprintf("%s/%s/%d.png", c.srv.URL, ch.id, i), "kind": "image"}
		}
		if err := cl.do(http.MethodPost, fmt.Sprintf("/api/scrapes/%d/media", sc.ID), bot.Token, map[string]any{"media": media}, nil); err != nil {
			return tr, err
		}
		if err := cl.do(http.MethodPatch, fmt.Sprintf("/api/scrapes/%d", sc.ID), bot.Token, map[string]string{"state": "done"}, nil); err != nil {
			return tr, err
		}
	}
	if err := cl.do(http.MethodPut, "/api/backfill/settings", adminToken, map[string]any{"batchSize": 20, "batchPauseMs": 200, "auto": false}, nil); err != nil {
		return tr, err
	}
	if err := cl.do(http.MethodPost, "/api/backfill/start", adminToken, map[string]any{}, nil); err != nil {
		return tr, err
	}
	for _, ch := range chats {
		if ch.paused {
			if err := cl.do(http.MethodPost, "/api/backfill/pause", adminToken, map[string]string{"chatId": ch.id}, nil); err != nil {
				return tr, err
			}
		}
	}

	fmt.Fprintf(os.Stderr, "eta: %s (%s): running\n", name, rate)
	fired := false
	deadline := time.Now().Add(8 * time.Minute)
	var t0 time.Time
	var last status
	for tick := time.NewTicker(time.Second); ; <-tick.C {
		if time.Now().After(deadline) {
			tick.Stop()
			return tr, errors.New("the queue did not finish within 8 minutes")
		}
		if t0.IsZero() {
			var ok bool
			if t0, ok = c.started(); !ok {
				continue
			}
		}
		if !fired && time.Since(t0) >= eventAfter {
			fired = true
			if err := fire(name, c, cl, bot.Token); err != nil {
				return tr, err
			}
		}
		at := time.Now()
		var st status
		if err := cl.do(http.MethodGet, "/api/backfill", adminToken, nil, &st); err != nil {
			return tr, err
		}
		tr.Samples = append(tr.Samples, sample{At: at.Sub(t0).Milliseconds(), Status: st})
		last = st
		if finished(st) {
			tick.Stop()
			break
		}
	}
	c.mu.Lock()
	for chat, at := range c.first {
		tr.Start[chat] = at.Sub(t0).Milliseconds()
	}
	c.mu.Unlock()
	for _, j := range last.Jobs {
		if j.FinishedAt != nil {
			at, err := time.Parse(time.RFC3339Nano, *j.FinishedAt)
			if err != nil {
				return tr, err
			}
			tr.Finish[j.ChatID] = at.Sub(t0).Milliseconds()
		}
	}
	return tr, nil
}

// fire makes the scenario's event happen.
func fire(name string, c *cdn, cl *client, botToken string) error {
	switch name {
	case "slowing":
		c.service.Store(3 * c.service.Load() / 2)
	case "429":
		c.limit.Store(true)
	case "walk":
		// A walk in another chat: an active scrape holds the media lock for OWED_WALK_IDLE.
		return cl.do(http.MethodPost, "/api/scrapes", botToken, map[string]string{"chatId": "walker", "guildId": "g", "backend": "puppet", "mode": "history"}, nil)
	}
	return nil
}

// finished reports whether every chat that is not paused is done.
func finished(st status) bool {
	for _, ch := range chats {
		if ch.paused {
			continue
		}
		found := false
		for _, j := range st.Jobs {
			if j.ChatID == ch.id {
				found = true
				if j.State != "done" {
					return false
				}
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// scheduled reports whether a job is in the schedule as the status shows it: running or queued
// (the paused chat never finishes, so its predictions cannot be checked).
func scheduled(state string) bool { return state == "running" || state == "queued" }

type tableRow struct {
	scenario, label, metric string
	errs                    []float64
}

// evaluate compares every counted sample's ETAs with the actual times.
func evaluate(tr scenarioTrace, label string) []tableRow {
	metrics := []string{"etaStartMs", "etaMs", "etaTotalMs", "totals.etaTotalMs"}
	errs := map[string][]float64{}
	rel := func(metric string, predicted *int64, actual int64) {
		if predicted == nil || actual < minActual.Milliseconds() {
			return
		}
		errs[metric] = append(errs[metric], math.Abs(float64(*predicted-actual))/float64(actual))
	}
	var queueEnd int64
	for _, f := range tr.Finish {
		queueEnd = max(queueEnd, f)
	}
	// Samples count from the first one in which the status reports a measured rate: a job has
	// run 30 s and a batch has ended since (never earlier than 30 s into the queue).
	from := int64(-1)
	for _, s := range tr.Samples {
		for _, j := range s.Status.Jobs {
			if j.RateMeasured && from < 0 {
				from = max(s.At, countAfter.Milliseconds())
			}
		}
	}
	for _, s := range tr.Samples {
		if from < 0 || s.At < from {
			continue
		}
		for _, j := range s.Status.Jobs {
			start, started := tr.Start[j.ChatID]
			finish, finishes := tr.Finish[j.ChatID]
			if !scheduled(j.State) || !finishes {
				continue
			}
			running := started && start <= s.At
			if !running {
				rel("etaStartMs", j.EtaStartMs, start-s.At)
				rel("etaMs", j.EtaMs, finish-start)
			} else {
				rel("etaMs", j.EtaMs, finish-s.At)
			}
			rel("etaTotalMs", j.EtaTotalMs, finish-s.At)
		}
		rel("totals.etaTotalMs", s.Status.Totals.EtaTotalMs, queueEnd-s.At)
	}
	var rows []tableRow
	for _, m := range metrics {
		rows = append(rows, tableRow{scenario: tr.Scenario, label: label, metric: m, errs: errs[m]})
	}
	return rows
}

func printTable(rows []tableRow) {
	fmt.Println("| scenario | owed | ETA | samples | median error | worst error |")
	fmt.Println("| --- | --- | --- | ---: | ---: | ---: |")
	for _, r := range rows {
		med, worst := "—", "—"
		if len(r.errs) > 0 {
			e := slices.Clone(r.errs)
			slices.Sort(e)
			med, worst = pct(median(e)), pct(e[len(e)-1])
		}
		fmt.Printf("| %s | %s | `%s` | %d | %s | %s |\n", r.scenario, r.label, r.metric, len(r.errs), med, worst)
	}
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func pct(v float64) string {
	if v >= 10 {
		return fmt.Sprintf("%.0f %%", 100*v)
	}
	return fmt.Sprintf("%.1f %%", 100*v)
}
