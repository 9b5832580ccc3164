package app_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// TestConnectionCapKeepsHealth: with the listener capped (OWED_MAX_CONNECTIONS 16), streams
// stop below the cap (OWED_MAX_STREAMS is lowered to leave room), refused ones are closed at
// once, and /healthz keeps answering while an author's token tries many more.
func TestConnectionCapKeepsHealth(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		a, ln := owedtest.Serve(t, db, func(cfg *app.Config) {
			cfg.DatabaseMaxConns = 4
			cfg.MaxConnections, cfg.MaxStreams, cfg.StreamsPerUser = 16, 10000, 10000
		})
		ctx := context.Background()
		_, token, err := a.Store.CreateUser(ctx, "ann", models.RoleAuthor)
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + ln.Addr().String()
		client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, DisableKeepAlives: false}, Timeout: 10 * time.Second}

		var mu sync.Mutex
		codes := map[int]int{}
		var bodies []io.ReadCloser
		var wg sync.WaitGroup
		for i := 0; i < 40; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest(http.MethodGet, base+"/api/listeners/mine/stream", nil)
				req.Header.Set("Authorization", "Bearer "+token)
				res, err := client.Do(req)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					codes[0]++
					return
				}
				codes[res.StatusCode]++
				if res.StatusCode == http.StatusOK {
					bodies = append(bodies, res.Body)
				} else {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
			}()
		}
		wg.Wait()
		defer func() {
			for _, b := range bodies {
				b.Close()
			}
		}()
		// 16 connections less a tenth (at least 4): 12 streams; the rest refused with 503.
		if codes[http.StatusOK] != 12 || codes[http.StatusServiceUnavailable] != 28 {
			t.Fatalf("answers to 40 streams: %v; want 12 streams and 28 refused", codes)
		}
		for i := 0; i < 5; i++ {
			res, err := client.Get(base + "/healthz")
			if err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("/healthz with the streams at their cap: %v %v", res, err)
			}
			res.Body.Close()
		}
	})
}
