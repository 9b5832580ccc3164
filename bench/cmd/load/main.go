// Columns of each load run: what, mode, throughput, p50, p99, max, the server's CPU per
// request (-pid), answers not of the expected status, the server's resident memory (-pid).
//
// Command load is an open-loop load generator for owed, run as a process of its own so that it
// never shares the server's process or its scheduler (issue 15, item 6). Requests go out at a
// fixed rate whatever the server's latency (vegeta's attacker, used as a library), so queueing
// delay is counted in the latencies; -rate 0 saturates instead, with -workers requests in
// flight.
//
// Against `go run ./cmd/scale -phase serve -file F` (a seeded million items, known tokens):
//
//	go run ./cmd/load -target http://127.0.0.1:8080 -run mine,304,jobs-why,jobs-user -rate 0
//	go run ./cmd/load -target http://127.0.0.1:8080 -run mine,jobs-why,jobs-user -rate 1000
//	go run ./cmd/load -target http://127.0.0.1:8080 -run 304 -rate 5000
//	go run ./cmd/load -target http://127.0.0.1:8080 -run streams -streams 10000 -writers 1000 -pid PID
//	go run ./cmd/load -target http://127.0.0.1:8080 -run heavy,heavy-304,heavy-page -rate 100   # after scale -phase heavy
//
// heavy, heavy-304 and heavy-page load the one author of cmd/scale -phase heavy (100,000 owed
// jobs): their first page (mine?limit=100), its 304, and pages at random cursors (each built:
// the first page asked again unchanged is answered from the server's kept answers). metrics
// scrapes /metrics. With -stream-authors, the streams run spreads -streams over that many
// authors (issue 25: 10,000 streams over 2,000 authors), and prints the server's CPU (cores)
// while the writes go on.
//
// The streams run opens -streams server-sent event streams of distinct authors, waits until
// the server counts them all (owed_mine_waiters), reads the server's resident memory (-pid),
// then has -writers of those authors each write a pitch, at -write-rate a second, and times
// each write to the first event on its author's stream that shows it (the write's request
// included). With -write-target (another replica on the same PostgreSQL) the writes go there.
// With -create, the authors are made through the admin API (-admin token) instead of taking
// cmd/scale's seeded ones.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// The seeded tokens of cmd/scale.
const scaleAdmin = "owed_scale_admin_token_0123456789abcdef"

// The author cmd/scale -phase heavy adds (issue 25: 100,000 owed jobs).
const scaleHeavy = "owed_scale_heavy"

func scaleAuthor(i int) string { return "owed_scale_author_" + strconv.Itoa(i) }

func main() {
	var (
		target   = flag.String("target", "http://127.0.0.1:8080", "owed's base URL")
		runs     = flag.String("run", "mine,304,jobs-why,jobs-user", "what to load: healthz, mine, 304, jobs-why, jobs-user, heavy, heavy-304, heavy-page, metrics, streams")
		rate     = flag.Int("rate", 0, "requests a second, open loop; 0 saturates with -workers in flight")
		workers  = flag.Uint64("workers", 32, "requests in flight when saturating")
		duration = flag.Duration("duration", 10*time.Second, "each run's length")
		authors  = flag.Int("authors", 10000, "authors seeded by cmd/scale")
		admin    = flag.String("admin", scaleAdmin, "the admin token")
		streams  = flag.Int("streams", 10000, "streams run: streams held open")
		writers  = flag.Int("writers", 1000, "streams run: authors whose items change")
		wrate    = flag.Int("write-rate", 100, "streams run: writes a second")
		wtarget  = flag.String("write-target", "", "streams run: base URL the writes go to (default -target)")
		create   = flag.Bool("create", false, "streams run: make the authors through the admin API")
		pid      = flag.Int("pid", 0, "the server's process id, for its resident memory")
		limit    = flag.Int("stream-limit", 5, "streams run: the page size each stream shows")
		sauthors = flag.Int("stream-authors", 0, "streams run: the authors the streams are spread over (0: one stream each)")
	)
	flag.Parse()
	fmt.Printf("owed load: %s, %s, %d CPUs, %s\n", *target, runtime.Version(), runtime.NumCPU(), time.Now().UTC().Format("2006-01-02 15:04 MST"))
	for _, r := range strings.Split(*runs, ",") {
		switch r {
		case "streams":
			w := *wtarget
			if w == "" {
				w = *target
			}
			runStreams(*target, w, *admin, *authors, *streams, *sauthors, *writers, *wrate, *limit, *create, *pid)
		default:
			attack(r, *target, *admin, *authors, *rate, *workers, *duration, *pid)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "load:", err)
	os.Exit(1)
}

// attack loads one kind of request and prints its figures.
func attack(what, target, admin string, authors, rate int, workers uint64, dur time.Duration, pid int) {
	var (
		mu  sync.Mutex
		rng = rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	)
	pick := func(n int) int {
		mu.Lock()
		defer mu.Unlock()
		return rng.IntN(n)
	}
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	var targeter vegeta.Targeter
	want := http.StatusOK
	switch what {
	case "mine":
		targeter = func(t *vegeta.Target) error {
			t.Method, t.URL, t.Header = http.MethodGet, target+"/api/listeners/mine", bearer(scaleAuthor(pick(authors)))
			return nil
		}
	case "304":
		// The ETags of 1,000 random authors, as their clients would hold them.
		type held struct {
			tok, etag string
		}
		hs := make([]held, 1000)
		for i := range hs {
			tok := scaleAuthor(pick(authors))
			hs[i] = held{tok, etagOf(target+"/api/listeners/mine", tok)}
		}
		want = http.StatusNotModified
		targeter = func(t *vegeta.Target) error {
			h := hs[pick(len(hs))]
			t.Method, t.URL, t.Header = http.MethodGet, target+"/api/listeners/mine", bearer(h.tok)
			t.Header.Set("If-None-Match", h.etag)
			return nil
		}
	case "heavy", "heavy-304":
		// One author with 100,000 owed jobs (cmd/scale -phase heavy): the first page of their
		// view, or its 304.
		url := target + "/api/listeners/mine?limit=100"
		etag := etagOf(url, scaleHeavy)
		if etag == "" {
			fail(fmt.Errorf("heavy: %s answered without an ETag (run cmd/scale -phase heavy)", url))
		}
		if what == "heavy-304" {
			want = http.StatusNotModified
		}
		targeter = func(t *vegeta.Target) error {
			t.Method, t.URL, t.Header = http.MethodGet, url, bearer(scaleHeavy)
			if what == "heavy-304" {
				t.Header.Set("If-None-Match", etag)
			}
			return nil
		}
	case "heavy-page":
		// The same author's pages further back, each at a random place (cursor): every one is
		// built, where the first page, asked again unchanged, is answered from the server's
		// kept answers.
		req, _ := http.NewRequest(http.MethodGet, target+"/api/listeners/mine?limit=100", nil)
		req.Header = bearer(scaleHeavy)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			fail(err)
		}
		var first struct {
			NextCursor *string `json:"nextCursor"`
		}
		err = json.NewDecoder(res.Body).Decode(&first)
		res.Body.Close()
		var cur struct {
			T int64  `json:"t"`
			K string `json:"k"`
			I int64  `json:"i"`
		}
		if err == nil && first.NextCursor != nil {
			var b []byte
			if b, err = base64.RawURLEncoding.DecodeString(*first.NextCursor); err == nil {
				err = json.Unmarshal(b, &cur)
			}
		}
		if err != nil || cur.I < 1000 {
			fail(fmt.Errorf("heavy-page: no cursor to start from (%v; run cmd/scale -phase heavy)", err))
		}
		targeter = func(t *vegeta.Target) error {
			d := int64(pick(int(cur.I - 200)))
			b, _ := json.Marshal(map[string]any{"t": cur.T - d, "k": cur.K, "i": cur.I - d})
			t.Method, t.URL, t.Header = http.MethodGet, target+"/api/listeners/mine?limit=100&cursor="+base64.RawURLEncoding.EncodeToString(b), bearer(scaleHeavy)
			return nil
		}
	case "metrics":
		targeter = func(t *vegeta.Target) error {
			t.Method, t.URL = http.MethodGet, target+"/metrics"
			return nil
		}
	case "healthz":
		// The reference: owed's cheapest answer, in the same run.
		targeter = func(t *vegeta.Target) error {
			t.Method, t.URL = http.MethodGet, target+"/healthz"
			return nil
		}
	case "jobs-why":
		targeter = func(t *vegeta.Target) error {
			t.Method, t.URL, t.Header = http.MethodGet, target+"/api/admin/jobs?why=budget&limit=50", bearer(admin)
			return nil
		}
	case "jobs-user":
		targeter = func(t *vegeta.Target) error {
			t.Method, t.URL, t.Header = http.MethodGet, target+"/api/admin/jobs?userId="+strconv.Itoa(2+pick(authors))+"&limit=50", bearer(admin)
			return nil
		}
	default:
		fail(fmt.Errorf("unknown run %q", what))
	}
	opts := []func(*vegeta.Attacker){vegeta.KeepAlive(true), vegeta.Timeout(30 * time.Second), vegeta.HTTP2(false)}
	r := vegeta.Rate{Freq: rate, Per: time.Second}
	mode := fmt.Sprintf("open loop at %d/s", rate)
	if rate == 0 {
		opts = append(opts, vegeta.Workers(workers), vegeta.MaxWorkers(workers), vegeta.Connections(int(workers)))
		mode = fmt.Sprintf("saturated, %d in flight", workers)
	} else {
		opts = append(opts, vegeta.Workers(64), vegeta.Connections(10000))
	}
	atk := vegeta.NewAttacker(opts...)
	cpu0 := procCPU(pid)
	var m vegeta.Metrics
	bad := 0
	for res := range atk.Attack(targeter, r, dur, what) {
		if int(res.Code) != want {
			bad++
		}
		m.Add(res)
	}
	m.Close()
	cpu := "—"
	if pid != 0 && m.Requests > 0 {
		cpu = ms((procCPU(pid) - cpu0) / time.Duration(m.Requests))
	}
	fmt.Printf("| %s | %s | %.0f/s | %s | %s | %s | %s | %d of %d not %d | %s |\n", what, mode, m.Throughput, ms(m.Latencies.P50), ms(m.Latencies.P99),
		ms(m.Latencies.Max), cpu, bad, m.Requests, want, rss(pid))
}

// etagOf is the ETag of url's answer to tok's GET.
func etagOf(url, tok string) string {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fail(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.Header.Get("ETag")
}

// procCPU is the CPU time the server's process has used (user and system), from /proc: with
// the machine shared, CPU per request is steadier than requests per second.
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from the 3rd on
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// rss is the server's resident memory.
func rss(pid int) string {
	if pid == 0 {
		return "—"
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return fmt.Sprintf("%d MB", kb/1024)
		}
	}
	return "?"
}

// stream is one author's open stream and what it saw.
type stream struct {
	mu     sync.Mutex
	events []seen
}

type seen struct {
	at   time.Time
	data string
}

func runStreams(target, writeTarget, admin string, authors, n, spread, writers, wrate, limit int, create bool, pid int) {
	if spread <= 0 || spread > n {
		spread = n
	}
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: 2000, DisableCompression: true}}
	post := func(base, path, tok string, body any) (map[string]any, error) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode >= 300 {
			return nil, fmt.Errorf("%s: %d %v", path, res.StatusCode, err)
		}
		return out, nil
	}
	toks := make([]string, spread) // stream i is author i % spread's
	for i := range toks {
		if create {
			u, err := post(target, "/api/admin/users", admin, map[string]string{"name": "load" + strconv.Itoa(i), "role": "author"})
			if err != nil {
				fail(err)
			}
			toks[i] = u["token"].(string)
		} else {
			if i >= authors {
				fail(fmt.Errorf("%d streams need %d seeded authors", n, spread))
			}
			toks[i] = scaleAuthor(i)
		}
	}
	base := waiters(target)
	ss := make([]*stream, n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opened := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64) // opening 10,000 at once would only queue in the server
	for i := range ss {
		ss[i] = &stream{}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target+"/api/listeners/mine/stream?limit="+strconv.Itoa(limit), nil)
			req.Header.Set("Authorization", "Bearer "+toks[i%spread])
			res, err := client.Do(req)
			<-sem
			if err != nil || res.StatusCode != http.StatusOK {
				fmt.Fprintln(os.Stderr, "load: stream:", err, res)
				return
			}
			defer res.Body.Close()
			sc := bufio.NewScanner(res.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<24)
			for sc.Scan() {
				if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					s := ss[i]
					s.mu.Lock()
					s.events = append(s.events, seen{time.Now(), d})
					s.mu.Unlock()
				}
			}
		}()
	}
	for waiters(target)-base < n {
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("streams: %d over %d authors open in %s; server RSS %s\n", n, spread, time.Since(opened).Round(100*time.Millisecond), rss(pid))

	// Writes: one pitch by each of the first -writers authors, at -write-rate a second.
	type write struct {
		author int
		sent   time.Time
		id     int64
	}
	ws := make([]write, writers)
	tick := time.NewTicker(time.Second / time.Duration(wrate))
	var wwg sync.WaitGroup
	started, cpu0 := time.Now(), procCPU(pid)
	for i := range ws {
		<-tick.C
		ws[i] = write{author: i % spread, sent: time.Now()}
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			out, err := post(writeTarget, "/api/listeners/pitches", toks[i%spread], map[string]string{"body": "load " + strconv.Itoa(i)})
			if err != nil {
				fmt.Fprintln(os.Stderr, "load: write:", err)
				return
			}
			ws[i].id = int64(out["pitch"].(map[string]any)["id"].(float64))
		}()
	}
	tick.Stop()
	wwg.Wait()
	wall := time.Since(started)
	fmt.Printf("writes: %d in %s; server RSS %s; server CPU %.2f cores\n", writers, wall.Round(100*time.Millisecond), rss(pid),
		float64(procCPU(pid)-cpu0)/float64(wall))
	deadline := time.Now().Add(30 * time.Second)
	var lat []time.Duration
	missing := 0
	for i := range ws {
		w := ws[i]
		if w.id == 0 {
			missing++
			continue
		}
		mark := fmt.Sprintf(`"kind":"pitch","id":%d,`, w.id)
		for {
			s := ss[w.author]
			s.mu.Lock()
			var got time.Time
			for _, e := range s.events {
				if strings.Contains(e.data, mark) {
					got = e.at
					break
				}
			}
			s.mu.Unlock()
			if !got.IsZero() {
				lat = append(lat, got.Sub(w.sent))
				break
			}
			if time.Now().After(deadline) {
				missing++
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		fail(fmt.Errorf("no write reached its stream"))
	}
	fmt.Printf("| streams %d, writes %d at %d/s | write to event p50 %s | p99 %s | max %s | %d missing | server RSS %s |\n", n, writers, wrate,
		ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), ms(lat[len(lat)-1]), missing, rss(pid))
	cancel()
	wg.Wait()
}

// waiters reads owed_mine_waiters from the server's /metrics.
func waiters(target string) int {
	res, err := http.Get(target + "/metrics")
	if err != nil {
		fail(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "owed_mine_waiters "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return int(f)
		}
	}
	fail(fmt.Errorf("no owed_mine_waiters at %s/metrics", target))
	return 0
}
