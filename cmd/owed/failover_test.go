package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// PGBinEnv names PostgreSQL's server binaries (initdb, pg_ctl, pg_basebackup), for the tests
// that make clusters of their own; .ci/run sets it where they are installed.
const PGBinEnv = "OWED_TEST_PG_BIN"

// cluster is a PostgreSQL cluster of the test's own, run as the postgres user when the test
// runs as root (PostgreSQL refuses to run as root).
type cluster struct {
	t    *testing.T
	bin  string
	dir  string
	port string
	cred *syscall.Credential
}

// pg runs one of the server binaries as the cluster's user.
func (c *cluster) pg(name string, args ...string) {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func (c *cluster) start() {
	c.pg("pg_ctl", "-D", c.dir, "-w", "-t", "60", "-l", c.dir+".log", "-o", "-p "+c.port+" -k "+filepath.Dir(c.dir)+" -c listen_addresses=127.0.0.1", "start")
	c.t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(c.bin, "pg_ctl"), "-D", c.dir, "-m", "immediate", "stop")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
		cmd.Run()
	})
}

// newClusters makes a primary and a standby of it (pg_basebackup -R) with synchronous
// replication, both started; it skips without PGBinEnv.
func newClusters(t *testing.T) (primary, standby *cluster) {
	bin := os.Getenv(PGBinEnv)
	if bin == "" {
		t.Skip("needs PostgreSQL's server binaries: set " + PGBinEnv + " (e.g. /usr/lib/postgresql/15/bin)")
	}
	var cred *syscall.Credential
	root, err := os.MkdirTemp("", "owed-failover-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("running as root without a postgres user")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(root, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	port := func() string { _, p, _ := net.SplitHostPort(freeAddr(t)); return p }
	primary = &cluster{t: t, bin: bin, dir: filepath.Join(root, "primary"), port: port(), cred: cred}
	primary.pg("initdb", "-D", primary.dir, "-A", "trust", "-U", "postgres", "--no-sync")
	conf := "\nfsync = off\nshared_buffers = 16MB\nmax_connections = 60\nsynchronous_standby_names = '*'\n"
	f, err := os.OpenFile(filepath.Join(primary.dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(conf)
	f.Close()
	primary.start()
	standby = &cluster{t: t, bin: bin, dir: filepath.Join(root, "standby"), port: port(), cred: cred}
	primary.pg("pg_basebackup", "-h", "127.0.0.1", "-p", primary.port, "-U", "postgres", "-D", standby.dir, "-R", "-X", "stream")
	// The standby has no standby of its own: once promoted it must not wait for one (a
	// commit waiting for a synchronous standby that is not there waits for ever, whatever the
	// statement timeout).
	f, err = os.OpenFile(filepath.Join(standby.dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\nsynchronous_standby_names = ''\n")
	f.Close()
	standby.start()
	return primary, standby
}

// TestFailoverLosesNothing: two replicas on a primary with a synchronous standby, through a
// multi-host URL with target_session_attrs=read-write. Pitches are written with
// Idempotency-Keys, each retried until it is answered 201; mid-run the primary is killed
// (immediate stop) and the standby promoted. Afterwards every pitch is there exactly once, and
// every one was screened once.
func TestFailoverLosesNothing(t *testing.T) {
	t.Parallel()
	primary, standby := newClusters(t)
	dbURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%s,127.0.0.1:%s/postgres?target_session_attrs=read-write&sslmode=disable&connect_timeout=2",
		primary.port, standby.port)
	model := modeltest.New(t)
	model.KeepRequests(false)
	env := []string{"OWED_DATABASE_URL=" + dbURL, "OWED_ADMIN_TOKEN=" + owedtest.AdminToken, "OWED_MODEL_URL=" + model.URL(),
		"OWED_DATABASE_MAX_CONNS=6", "OWED_SWEEP_EVERY=1s", "OWED_INLINE_WAIT=0s", "OWED_DAILY_BUDGET=100000", "OWED_WRITE_RATE=0",
		"OWED_LEASE=5s"}
	replicas := []*process{startOwed(t, env...), startOwed(t, env...)}
	status, user := replicas[0].post("/api/admin/users", owedtest.AdminToken, map[string]string{"name": "ann", "role": "author"})
	if status != http.StatusCreated {
		t.Fatalf("create author: %d %v", status, user)
	}
	token := user["token"].(string)

	const items = 200
	var acked, refused atomic.Int64
	failover := make(chan struct{})
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			key := fmt.Sprintf("pitch-%d", i)
			deadline := time.Now().Add(90 * time.Second)
			for try := 0; time.Now().Before(deadline); try++ {
				r, err := owedtest.Call(http.DefaultClient, replicas[(i+try)%2].URL, http.MethodPost, "/api/listeners/pitches", token,
					map[string]string{"body": key}, "Idempotency-Key", key)
				if err == nil && r.Status == http.StatusCreated {
					if acked.Add(1) == items/3 {
						close(failover)
					}
					return
				}
				if err == nil && r.Status != http.StatusServiceUnavailable && r.Status != http.StatusConflict {
					t.Errorf("%s: %d %s", key, r.Status, r.Body)
					return
				}
				refused.Add(1)
				time.Sleep(100 * time.Millisecond)
			}
			t.Errorf("%s: never answered 201", key)
		}()
	}
	<-failover
	began := time.Now()
	primary.pg("pg_ctl", "-D", primary.dir, "-m", "immediate", "stop")
	standby.pg("pg_ctl", "-D", standby.dir, "-w", "promote")
	t.Logf("primary killed and standby promoted in %v", time.Since(began).Round(time.Millisecond))
	wg.Wait()
	t.Logf("%d writes acknowledged; %d tries answered 503 or not at all", acked.Load(), refused.Load())
	if t.Failed() {
		return
	}

	db := openDB(t, fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", standby.port))
	wait.Within(t, 90*time.Second, "every screen to settle", func() bool {
		return countRows(t, db, `SELECT COUNT(*) FROM content_jobs`) == 0
	})
	if n := countRows(t, db, `SELECT COUNT(*) FROM pitches`); n != items {
		t.Errorf("%d pitches, want %d", n, items)
	}
	if n := countRows(t, db, `SELECT COUNT(DISTINCT body) FROM pitches`); n != items {
		t.Errorf("%d distinct pitches, want %d (none lost)", n, items)
	}
	if n := countRows(t, db, `SELECT COUNT(*) FROM screens`); n != items {
		t.Errorf("%d verdicts, want %d", n, items)
	}
	for _, p := range replicas {
		if err := p.stop(syscall.SIGTERM); err != nil {
			t.Errorf("graceful stop: %v", err)
		}
	}
}
