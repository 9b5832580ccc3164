package app_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// TestConnectionCapKeepsHealth: with the listener capped (OWED_MAX_CONNECTIONS 16, all of them
// for the one client address), streams stop below the cap (OWED_MAX_STREAMS is lowered to leave
// room), refused ones are closed at once, and /healthz keeps answering while an author's token
// tries many more.
func TestConnectionCapKeepsHealth(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		a, ln := owedtest.Serve(t, db, func(cfg *app.Config) {
			cfg.DatabaseMaxConns = 4
			cfg.MaxConnections, cfg.MaxStreams, cfg.StreamsPerUser, cfg.MaxConnectionsPerIP = 16, 10000, 10000, 16
		})
		ctx := context.Background()
		_, token, err := a.Store.CreateUser(ctx, "ann", models.RoleAuthor)
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + ln.Addr().String()
		// The client keeps to the listener's cap: past it, connections are refused at once.
		client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 16}, Timeout: 10 * time.Second}

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

// TestConnectionFloodKeepsHealth: clients that open connections, send one request each and go
// silent. One address gets its share of the listener (a quarter of OWED_MAX_CONNECTIONS) and
// no more; several such addresses together fill the listener, whose idle connections then make
// room for new ones. Throughout, /healthz answers within 1 s, and another address is served.
func TestConnectionFloodKeepsHealth(t *testing.T) {
	const maxConns, share, perAddress = 64, 16, 60
	_, ln := owedtest.Serve(t, "sqlite:"+t.TempDir()+"/owed.db", func(cfg *app.Config) { cfg.MaxConnections = maxConns })
	addr := ln.Addr().(*net.TCPAddr)
	from := func(ip string) *net.Dialer {
		return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: time.Second}
	}

	// The health checks come from 127.0.0.1, on a fresh connection each, while the flood runs.
	done := make(chan struct{})
	var checks, late atomic.Int64
	var probing sync.WaitGroup
	var once sync.Once
	stop := func() {
		once.Do(func() { close(done) })
		probing.Wait()
	}
	defer stop()
	probing.Add(1)
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: from("127.0.0.1").DialContext}}
	go func() {
		defer probing.Done()
		for {
			res, err := probe.Get("http://" + addr.String() + "/healthz")
			checks.Add(1)
			if err != nil || res.StatusCode != http.StatusOK {
				late.Add(1)
				t.Errorf("/healthz during the flood: %v %v", res, err)
			} else {
				res.Body.Close()
			}
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	// Each flooding address opens its connections one after another; each asks for the OpenAPI
	// document and keeps its connection open.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i, ip := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"} {
		answers := map[int]int{}
		for range perAddress {
			c, err := from(ip).Dial("tcp", addr.String())
			if err != nil {
				t.Fatalf("dial from %s: %v", ip, err)
			}
			held = append(held, c)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c, "GET /api/openapi.json HTTP/1.1\r\nHost: owed\r\n\r\n")
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				answers[0]++ // closed at once: no room for it
				continue
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			answers[res.StatusCode]++
		}
		// The first address is alone: exactly its share is served, the rest refused (503 on a
		// slot kept for health checks, or closed). Later ones take the place of idle ones.
		if i == 0 && (answers[http.StatusOK] != share || answers[http.StatusServiceUnavailable] == 0) {
			t.Fatalf("one address's %d connections: %v; want %d served and 503s on the slots kept for health", perAddress, answers, share)
		}
		if i == 0 { // at its share, the address still reaches /healthz on a slot kept for it
			own := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: from(ip).DialContext}}
			if res, err := own.Get("http://" + addr.String() + "/healthz"); err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("/healthz from the flooding address: %v %v", res, err)
			} else {
				res.Body.Close()
			}
		}
		if answers[http.StatusOK] < share {
			t.Fatalf("address %s: %v; want at least its share (%d) served, idle connections making room", ip, answers, share)
		}
	}
	stop()
	if checks.Load() < 5 || late.Load() > 0 {
		t.Fatalf("%d of %d health checks failed", late.Load(), checks.Load())
	}

	// With the flood's connections all still open, another address is served.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: from("127.0.0.7").DialContext}}
	for range 3 {
		r, err := owedtest.Call(client, "http://"+addr.String(), http.MethodGet, "/api/admin/stats", owedtest.AdminToken, nil)
		if err != nil || r.Status != http.StatusOK {
			t.Fatalf("another address during the flood: %d %v", r.Status, err)
		}
	}
}
