package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/owedtest"
)

// Two real replicas on PostgreSQL while the test terminates their database connections
// (pg_terminate_backend, as a failover does) every few milliseconds, during writes with an
// Idempotency-Key: no answer is a 500; a write that answered an error left no item; retried
// with its key, every write ends with exactly one item.
func TestConnectionsCutDuringWritesOnPostgres(t *testing.T) {
	t.Parallel()
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		t.Skip("needs PostgreSQL: set " + owedtest.PostgresEnv)
	}
	app := fmt.Sprintf("owedcut%d", time.Now().UnixNano())
	schemaURL := owedtest.PostgresURL(t, base)
	dbURL := schemaURL + "&application_name=" + app
	model := modeltest.New(t)
	model.KeepRequests(false)
	env := []string{"OWED_DATABASE_URL=" + dbURL, "OWED_ADMIN_TOKEN=" + owedtest.AdminToken,
		"OWED_MODEL_URL=" + model.URL(), "OWED_DATABASE_MAX_CONNS=8", "OWED_INLINE_WAIT=100ms", "OWED_DAILY_BUDGET=100000",
		"OWED_WRITE_RATE=0"}
	replicas := []*process{startOwed(t, env...), startOwed(t, env...)}
	status, user := replicas[0].post("/api/admin/users", owedtest.AdminToken, map[string]string{"name": "ann", "role": "author"})
	if status != http.StatusCreated {
		t.Fatalf("create author: %d %v", status, user)
	}
	token := user["token"].(string)
	db := openDB(t, schemaURL)

	// The cutter: every 100 ms, every connection of both replicas; but not again before a
	// write has been acknowledged since its last cut. On a loaded machine a reconnect and a
	// write can take longer than 100 ms, and cut at a fixed pace the writes would never get
	// through (each write tried 50 times: minutes of 503s); this way they make progress at any
	// load, and every write still races the cuts.
	ctx, stop := context.WithCancel(context.Background())
	var cuts atomic.Int64
	acked := make(chan struct{}, 1) // a write answered 201 since the cutter last looked
	cutterDone := make(chan struct{})
	go func() {
		defer close(cutterDone)
		for ctx.Err() == nil {
			select { // only a write acknowledged after this cut lets the next one come
			case <-acked:
			default:
			}
			var n int64
			if err := db.QueryRow(`SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1) t`, app).Scan(&n); err == nil {
				cuts.Add(n)
			}
			time.Sleep(100 * time.Millisecond)
			select {
			case <-acked:
			case <-ctx.Done():
			}
		}
	}()

	const writers, each = 8, 25
	type tally struct {
		first                    map[int]int // status of each write's first answer
		errorsWithItem           []int       // writes that answered an error, yet their item existed
		others                   []string    // any answer but 201, 503 and a 409 in flight
		degraded, tries, replays int
	}
	var mu sync.Mutex
	tl := tally{first: map[int]int{}}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := w*each + i
				body := fmt.Sprintf("cut pitch %d", n)
				for try := 0; ; try++ {
					p := replicas[(n+try)%2]
					st, hdr, ans := postWithKey(t, p.URL+"/api/listeners/pitches", token, "cut-"+strconv.Itoa(n), body)
					mu.Lock()
					tl.tries++
					if try == 0 {
						tl.first[n] = st
					}
					mu.Unlock()
					if st == http.StatusCreated {
						select {
						case acked <- struct{}{}:
						default:
						}
						mu.Lock()
						if hdr.Get("Idempotent-Replayed") == "true" {
							tl.replays++
						}
						if bytes.Contains(ans, []byte(`"why":"unavailable"`)) {
							tl.degraded++
						}
						mu.Unlock()
						break
					}
					if st == http.StatusServiceUnavailable && try == 0 {
						// Answered an error: no item may exist for it.
						var k int
						if err := db.QueryRow(`SELECT COUNT(*) FROM pitches WHERE body = $1`, body).Scan(&k); err == nil && k != 0 {
							mu.Lock()
							tl.errorsWithItem = append(tl.errorsWithItem, n)
							mu.Unlock()
						}
					}
					if st != http.StatusServiceUnavailable && !(st == http.StatusConflict && bytes.Contains(ans, []byte("idempotency_in_flight"))) {
						mu.Lock()
						tl.others = append(tl.others, fmt.Sprintf("write %d try %d: %d %s", n, try, st, ans))
						mu.Unlock()
						break
					}
					if try > 50 {
						t.Errorf("write %d: still %d after %d tries", n, st, try)
						break
					}
					time.Sleep(30 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	stop()
	<-cutterDone

	firstErrors := 0
	for _, st := range tl.first {
		if st != http.StatusCreated {
			firstErrors++
		}
	}
	t.Logf("%d writes, %d tries, %d connections cut; first answers: %d errors (503), %d degraded 201s (screen pending, why unavailable), %d replays",
		writers*each, tl.tries, cuts.Load(), firstErrors, tl.degraded, tl.replays)
	for _, o := range tl.others {
		t.Error(o)
	}
	if len(tl.errorsWithItem) > 0 {
		t.Errorf("writes that answered 503 yet made their item: %v", tl.errorsWithItem)
	}
	if cuts.Load() == 0 {
		t.Fatal("no connection was cut")
	}
	var items, distinct int
	db.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT body) FROM pitches`).Scan(&items, &distinct)
	if items != writers*each || distinct != items {
		t.Fatalf("%d pitches (%d distinct) for %d writes acknowledged once each", items, distinct, writers*each)
	}
	// Both replicas are ready at once: the dead connections left in their pools are dropped.
	for _, p := range replicas {
		res, err := http.Get(p.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("readyz after the cuts: %d %s", res.StatusCode, b)
		}
	}
}

func postWithKey(t *testing.T, url, token, key, body string) (int, http.Header, []byte) {
	r, err := owedtest.Call(http.DefaultClient, url, http.MethodPost, "", token, map[string]string{"body": body}, "Idempotency-Key", key)
	if err != nil && r.Status == 0 {
		t.Errorf("post: %v", err)
		return 0, nil, nil
	}
	return r.Status, r.Header, r.Body
}
