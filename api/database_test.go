package api_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/owed/owed/app"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// postgresBase is the test server's URL, or a skip.
func postgresBase(t *testing.T) string {
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		t.Skip("PostgreSQL only: set " + owedtest.PostgresEnv)
	}
	return base
}

func openSQL(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// unavailable reports whether r is 503 unavailable with Retry-After.
func unavailable(r owedtest.Response) bool {
	return r.Status == http.StatusServiceUnavailable && r.ErrorCode() == "unavailable" && r.Header.Get("Retry-After") != ""
}

// TestReadOnlyServer: a replica whose server turns read-only under it (its sessions are cut,
// and the new ones are read-only, as a standby's are) answers writes 503 unavailable with
// Retry-After and /readyz 503 within 5 s; once the server takes writes again, the
// connections that met the read-only server were dropped, so writes succeed again without
// waiting for the pool's connections to age out.
func TestReadOnlyServer(t *testing.T) {
	t.Parallel()
	base := postgresBase(t)
	admin := openSQL(t, base)
	b := make([]byte, 4)
	rand.Read(b)
	role := "owedro_" + hex.EncodeToString(b)
	if _, err := admin.Exec(`CREATE ROLE ` + role + ` LOGIN SUPERUSER`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The timeout makes each call wait until its backend has gone, so the role can be dropped.
		admin.Exec(`SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE usename = $1`, role)
		admin.Exec(`DROP ROLE IF EXISTS ` + role)
	})
	u, _ := url.Parse(owedtest.PostgresURL(t, base))
	u.User = url.User(role)
	w := newWorld(t, u.String(), func(c *app.Config) { c.DatabaseMaxConns = 2 }).quiet()
	if r := w.do(http.MethodPost, "/api/listeners/pitches", asAuthor, map[string]string{"body": "before"}); r.Status != http.StatusCreated {
		t.Fatalf("a write before: %d %s", r.Status, r.Body)
	}

	if _, err := admin.Exec(`ALTER ROLE ` + role + ` SET default_transaction_read_only = on`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, role); err != nil {
		t.Fatal(err)
	}
	var last owedtest.Response
	wait.Within(t, 5*time.Second, "a write to answer 503 unavailable", func() bool {
		last = w.do(http.MethodPost, "/api/listeners/pitches", asAuthor, map[string]string{"body": "read-only"})
		if last.Status == http.StatusCreated {
			t.Fatalf("a write to a read-only server succeeded: %s", last.Body)
		}
		return unavailable(last)
	})
	if !strings.Contains(string(last.Body), "not the primary") {
		t.Errorf("the 503 says %s", last.Body)
	}
	wait.Within(t, 5*time.Second, "/readyz to answer 503", func() bool {
		r := w.env.Do(http.MethodGet, "/readyz", "", nil)
		return unavailable(r) && strings.Contains(string(r.Body), "read-only")
	})

	// The server takes writes again. No session is cut: the pool's connections that met the
	// read-only server must have been dropped for a write to succeed.
	if _, err := admin.Exec(`ALTER ROLE ` + role + ` RESET default_transaction_read_only`); err != nil {
		t.Fatal(err)
	}
	inARow := 0
	wait.Within(t, 5*time.Second, "ten writes in a row to succeed again", func() bool {
		r := w.do(http.MethodPost, "/api/listeners/pitches", asAuthor, map[string]string{"body": "after"})
		switch {
		case r.Status == http.StatusCreated:
			inARow++
		case unavailable(r):
			inARow = 0
		default:
			t.Fatalf("a write after: %d %s", r.Status, r.Body)
		}
		return inARow == 10
	})
	wait.Within(t, 5*time.Second, "/readyz to answer 200", func() bool {
		return w.env.Do(http.MethodGet, "/readyz", "", nil).Status == http.StatusOK
	})
}

// TestOutsideLock: while an outside transaction holds an exclusive lock on pitches, writes of
// pitches answer 503 unavailable with Retry-After after the lock timeout (more writers than
// pool connections: none waits for the lock's end), while /healthz and /readyz answer 200
// within a second throughout; once the lock is gone, writes succeed.
func TestOutsideLock(t *testing.T) {
	t.Parallel()
	base := postgresBase(t)
	dbURL := owedtest.PostgresURL(t, base)
	const lockTimeout = time.Second
	w := newWorld(t, dbURL, func(c *app.Config) { c.DatabaseLockTimeout = lockTimeout; c.DatabaseMaxConns = 3 }).quiet()

	locker := openSQL(t, dbURL)
	tx, err := locker.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`LOCK TABLE pitches IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var health sync.WaitGroup
	health.Add(1)
	go func() {
		defer health.Done()
		for {
			for _, path := range []string{"/healthz", "/readyz"} {
				began := time.Now()
				r := w.env.Do(http.MethodGet, path, "", nil)
				if took := time.Since(began); r.Status != http.StatusOK || took > time.Second {
					t.Errorf("%s under the lock: %d after %v: %s", path, r.Status, took, r.Body)
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	const writers = 6
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			r := w.do(http.MethodPost, "/api/listeners/pitches", asAuthor, map[string]string{"body": "locked out"})
			took := time.Since(began)
			if !unavailable(r) {
				t.Errorf("a write under the lock: %d %s", r.Status, r.Body)
			}
			// Each waits its lock timeout after a connection of the pool is free: at most
			// writers/conns rounds, with room for a loaded machine.
			if took > 5*lockTimeout {
				t.Errorf("a write under the lock answered after %v", took)
			}
		}()
	}
	wg.Wait()
	close(stop)
	health.Wait()
	tx.Rollback()
	if r := w.do(http.MethodPost, "/api/listeners/pitches", asAuthor, map[string]string{"body": "after the lock"}); r.Status != http.StatusCreated {
		t.Fatalf("a write after the lock: %d %s", r.Status, r.Body)
	}
}

// TestOutsideLockOnARead: a read that is no transaction of the store's own (the model's state
// reads the breaker and the holds one statement each) waiting on an outside lock answers 503
// unavailable with Retry-After after the lock timeout, not when the lock ends, straight to the
// server and through pgbouncer in transaction mode (when OWED_TEST_PGBOUNCER_URL names one,
// .ci/pgbouncer); once the lock is gone it answers 200.
func TestOutsideLockOnARead(t *testing.T) {
	t.Parallel()
	base := postgresBase(t)
	t.Run("direct", func(t *testing.T) {
		t.Parallel()
		dbURL := owedtest.PostgresURL(t, base)
		outsideLockOnARead(t, dbURL, dbURL)
	})
	t.Run("pgbouncer", func(t *testing.T) {
		t.Parallel()
		pooled, direct := owedtest.PooledURLs(t)
		outsideLockOnARead(t, pooled, direct)
	})
}

// outsideLockOnARead runs TestOutsideLockOnARead with owed on dbURL and the lock taken on
// lockURL, the same database.
func outsideLockOnARead(t *testing.T, dbURL, lockURL string) {
	const lockTimeout = 500 * time.Millisecond
	w := newWorld(t, dbURL, func(c *app.Config) {
		c.DatabaseLockTimeout = lockTimeout
		if dbURL != lockURL {
			c.DatabaseListenURL = lockURL
		}
	}).quiet()

	locker := openSQL(t, lockURL)
	tx, err := locker.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`LOCK TABLE model_breaker, holds IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	r := w.do(http.MethodGet, "/api/admin/model", asAdmin, nil)
	if took := time.Since(began); !unavailable(r) || took > 10*lockTimeout {
		t.Errorf("the model's state under the lock: %d %s after %v; want 503 unavailable after about %v", r.Status, r.Body, took, lockTimeout)
	}
	tx.Rollback()
	if r := w.do(http.MethodGet, "/api/admin/model", asAdmin, nil); r.Status != http.StatusOK {
		t.Errorf("the model's state after the lock: %d %s", r.Status, r.Body)
	}
}

// TestDeafListener: a replica whose LISTEN connection hears nothing (here: it listens on
// another database, as LISTEN through a pooler in transaction mode hears nothing) finds it
// out by its heartbeat and says so in /readyz (503, with why), within a few seconds.
func TestDeafListener(t *testing.T) {
	t.Parallel()
	base := postgresBase(t)
	elsewhere, _ := url.Parse(base)
	elsewhere.Path = "/postgres"
	w := newWorld(t, owedtest.PostgresURL(t, base), func(c *app.Config) { c.DatabaseListenURL = elsewhere.String() })
	wait.Within(t, 10*time.Second, "/readyz to say the listener hears nothing", func() bool {
		r := w.env.Do(http.MethodGet, "/readyz", "", nil)
		return unavailable(r) && strings.Contains(string(r.Body), "hears nothing")
	})
}

// TestLiveThroughPgbouncer: three replicas whose pools go through pgbouncer in transaction
// mode and whose notifiers LISTEN on a direct connection. Writes go to each replica in turn;
// every answer is counted and none is a 500; after each write's answer, every replica's held
// stream carries the new item within 2 s, and every replica's view answers the ETag held
// before the write with 200 (not a stale 304) within 2 s; all three stay ready (their
// heartbeats are heard).
func TestLiveThroughPgbouncer(t *testing.T) {
	t.Parallel()
	pooled, direct := owedtest.PooledURLs(t)
	listen := func(c *app.Config) { c.DatabaseListenURL = direct }
	first := newWorld(t, pooled, listen).quiet()
	replicas := []*world{first}
	for range 2 {
		replicas = append(replicas, (&world{t: t, env: owedtest.NewEnv(t, pooled, listen), tok: first.tok, uid: first.uid}).quiet())
	}
	const writes, within = 15, 2 * time.Second
	var mu sync.Mutex
	statuses := map[int]int{}
	count := func(r owedtest.Response) owedtest.Response {
		mu.Lock()
		statuses[r.Status]++
		mu.Unlock()
		return r
	}
	streams := make([]<-chan sse, len(replicas))
	etags := make([]string, len(replicas))
	for i, r := range replicas {
		_, streams[i], _ = r.rawStream("", "Authorization", "Bearer "+first.tok[asAuthor])
		next(t, streams[i], false)
		etags[i] = count(r.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil)).Header.Get("ETag")
	}
	var unseen, stale int
	var slowestEvent, slowestView time.Duration // the longest wait after an answer, for the log
	longest := func(d *time.Duration, since time.Time) {
		mu.Lock()
		*d = max(*d, time.Since(since))
		mu.Unlock()
	}
	for n := range writes {
		r := count(replicas[n%len(replicas)].do(http.MethodPost, "/api/listeners/pitches", asAuthor, map[string]string{"body": "through the pooler"}))
		if r.Status != http.StatusCreated {
			t.Errorf("write %d on replica %d: %d %s", n, n%len(replicas), r.Status, r.Body)
			continue
		}
		answered := time.Now()
		pitch := num(obj(r.JSON()["pitch"])["id"])
		var wg sync.WaitGroup
		for i, rep := range replicas {
			wg.Add(2)
			go func() {
				defer wg.Done()
				if !streamShows(streams[i], pitch, answered.Add(within)) {
					mu.Lock()
					unseen++
					mu.Unlock()
					t.Errorf("write %d: replica %d's stream did not carry pitch %d within %v of the answer", n, i, pitch, within)
					return
				}
				longest(&slowestEvent, answered)
			}()
			go func() {
				defer wg.Done()
				var fresh owedtest.Response
				if !wait.For(within-time.Since(answered), func() bool {
					fresh = count(rep.env.Do(http.MethodGet, "/api/listeners/mine", first.tok[asAuthor], nil, "If-None-Match", etags[i]))
					return fresh.Status != http.StatusNotModified
				}) {
					mu.Lock()
					stale++
					mu.Unlock()
					t.Errorf("write %d: replica %d still answered 304 to the old ETag %v after the answer", n, i, time.Since(answered))
					return
				}
				longest(&slowestView, answered)
				if fresh.Status != http.StatusOK || !viewHas(fresh.Body, pitch) {
					t.Errorf("write %d: replica %d's view: %d %s", n, i, fresh.Status, fresh.Body)
				}
				etags[i] = fresh.Header.Get("ETag")
			}()
		}
		wg.Wait()
	}
	for i, r := range replicas {
		if a := count(r.env.Do(http.MethodGet, "/readyz", "", nil)); a.Status != http.StatusOK {
			t.Errorf("replica %d /readyz: %d %s", i, a.Status, a.Body)
		}
	}
	t.Logf("%d writes over %d replicas: answers by status %v; %d stream misses and %d stale 304s past %v; slowest after an answer: event %v, fresh view %v",
		writes, len(replicas), statuses, unseen, stale, within, slowestEvent.Round(time.Millisecond), slowestView.Round(time.Millisecond))
	if statuses[http.StatusInternalServerError] != 0 {
		t.Errorf("%d answers were 500", statuses[http.StatusInternalServerError])
	}
}

// streamShows reads events until one is a view holding the pitch, reporting false if none
// came by deadline.
func streamShows(events <-chan sse, pitch int64, deadline time.Time) bool {
	timeout := time.After(time.Until(deadline))
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return false
			}
			if ev.Event == "mine" && viewHas([]byte(ev.Data), pitch) {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

// viewHas reports whether a view (GET /api/listeners/mine's body) lists the pitch.
func viewHas(body []byte, pitch int64) bool {
	var v struct {
		Items []struct {
			Kind string `json:"kind"`
			ID   int64  `json:"id"`
		} `json:"items"`
	}
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	for _, it := range v.Items {
		if it.Kind == "pitch" && it.ID == pitch {
			return true
		}
	}
	return false
}
