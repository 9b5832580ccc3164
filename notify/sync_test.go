package notify_test

import (
	"context"
	"database/sql"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/owed/owed/notify"
	"github.com/owed/owed/owedtest"
)

// TestSyncHearsEveryCommittedNotification: once Sync returns true, every notification committed
// before it was called has been heard, so a Mark taken before reads as changed at once, with
// no wait; Syncs made together share round trips; with the connection cut, Sync says it cannot
// tell until the hub listens again.
func TestSyncHearsEveryCommittedNotification(t *testing.T) {
	t.Parallel()
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		t.Skip("needs PostgreSQL: set " + owedtest.PostgresEnv)
	}
	url := owedtest.PostgresURL(t, base)
	hubURL, app := listenerURL(url)
	ctx := context.Background()
	h := notify.New(hubURL, owedtest.Logger(t))
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var schema string
	if err := db.QueryRow(`SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		m := h.MarkVersion(int64(i))
		if _, err := db.Exec(`SELECT pg_notify($1, $2)`, notify.Channel, schema+":"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
		if !h.Sync(ctx) {
			t.Fatal("Sync could not tell while listening")
		}
		if !m.Changed() {
			t.Fatalf("round %d: a notification committed before Sync was not heard after it", i)
		}
		m.Release()
	}
	// Many at once.
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if !h.Sync(ctx) {
				t.Error("a concurrent Sync could not tell")
			}
		})
	}
	wg.Wait()

	// Cut: Sync cannot tell (or tells only after the hub listens again, and then everything
	// marked before was woken).
	m := h.MarkVersion(1)
	if _, err := db.Exec(`SELECT pg_terminate_backend($1)`, listenerPID(t, db, app)); err != nil {
		t.Fatal(err)
	}
	if h.Sync(ctx) && !m.Changed() {
		t.Fatal("Sync answered true across a reconnect without waking the marks")
	}
	m.Release()
	if m := h.MarkVersion(5); m.Changed() {
		t.Fatal("a fresh mark reads as changed")
	}
}
