package app_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/owedtest"
)

// TestAFailingListenerIsReported: a listener that fails while serving (here closed under the
// server) is sent to Failed with what failed, instead of leaving the runners working with no
// HTTP; the process then shuts down as on a signal.
func TestAFailingListenerIsReported(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		cfg := app.Defaults()
		cfg.DataDir, cfg.DatabaseURL, cfg.AdminToken = t.TempDir(), db, owedtest.AdminToken
		ctx := context.Background()
		a, err := app.New(ctx, cfg, app.Options{Log: owedtest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Serve(ctx, ln); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-a.Failed():
			t.Fatalf("Failed before the listener failed: %v", err)
		default:
		}
		ln.Close()
		select {
		case err := <-a.Failed():
			if err == nil || !strings.Contains(err.Error(), "serving HTTP on "+ln.Addr().String()) {
				t.Errorf("Failed gave %v; want the HTTP listener's error, naming its address", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a closed listener was not reported on Failed")
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := a.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown after the listener failed: %v", err)
		}
	})
}
