// Command edge measures the live author edge under stress (issue 22) against a real owed
// process it starts (the owed binary, built from this tree, on a fresh SQLite file or a
// PostgreSQL URL), from this process, the load generator:
//
//   - storm: -attempts stream connections from one author's token, -conc at a time, while
//     /healthz is asked every 10 ms; prints the answers and /healthz's latency percentiles;
//
//   - fanout: CPU of the owed process per change of one author with 0, 1, 8, 64 streams of
//     that author open (each change written, then awaited on every stream);
//
//   - rss: the owed process's resident memory with -held streams open, per stream;
//
//   - failover (-db postgres://… only): two owed processes on one fresh schema, streams on
//     both, every connection of both cut; when each stream has the next change.
//
//     cd bench && go run ./cmd/edge -run storm,fanout,rss
package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

func main() {
	run := flag.String("run", "storm,fanout,rss", "scenarios: storm, fanout, rss")
	attempts := flag.Int("attempts", 20000, "storm: stream connection attempts from one token")
	conc := flag.Int("conc", 500, "storm: attempts in flight at once")
	waiters := flag.String("waiters", "0,1,8,64", "fanout: streams of the author")
	changes := flag.Int("changes", 40, "fanout: changes per waiter count")
	held := flag.Int("held", 2000, "rss: streams held")
	db := flag.String("db", "", "OWED_DATABASE_URL (default: a fresh SQLite file)")
	bin := flag.String("owed", "", "the owed binary (default: built from this tree)")
	flag.Parse()

	dir, err := os.MkdirTemp("", "owed-edge-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if *bin == "" {
		*bin = filepath.Join(dir, "owed")
		b := exec.Command("go", "build", "-o", *bin, "github.com/owed/owed/cmd/owed")
		b.Stdout, b.Stderr = os.Stderr, os.Stderr
		if err := b.Run(); err != nil {
			log.Fatalf("build owed: %v", err)
		}
	}
	for _, sc := range strings.Split(*run, ",") {
		if sc == "failover" {
			failover(*bin, dir, *db)
			continue
		}
		// Each scenario on a fresh server process, so one's memory and caches are not the next's.
		s := start(*bin, dir, *db, sc)
		switch sc {
		case "storm":
			storm(s, *attempts, *conc)
		case "fanout":
			for _, f := range strings.Split(*waiters, ",") {
				n, _ := strconv.Atoi(f)
				fanout(s, n, *changes)
			}
		case "rss":
			rss(s, *held)
		default:
			log.Fatalf("unknown scenario %q", sc)
		}
		s.stop()
	}
}

// server is the owed process under test.
type server struct {
	cmd    *exec.Cmd
	base   string
	admin  string
	client *http.Client
	n      int
}

const adminToken = "owed_edge_bench_admin_token_0123456789abcdef"

func start(bin, dir, db, name string) *server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	data := filepath.Join(dir, name)
	os.MkdirAll(data, 0o755)
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "OWED_ADDR="+addr, "OWED_DATA_DIR="+data, "OWED_ADMIN_TOKEN="+adminToken,
		"OWED_WRITE_RATE=0", "OWED_INLINE_WAIT=0s", "OWED_LOG_LEVEL=error", "OWED_STREAMS_PER_USER=100000")
	if name == "storm" {
		cmd.Env[len(cmd.Env)-1] = "OWED_STREAMS_PER_USER=8" // the default: the storm meets it
	}
	if db != "" {
		cmd.Env = append(cmd.Env, "OWED_DATABASE_URL="+db)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	s := &server{cmd: cmd, base: "http://" + addr, admin: adminToken,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	for i := 0; ; i++ {
		res, err := http.Get(s.base + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				break
			}
		}
		if i > 200 {
			log.Fatalf("owed did not start: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

func (s *server) stop() {
	s.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// author makes an author and returns their token.
func (s *server) author() string {
	s.n++
	body, _ := json.Marshal(map[string]string{"name": fmt.Sprintf("author%d", s.n), "role": "author"})
	req, _ := http.NewRequest(http.MethodPost, s.base+"/api/admin/users", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.admin)
	req.Header.Set("Content-Type", "application/json")
	res, err := s.client.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	var out struct{ Token string }
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || out.Token == "" {
		log.Fatalf("create author: %d %v", res.StatusCode, err)
	}
	return out.Token
}

func (s *server) pitch(token string) {
	req, _ := http.NewRequest(http.MethodPost, s.base+"/api/listeners/pitches", strings.NewReader(`{"body":"a pitch"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := s.client.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		log.Fatalf("pitch: %d", res.StatusCode)
	}
}

func (s *server) etag(token string) string {
	req, _ := http.NewRequest(http.MethodGet, s.base+"/api/listeners/mine", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := s.client.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.Header.Get("ETag")
}

// cpu is the owed process's user+system CPU so far.
func (s *server) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		log.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// rssKB is the owed process's resident set.
func (s *server) rssKB() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// stream is one held stream: the id of the last event it got.
type stream struct {
	last      atomic.Value
	cancel    context.CancelFunc
	events    atomic.Int64
	ended     atomic.Bool  // the server closed it
	lastEvent atomic.Value // the name of the last event
}

// open opens a stream with its own connection, and returns once its first event came.
func (s *server) open(token string) (*stream, int) {
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/api/listeners/mine/stream", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	tr := &http.Transport{DisableKeepAlives: true}
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		cancel()
		return nil, 0
	}
	if res.StatusCode != http.StatusOK {
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		cancel()
		return nil, res.StatusCode
	}
	st := &stream{cancel: cancel}
	st.last.Store("")
	st.lastEvent.Store("")
	first := make(chan struct{})
	go func() {
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		once := sync.Once{}
		for sc.Scan() {
			if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				st.lastEvent.Store(ev)
			}
			if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				st.last.Store(id)
				st.events.Add(1)
				once.Do(func() { close(first) })
			}
		}
		st.ended.Store(true)
		once.Do(func() { close(first) })
	}()
	<-first
	return st, http.StatusOK
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// storm: one token tries many streams while /healthz is timed.
func storm(s *server, attempts, conc int) {
	token := s.author()
	stop := make(chan struct{})
	var lat []time.Duration
	var hmu sync.Mutex
	var hfail atomic.Int64
	var hw sync.WaitGroup
	hw.Add(1)
	go func() {
		defer hw.Done()
		hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			t0 := time.Now()
			res, err := hc.Get(s.base + "/healthz")
			d := time.Since(t0)
			if err != nil || res.StatusCode != 200 {
				hfail.Add(1)
			}
			if err == nil {
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
			hmu.Lock()
			lat = append(lat, d)
			hmu.Unlock()
		}
	}()
	codes := map[int]int{}
	var mu sync.Mutex
	var open []*stream
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	c0, t0 := s.cpu(), time.Now()
	for i := 0; i < attempts; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			st, code := s.open(token)
			mu.Lock()
			codes[code]++
			if st != nil {
				open = append(open, st)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	took, cpu := time.Since(t0), s.cpu()-c0
	close(stop)
	hw.Wait()
	for _, st := range open {
		st.cancel()
	}
	fmt.Printf("storm: %d stream attempts from one token, %d in flight, in %v: answers %v; owed CPU %v (%v per attempt)\n",
		attempts, conc, took.Round(time.Millisecond), codes, cpu, (cpu / time.Duration(attempts)).Round(time.Microsecond))
	fmt.Printf("storm: /healthz every 10 ms meanwhile: %d asked, %d failed, p50 %v, p99 %v, max %v\n",
		len(lat), hfail.Load(), percentile(lat, 0.5), percentile(lat, 0.99), percentile(lat, 1))
}

// fanout: CPU of the owed process per change of one author with n streams of theirs open.
func fanout(s *server, n, changes int) {
	token := s.author()
	var streams []*stream
	for i := 0; i < n; i++ {
		st, code := s.open(token)
		if st == nil {
			log.Fatalf("fanout: stream %d: %d", i, code)
		}
		streams = append(streams, st)
	}
	// Screens and scores held: each write is exactly one change of the view, and nothing in the
	// background changes it after (a sweep of the new jobs would).
	req, _ := http.NewRequest(http.MethodPut, s.base+"/api/admin/holds", strings.NewReader(`{"screen":true,"score":true}`))
	req.Header.Set("Authorization", "Bearer "+s.admin)
	req.Header.Set("Content-Type", "application/json")
	if res, err := s.client.Do(req); err != nil || res.StatusCode != http.StatusOK {
		log.Fatalf("hold: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	s.pitch(token) // warm
	time.Sleep(200 * time.Millisecond)
	c0, t0 := s.cpu(), time.Now()
	for c := 0; c < changes; c++ {
		s.pitch(token)
		want := s.etag(token)
		for i, st := range streams {
			for since := time.Now(); st.last.Load().(string) != want; {
				if time.Since(since) > 10*time.Second {
					log.Fatalf("fanout: stream %d is at %s after 10 s; the view is at %s (now %s)", i, st.last.Load(), want, s.etag(token))
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	cpu, wall := s.cpu()-c0, time.Since(t0)
	for _, st := range streams {
		st.cancel()
	}
	fmt.Printf("fanout: %2d streams of one author, %d changes: owed CPU %v per change (write, view read, every stream's event), %v wall per change\n",
		n, changes, (cpu / time.Duration(changes)).Round(10*time.Microsecond), (wall / time.Duration(changes)).Round(10*time.Microsecond))
}

// rss: the owed process's memory per held stream.
func rss(s *server, held int) {
	tokens := make([]string, 0, held/8+1)
	for i := 0; i*8 < held; i++ {
		tokens = append(tokens, s.author())
	}
	time.Sleep(time.Second)
	before := s.rssKB()
	var streams []*stream
	for i := 0; i < held; i++ {
		st, code := s.open(tokens[i/8])
		if st == nil {
			log.Fatalf("rss: stream %d: %d", i, code)
		}
		streams = append(streams, st)
	}
	time.Sleep(2 * time.Second)
	after := s.rssKB()
	fmt.Printf("rss: %d streams held (8 per author): owed RSS %d kB before, %d kB after: %.1f kB per stream\n",
		held, before, after, float64(after-before)/float64(held))
	for _, st := range streams {
		st.cancel()
	}
}

// failover: two owed processes on one fresh PostgreSQL schema, streams of one author held on
// both; every connection of both processes (pools and LISTEN) is cut with pg_terminate_backend,
// as a failover does; a change is written through the first as soon as it answers; each stream
// either gets it (the time from the cut is printed) or ends with event error and is reopened.
func failover(bin, dir, base string) {
	if !strings.HasPrefix(base, "postgres") {
		log.Fatal("failover: -db postgres://… is required")
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		log.Fatal(err)
	}
	defer admin.Close()
	tag := fmt.Sprintf("owededge%d", time.Now().UnixNano())
	if _, err := admin.Exec(`CREATE SCHEMA ` + tag); err != nil {
		log.Fatal(err)
	}
	defer admin.Exec(`DROP SCHEMA ` + tag + ` CASCADE`)
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("search_path", tag)
	q.Set("application_name", tag)
	u.RawQuery = q.Encode()
	a := start(bin, dir, u.String(), "failover-a")
	defer a.stop()
	b := start(bin, dir, u.String(), "failover-b")
	defer b.stop()
	b.admin = a.admin
	token := a.author()
	type held struct {
		on *server
		st *stream
	}
	var all []held
	for _, s := range []*server{a, b} {
		for i := 0; i < 4; i++ {
			st, code := s.open(token)
			if st == nil {
				log.Fatalf("failover: open: %d", code)
			}
			all = append(all, held{s, st})
		}
	}
	var cut int
	if err := admin.QueryRow(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, tag).Scan(&cut); err != nil {
		log.Fatal(err)
	}
	t0 := time.Now()
	for i := 0; ; i++ {
		req, _ := http.NewRequest(http.MethodPost, a.base+"/api/listeners/pitches", strings.NewReader(`{"body":"after the cut"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := a.client.Do(req)
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusCreated {
				break
			}
		}
		if i > 500 {
			log.Fatalf("failover: no write after 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	written := time.Since(t0)
	want := a.etag(token)
	fmt.Printf("failover: cut %d connections of two owed processes; the change written after %v\n", cut, written.Round(time.Millisecond))
	for i, h := range all {
		for h.st.last.Load().(string) != want {
			if h.st.ended.Load() {
				st, code := h.on.open(token)
				if st == nil {
					log.Fatalf("failover: stream %d's reopen: %d", i, code)
				}
				h.st = st
				fmt.Printf("failover: stream %d ended (event %q) and was reopened after %v\n", i, all[i].st.lastEvent.Load(), time.Since(t0).Round(time.Millisecond))
				continue
			}
			if time.Since(t0) > 20*time.Second {
				log.Fatalf("failover: stream %d silent 20 s after the cut", i)
			}
			time.Sleep(time.Millisecond)
		}
		fmt.Printf("failover: stream %d (replica %s) has the change %v after the cut\n", i, map[bool]string{true: "a", false: "b"}[h.on == a], time.Since(t0).Round(time.Millisecond))
		h.st.cancel()
	}
}
