package notify_test

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/owed/owed/notify"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// TestHeartbeatFindsADeafListener: a hub whose heartbeats never reach its LISTEN connection
// says so (Problem) within a few periods and wakes its waiters; once they arrive again, the
// problem clears.
func TestHeartbeatFindsADeafListener(t *testing.T) {
	t.Parallel()
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		t.Skip("needs PostgreSQL: set " + owedtest.PostgresEnv)
	}
	url := owedtest.PostgresURL(t, base)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var heard atomic.Bool // whether the beats go where the hub listens
	h := notify.New(url, owedtest.Logger(t))
	h.SetHeartbeat(func(ctx context.Context, payload string) error {
		if !heard.Load() {
			return nil // sent, as through a pooler's LISTEN, to nobody
		}
		_, err := db.ExecContext(ctx, `SELECT pg_notify($1, current_schema() || ':' || $2)`, notify.Channel, payload)
		return err
	}, 100*time.Millisecond)
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	w := h.Watch(1)
	defer w.Close()

	wait.Within(t, 5*time.Second, "the hub to say it hears nothing", func() bool { return h.Problem() != "" })
	if !strings.Contains(h.Problem(), "OWED_DATABASE_LISTEN_URL") {
		t.Errorf("Problem() = %q, want the setting named", h.Problem())
	}
	select {
	case <-w.C():
	default:
		t.Error("a deaf hub left its waiters waiting")
	}
	heard.Store(true)
	wait.Within(t, 5*time.Second, "the problem to clear", func() bool { return h.Problem() == "" })
}
