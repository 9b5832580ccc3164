package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// hang only keeps a broken build from hanging; it never decides a pass.
const hang = 20 * time.Second

type sseEvent = owedtest.SSE

// openStream opens an author's stream on p and returns its events (comments skipped).
func openStream(t *testing.T, p *process, token string) (<-chan sseEvent, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/api/listeners/mine/stream", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("stream: %d", res.StatusCode)
	}
	// Comments (pings) are skipped: these tests wait for events.
	out := make(chan sseEvent, 64)
	go func() {
		defer close(out)
		for ev := range owedtest.ReadSSE(res.Body) {
			if ev.Event != "" {
				out <- ev
			}
		}
	}()
	t.Cleanup(cancel)
	return out, cancel
}

// until reads events until one satisfies ok.
func until(t *testing.T, events <-chan sseEvent, what string, ok func(sseEvent) bool) sseEvent {
	t.Helper()
	timeout := time.After(hang)
	for {
		select {
		case ev, open := <-events:
			if !open {
				t.Fatalf("%s: the stream ended", what)
			}
			if ok(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("%s: no such event", what)
		}
	}
}

// TestLiveMineAcrossReplicasOnPostgres: two real replicas on one PostgreSQL schema. An
// author's long poll and stream held by one replica wake when the other replica writes, and
// when raw SQL changes the author's items (the triggers' NOTIFY); the replica holding a stream
// still stops cleanly on SIGTERM.
func TestLiveMineAcrossReplicasOnPostgres(t *testing.T) {
	t.Parallel()
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		t.Skip("needs PostgreSQL: set " + owedtest.PostgresEnv)
	}
	dbURL := owedtest.PostgresURL(t, base)
	model := modeltest.New(t)
	env := []string{"OWED_DATABASE_URL=" + dbURL, "OWED_ADMIN_TOKEN=" + owedtest.AdminToken,
		"OWED_MODEL_URL=" + model.URL(), "OWED_DATABASE_MAX_CONNS=8", "OWED_WRITE_RATE=0", "OWED_SHUTDOWN_GRACE=10s"}
	holder, writer := startOwed(t, env...), startOwed(t, env...)
	status, user := writer.post("/api/admin/users", owedtest.AdminToken, map[string]string{"name": "ann", "role": "author"})
	if status != http.StatusCreated {
		t.Fatalf("create author: %d %v", status, user)
	}
	token := user["token"].(string)

	events, _ := openStream(t, holder, token)
	first := until(t, events, "the first event", func(sseEvent) bool { return true })
	if !strings.Contains(first.Data, `"items":[]`) {
		t.Fatalf("first event: %+v", first)
	}

	// A long poll on the holder, parked on the first event's tag.
	polled := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, holder.URL+"/api/listeners/mine?wait=60", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("If-None-Match", first.ID)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			close(polled)
			return
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		polled <- res
	}()
	// Both wait on the holder (its gauge of waiters) before the other replica writes.
	wait.Within(t, hang, "the stream and the long poll to wait on the holder", func() bool {
		return waiters(t, holder) == 2
	})

	// A pitch written through the other replica wakes both.
	wrote := time.Now()
	status, body := writer.post("/api/listeners/pitches", token, map[string]string{"body": "from the other replica"})
	if status != http.StatusCreated {
		t.Fatalf("pitch: %d %v", status, body)
	}
	pitch := int64(body["pitch"].(map[string]any)["id"].(float64))
	ev := until(t, events, "the pitch on the holder's stream", func(ev sseEvent) bool {
		return strings.Contains(ev.Data, fmt.Sprintf(`"id":%d`, pitch))
	})
	t.Logf("a write on one replica reached the other's stream in %v", time.Since(wrote))
	if ev.ID == first.ID {
		t.Fatalf("an event with the old tag: %+v", ev)
	}
	select {
	case res := <-polled:
		if res == nil || res.StatusCode != http.StatusOK || res.Header.Get("ETag") == first.ID {
			t.Fatalf("the long poll after another replica's write: %+v", res)
		}
	case <-time.After(hang):
		t.Fatal("the long poll on the holder did not answer the other replica's write")
	}

	// Raw SQL, owed not involved: the trigger's NOTIFY reaches the stream.
	db := openDB(t, dbURL)
	if _, err := db.Exec(`DELETE FROM pitches WHERE id = $1`, pitch); err != nil {
		t.Fatal(err)
	}
	until(t, events, "the raw delete on the holder's stream", func(ev sseEvent) bool {
		return strings.Contains(ev.Data, `"items":[]`)
	})

	if n := waiters(t, holder); n != 1 {
		t.Errorf("%d waiters on the holder after the poll answered, want the stream's 1", n)
	}

	// SIGTERM with the stream open: the holder stops cleanly, and the stream ends.
	if err := holder.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("the holder with an open stream did not stop cleanly: %v", err)
	}
	for range events {
	}
}

// waiters reads p's gauge of long polls and streams waiting.
func waiters(t *testing.T, p *process) int {
	t.Helper()
	res, err := http.Get(p.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "owed_mine_waiters "); ok {
			var n int
			fmt.Sscan(v, &n)
			return n
		}
	}
	t.Fatalf("no owed_mine_waiters in /metrics")
	return 0
}
