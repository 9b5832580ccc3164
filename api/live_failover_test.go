package api_test

import (
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// TestLiveFailover: streams held on two replicas on PostgreSQL; every connection of both
// (their pools and their LISTEN connections) is cut, as a failover does. Each stream then
// either gets the next change (written through either replica once the database answers) or
// ends with event error and a reconnect gets it: none is left open and silent.
func TestLiveFailover(t *testing.T) {
	t.Parallel()
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		t.Skip("PostgreSQL only: set " + owedtest.PostgresEnv)
	}
	db := owedtest.PostgresURL(t, base)
	u, _ := url.Parse(db)
	q := u.Query()
	app := fmt.Sprintf("owedfail%d", time.Now().UnixNano())
	q.Set("application_name", app) // so the cut reaches this test's connections only
	u.RawQuery = q.Encode()
	db = u.String()

	w := newWorld(t, db).quiet()
	w2 := &world{t: t, env: owedtest.NewEnv(t, db), tok: w.tok, uid: w.uid}
	w2.quiet()
	replicas := []*world{w, w2}

	type held struct {
		on     *world
		events <-chan sse
		last   string
	}
	var streams []*held
	for _, r := range replicas {
		for i := 0; i < 2; i++ {
			_, ev, _ := r.rawStream("", "Authorization", "Bearer "+w.tok[asAuthor])
			streams = append(streams, &held{on: r, events: ev, last: next(t, ev, false).ID})
		}
	}

	// The fake clocks move at about the wall clock's pace, so the waiters' retries (which
	// wait on them) run as they would in production.
	stop := make(chan struct{})
	var tick sync.WaitGroup
	tick.Add(1)
	go func() {
		defer tick.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				for _, r := range replicas {
					r.env.Clock.Advance(50 * time.Millisecond)
				}
			}
		}
	}()
	defer func() { close(stop); tick.Wait() }()

	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var cut int
	if err := admin.QueryRow(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1`, app).Scan(&cut); err != nil { // the replicas' pools and LISTEN connections
		t.Fatal(err)
	}
	t.Logf("cut %d connections", cut)
	start := time.Now()

	// The next change, written as a client would: retried until the database answers.
	for i := 0; ; i++ {
		r := w.do(http.MethodPost, "/api/listeners/pitches", asAuthor, map[string]string{"body": "after the cut"})
		if r.Status == http.StatusCreated {
			break
		}
		if i > 50 {
			t.Fatalf("the write after the cut: %d %s", r.Status, r.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the change written after %v", time.Since(start).Round(time.Millisecond))
	want := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).Header.Get("ETag")
	for i, s := range streams {
		ev := next(t, s.events, false)
		for ev.Event == "mine" && ev.ID != want {
			ev = next(t, s.events, false) // a view between (a wake after the reconnect finds it the same)
		}
		switch ev.Event {
		case "mine":
			t.Logf("stream %d: the change after %v", i, time.Since(start).Round(time.Millisecond))
		case "error":
			if code := errorOf(t, ev.Data); code != "unavailable" {
				t.Fatalf("stream %d ended with %s", i, code)
			}
			_, again, _ := s.on.rawStream("", "Authorization", "Bearer "+w.tok[asAuthor])
			if got := next(t, again, false); got.Event != "mine" || got.ID != want {
				t.Fatalf("stream %d's reconnect: %+v, want the view %s", i, got, want)
			}
			t.Logf("stream %d: ended with unavailable; the reconnect got the change after %v", i, time.Since(start).Round(time.Millisecond))
		default:
			t.Fatalf("stream %d: %+v", i, ev)
		}
	}
	_ = models.CredToken
}
