package main

import (
	"fmt"
	"net/http"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// Three real replicas on one PostgreSQL: every job settles exactly once and no job is ever run
// by two of them at once.
func TestReplicasShareTheWorkOnPostgres(t *testing.T) {
	t.Parallel()
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		t.Skip("needs PostgreSQL: set " + owedtest.PostgresEnv)
	}
	dbURL := owedtest.PostgresURL(t, base)
	replicasShareTheWork(t, dbURL, "OWED_DATABASE_URL="+dbURL)
}

// TestReplicasShareTheWorkThroughPgbouncer: the same through pgbouncer in transaction mode,
// LISTEN on a direct connection; every start migrates through the pooler, and a replica
// restarted afterwards does not wait on the migration lock.
func TestReplicasShareTheWorkThroughPgbouncer(t *testing.T) {
	t.Parallel()
	pooled, direct := owedtest.PooledURLs(t)
	env := []string{"OWED_DATABASE_URL=" + pooled, "OWED_DATABASE_LISTEN_URL=" + direct}
	replicasShareTheWork(t, direct, env...)
	began := time.Now()
	p := startOwed(t, append(env, "OWED_ADMIN_TOKEN="+owedtest.AdminToken, "OWED_MIGRATE_LOCK_TIMEOUT=10s")...)
	t.Logf("a restart through the pooler was ready after %v", time.Since(began).Round(time.Millisecond))
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Errorf("graceful stop: %v", err)
	}
}

// replicasShareTheWork runs three replicas with the database settings given (dbURL, direct, for the
// checks): 300 pitches written across them each answer 201, and every job settles exactly
// once with no job run by two at once.
func replicasShareTheWork(t *testing.T, dbURL string, settings ...string) {
	model := modeltest.New(t)
	track := newSubjectTracker(30 * time.Millisecond)
	model.Handle(track.handle)
	model.KeepRequests(false)

	env := []string{"OWED_ADMIN_TOKEN=" + owedtest.AdminToken,
		"OWED_MODEL_URL=" + model.URL(), "OWED_DATABASE_MAX_CONNS=8", "OWED_SWEEP_EVERY=1s", "OWED_INLINE_WAIT=0s", "OWED_DAILY_BUDGET=100000",
		"OWED_SWEEP_CONCURRENCY=16", "OWED_WRITE_RATE=0"}
	env = append(env, settings...)
	var replicas []*process
	for range 3 {
		replicas = append(replicas, startOwed(t, env...))
	}
	status, user := replicas[0].post("/api/admin/users", owedtest.AdminToken, map[string]string{"name": "ann", "role": "author"})
	if status != http.StatusCreated {
		t.Fatalf("create author: %d %v", status, user)
	}
	token := user["token"].(string)

	const items = 300
	var wg sync.WaitGroup
	errs := make(chan error, items)
	for i := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, body := replicas[i%3].post("/api/listeners/pitches", token, map[string]string{"body": fmt.Sprintf("pitch %d", i)})
			if status != http.StatusCreated {
				errs <- fmt.Errorf("pitch %d: %d %v", i, status, body)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	db := openDB(t, dbURL)
	wait.Within(t, 60*time.Second, "every screen to settle", func() bool {
		return countRows(t, db, `SELECT COUNT(*) FROM content_jobs`) == 0
	})
	if n := countRows(t, db, `SELECT COUNT(*) FROM screens`); n != items {
		t.Fatalf("%d verdicts, want %d", n, items)
	}
	if n := countRows(t, db, `SELECT COUNT(*) FROM events WHERE outcome = 'allow'`); n != items {
		t.Fatalf("%d verdict events, want exactly %d (one per item)", n, items)
	}
	track.mu.Lock()
	defer track.mu.Unlock()
	if len(track.overlaps) > 0 {
		t.Fatalf("jobs run by two workers at once: %v", track.overlaps)
	}
	for i := range items {
		if n := track.asked[fmt.Sprintf("pitch %d", i)]; n != 1 {
			t.Errorf("pitch %d asked %d times, want once", i, n)
		}
	}
	for _, p := range replicas {
		if err := p.stop(syscall.SIGTERM); err != nil {
			t.Errorf("graceful stop: %v", err)
		}
	}
}

// A process killed in the middle of a sweep loses nothing: its leased jobs run again, once,
// after the lease runs out.
func TestKilledMidSweepLosesNothing(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, dbURL string) {
		t.Parallel() // each dialect's processes wait on leases and slow peers, not on the CPU
		model := modeltest.New(t)
		// The first process never finishes a call, and its asks' deadline (within the 6 s lease)
		// is far beyond the kill: an ask that timed out first would be rescheduled a minute
		// later (correctly, but past this test's wait). So screens are held while the items are
		// written (on a loaded machine the writes can take longer than the lease), and the
		// process is killed the moment the model gets its first call after the hold is lifted.
		slow := newSubjectTracker(10 * time.Second)
		model.Handle(slow.handle)
		model.KeepRequests(false)
		env := []string{"OWED_DATABASE_URL=" + dbURL, "OWED_DATA_DIR=" + t.TempDir(), "OWED_ADMIN_TOKEN=" + owedtest.AdminToken,
			"OWED_MODEL_URL=" + model.URL(), "OWED_DATABASE_MAX_CONNS=8", "OWED_SWEEP_EVERY=1s", "OWED_INLINE_WAIT=0s", "OWED_LEASE=6s",
			"OWED_DAILY_BUDGET=100000", "OWED_SWEEP_CONCURRENCY=8", "OWED_WRITE_RATE=0"}
		first := startOwed(t, env...)
		status, user := first.post("/api/admin/users", owedtest.AdminToken, map[string]string{"name": "ann", "role": "author"})
		if status != http.StatusCreated {
			t.Fatalf("create author: %d %v", status, user)
		}
		token := user["token"].(string)
		first.must(http.StatusOK, http.MethodPut, "/api/admin/holds", owedtest.AdminToken, map[string]bool{"screen": true})
		const items = 100
		for i := range items {
			if status, body := first.post("/api/listeners/pitches", token, map[string]string{"body": fmt.Sprintf("pitch %d", i)}); status != http.StatusCreated {
				t.Fatalf("pitch %d: %d %v", i, status, body)
			}
		}
		db := openDB(t, dbURL)
		first.must(http.StatusOK, http.MethodPut, "/api/admin/holds", owedtest.AdminToken, map[string]bool{"screen": false})
		select {
		case <-slow.asked1:
		case <-time.After(10 * time.Second):
			t.Fatal("no job was asked within 10 s")
		}
		first.cmd.Process.Signal(syscall.SIGKILL)
		<-first.exited
		leased := countRows(t, db, `SELECT COUNT(*) FROM content_jobs WHERE lease_owner IS NOT NULL`)
		if leased == 0 {
			t.Fatal("the kill found no leased job; the test proves nothing")
		}

		model.Handle(nil) // the model answers at once from now on
		startOwed(t, env...)
		wait.Within(t, 30*time.Second, "every job to settle after the restart", func() bool {
			return countRows(t, db, `SELECT COUNT(*) FROM content_jobs`) == 0
		})
		if n := countRows(t, db, `SELECT COUNT(*) FROM screens`); n != items {
			t.Fatalf("%d verdicts after the crash, want %d", n, items)
		}
		if n := countRows(t, db, `SELECT COUNT(*) FROM events WHERE outcome = 'allow'`); n != items {
			t.Fatalf("%d verdict events, want exactly %d", n, items)
		}
		t.Logf("%d jobs were leased by the killed process; all %d items settled once", leased, items)
	})
}
