package app_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/media"
	"github.com/owed/owed/owedtest"
)

// TestMediaFetchEndsWithinALeaseThird: the backfill queue renews its lease between fetches, so
// a fetch is cut at a third of OWED_LEASE (here 1.5 s: 500 ms) rather than at the engine's 30 s,
// and a CDN that never answers cannot hold a batch past the lease.
func TestMediaFetchEndsWithinALeaseThird(t *testing.T) {
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer cdn.Close()
	a, _ := owedtest.Serve(t, "sqlite:"+t.TempDir()+"/owed.db", func(cfg *app.Config) {
		cfg.Lease, cfg.MediaAllowPrivate, cfg.MediaMinGap, cfg.MediaMaxGap = 1500*time.Millisecond, true, 0, 0
	})
	done := make(chan media.Result, 1)
	go func() {
		done <- a.Media.Preview(context.Background(), media.Item{ID: 1, Kind: "image", URL: cdn.URL + "/m/1"})
	}()
	select {
	case res := <-done:
		if res.Outcome != media.Suspect {
			t.Fatalf("a fetch the CDN never answered: %+v; want suspect (a timeout)", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a fetch the CDN never answers outlasted the lease")
	}
}
