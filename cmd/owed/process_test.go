package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/owed/owed/owedtest"
)

// These tests run owed as real processes: what a replica, a crash or a restart does is only
// believable when it is a real process on a real database.

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// owedBinary builds cmd/owed once per test run.
func owedBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "owed-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "owed")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// process is one running `owed serve`.
type process struct {
	t      testing.TB
	cmd    *exec.Cmd
	URL    string
	stdout *owedtest.LogBuffer
	stderr *owedtest.LogBuffer
	exited chan error
}

// handedOut is every address freeAddr has given in this test process: the kernel may give a
// port that was closed again, and two parallel tests given one port would find each other's
// owed answering their readiness checks.
var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// freeAddr is a local address no listener held a moment ago and that no other test of this
// process has been given. Another process may still take it before owed binds it, which
// startOwed meets by trying another.
func freeAddr(t testing.TB) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if !handedOut.addrs[addr] {
			handedOut.addrs[addr] = true
			return addr
		}
	}
}

// owedEnv is the environment of an owed process: the test's own without its OWED_* settings
// (only what the test says configures owed), quiet logs, and settings (KEY=VALUE).
func owedEnv(settings ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OWED_") {
			env = append(env, kv)
		}
	}
	return append(append(env, "OWED_LOG_LEVEL=warn"), settings...)
}

// startOwed runs `owed serve` with env (OWED_* settings) and waits until it is ready. An
// address another process took between freeAddr and owed's bind is given up for another.
func startOwed(t testing.TB, env ...string) *process {
	t.Helper()
	for try := 1; ; try++ {
		if p := startOwedAt(t, try == 5, env...); p != nil {
			return p
		}
	}
}

// startOwedAt is startOwed on one address of freeAddr's: nil when owed found it in use and
// exited, unless last (then the test fails).
func startOwedAt(t testing.TB, last bool, env ...string) *process {
	t.Helper()
	bin := owedBinary(t)
	addr := freeAddr(t)
	cmd := exec.Command(bin, "serve")
	cmd.Env = owedEnv(append([]string{"OWED_ADDR=" + addr}, env...)...)
	p := &process{t: t, cmd: cmd, URL: "http://" + addr, stdout: &owedtest.LogBuffer{}, stderr: &owedtest.LogBuffer{}, exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("owed %s stderr:\n%s", addr, p.stderr.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get(p.URL + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case err := <-p.exited:
			if !last && strings.Contains(p.stderr.String(), "address already in use") {
				t.Logf("owed: %s was taken before owed bound it; another address", addr)
				return nil
			}
			t.Fatalf("owed exited before it was ready: %v\n%s", err, p.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("owed was not ready in time:\n%s", p.stderr.String())
	return nil
}

// stop sends sig and waits for the process to end.
func (p *process) stop(sig syscall.Signal) error {
	p.cmd.Process.Signal(sig)
	select {
	case err := <-p.exited:
		return err
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		return fmt.Errorf("owed did not stop within 30s of %v", sig)
	}
}

func (p *process) post(path, token string, body any) (int, map[string]any) {
	p.t.Helper()
	return p.call(http.MethodPost, path, token, body)
}

func (p *process) patch(path, token string, body any) (int, map[string]any) {
	p.t.Helper()
	return p.call(http.MethodPatch, path, token, body)
}

// call sends a request as token (body nil: none, else JSON) and decodes the JSON answer.
func (p *process) call(method, path, token string, body any) (int, map[string]any) {
	p.t.Helper()
	r, err := owedtest.Call(http.DefaultClient, p.URL, method, path, token, body)
	if err != nil && r.Status == 0 {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r.Status, r.JSON()
}

// subjectTracker is a model hook that counts the requests per screened text and notices when
// two requests for the same text are in flight at once (two workers running one job).
type subjectTracker struct {
	asked1   chan struct{} // closed when the first request arrives
	once     sync.Once
	mu       sync.Mutex
	inFlight map[string]int
	asked    map[string]int
	overlaps []string
	delay    time.Duration
}

func newSubjectTracker(delay time.Duration) *subjectTracker {
	return &subjectTracker{asked1: make(chan struct{}), inFlight: map[string]int{}, asked: map[string]int{}, delay: delay}
}

func (s *subjectTracker) handle(w http.ResponseWriter, r *http.Request) bool {
	var body struct {
		Subject struct{ Text string }
	}
	raw, _ := readAndRestore(r)
	json.Unmarshal(raw, &body)
	text := body.Subject.Text
	s.mu.Lock()
	s.asked[text]++
	s.inFlight[text]++
	if s.inFlight[text] > 1 {
		s.overlaps = append(s.overlaps, text)
	}
	s.mu.Unlock()
	s.once.Do(func() { close(s.asked1) })
	select {
	case <-time.After(s.delay):
	case <-r.Context().Done():
	}
	s.mu.Lock()
	s.inFlight[text]--
	s.mu.Unlock()
	return false // the fake answers as usual
}

func readAndRestore(r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(r.Body)
	r.Body.Close()
	r.Body = ioNopCloser{bytes.NewReader(buf.Bytes())}
	return buf.Bytes(), err
}

type ioNopCloser struct{ *bytes.Reader }

func (ioNopCloser) Close() error { return nil }

// countRows counts rows in the test's database.
func countRows(t testing.TB, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// leftRows is every row the queries read, a line each, for a failure's message.
func leftRows(t testing.TB, db *sql.DB, queries ...string) string {
	t.Helper()
	var b strings.Builder
	for _, q := range queries {
		rows, err := db.Query(q)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", q, err)
			continue
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				fmt.Fprintf(&b, "%v\n", err)
				break
			}
			for i, c := range cols {
				if v, ok := vals[i].([]byte); ok {
					vals[i] = string(v)
				}
				fmt.Fprintf(&b, "%s=%v ", c, vals[i])
			}
			b.WriteString("\n")
		}
		rows.Close()
	}
	return b.String()
}

func openDB(t testing.TB, url string) *sql.DB {
	t.Helper()
	driver, dsn := "pgx", url
	if strings.HasPrefix(url, "sqlite:") {
		driver, dsn = "sqlite3", "file:"+strings.TrimPrefix(url, "sqlite:")+"?mode=ro&_busy_timeout=5000"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
