package app_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/owedtest"
)

// TestShutdownStopsCronBeforeTheRunners: a process serving as `owed serve` does stops cron
// before any runner, so no entry wakes a runner that is stopping and a chore under way finishes
// while the runners still run; then the three runners stop. The order is read from the lines
// each part logs as it ends its own stop, as the stop ran.
func TestShutdownStopsCronBeforeTheRunners(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		cfg := app.Defaults()
		cfg.DataDir, cfg.DatabaseURL, cfg.AdminToken = t.TempDir(), db, owedtest.AdminToken
		var logs owedtest.LogBuffer
		ctx := context.Background()
		a, err := app.New(ctx, cfg, app.Options{Log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err != nil {
			t.Fatalf("app: %v", err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			a.Shutdown(ctx)
			t.Fatal(err)
		}
		if err := a.Serve(ctx, ln); err != nil {
			a.Shutdown(ctx)
			t.Fatalf("serve: %v", err)
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := a.Shutdown(sctx); err != nil {
			t.Fatalf("shutdown: %v", err)
		}

		var order []string
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m struct{ Msg, Runner string }
			if json.Unmarshal([]byte(line), &m) != nil {
				continue
			}
			switch m.Msg {
			case "schedule stopped":
				order = append(order, "cron")
			case "runner stopped":
				order = append(order, m.Runner)
			}
		}
		// The runners stop at once, so their lines come in any order after cron's.
		if len(order) != 4 || order[0] != "cron" {
			t.Fatalf("stopped in the order %q; want cron, then the three runners", order)
		}
		if runners := slices.Sorted(slices.Values(order[1:])); !slices.Equal(runners, []string{"backfill", "content jobs", "webhook deliveries"}) {
			t.Errorf("runners stopped: %q; want the backfill, the content jobs and the webhook deliveries", runners)
		}
	})
}
