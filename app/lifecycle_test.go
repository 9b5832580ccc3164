package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/owedtest"
)

// TestAFailingListenerIsReported: a listener that fails while serving (here closed under the
// server) is sent to Failed with what failed, instead of leaving the runners working with no
// HTTP; the process then shuts down as on a signal.
func TestAFailingListenerIsReported(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		a, ln := owedtest.Serve(t, db)
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
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown after the listener failed: %v", err)
		}
	})
}
