package app_test

import (
	"bufio"
	"context"
	"errors"
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
		// The client keeps a little under the listener's cap (past it, connections are closed at
		// once): a connection the server closed after a refusal may hold its slot a moment
		// after the client, which saw the answer, dials the next.
		client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 14}, Timeout: 10 * time.Second}

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
	addr := ln.Addr().String()

	// The health checks come from 127.0.0.1, on a fresh connection each, while the flood runs.
	stop := probeHealth(t, addr, "127.0.0.1")
	defer stop()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i, ip := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"} {
		answers := flood(t, addr, ip, perAddress, &held)
		// The first address is alone: exactly its share is served, the rest refused (503 on a
		// slot kept for health checks, or closed); it still reaches /healthz on such a slot.
		// Later ones take the place of idle ones.
		if i == 0 && (answers[http.StatusOK] != share || answers[http.StatusServiceUnavailable] == 0) {
			t.Fatalf("one address's %d connections: %v; want %d served and 503s on the slots kept for health", perAddress, answers, share)
		}
		if i == 0 {
			if r, err := owedtest.Call(healthClient(ip), "http://"+addr, http.MethodGet, "/healthz", "", nil); err != nil || r.Status != http.StatusOK {
				t.Fatalf("/healthz from the flooding address: %d %v", r.Status, err)
			}
		}
		if answers[http.StatusOK] < share {
			t.Fatalf("address %s: %v; want at least its share (%d) served, idle connections making room", ip, answers, share)
		}
	}
	stop()

	// With the flood's connections all still open, another address is served.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: from("127.0.0.7").DialContext}}
	for range 3 {
		r, err := owedtest.Call(client, "http://"+addr, http.MethodGet, "/api/admin/stats", owedtest.AdminToken, nil)
		if err != nil || r.Status != http.StatusOK {
			t.Fatalf("another address during the flood: %d %v", r.Status, err)
		}
	}
}

// from dials from a loopback address of its own (the whole 127.0.0.0/8 is the host's).
func from(ip string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: time.Second}
}

// healthClient asks from ip on a fresh connection each time, and waits 1 s at most.
func healthClient(ip string) *http.Client {
	return &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: from(ip).DialContext}}
}

// probeHealth asks /healthz from ip every 10 ms until stop, which fails the test unless every
// answer was a 200 within 1 s.
func probeHealth(t *testing.T, addr, ip string) (stop func()) {
	done := make(chan struct{})
	var checks, failed atomic.Int64
	var probing sync.WaitGroup
	probing.Add(1)
	go func() {
		defer probing.Done()
		for {
			r, err := owedtest.Call(healthClient(ip), "http://"+addr, http.MethodGet, "/healthz", "", nil)
			checks.Add(1)
			if err != nil || r.Status != http.StatusOK {
				failed.Add(1)
				t.Errorf("/healthz during the flood: %d %v", r.Status, err)
			}
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			probing.Wait()
			if checks.Load() < 5 || failed.Load() > 0 {
				t.Errorf("%d of %d health checks failed", failed.Load(), checks.Load())
			}
		})
	}
}

// flood opens n connections from ip one after another, each asking for the OpenAPI document
// and then kept open (in *held), and counts the answers by status (0: closed unanswered).
func flood(t *testing.T, addr, ip string, n int, held *[]net.Conn) map[int]int {
	answers := map[int]int{}
	for range n {
		c, err := from(ip).Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial from %s: %v", ip, err)
		}
		*held = append(*held, c)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET /api/openapi.json HTTP/1.1\r\nHost: owed\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			answers[0]++
			continue
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		answers[res.StatusCode]++
	}
	return answers
}

// TestSpareConnectionKeepsItsFirstRequest: a connection a client dialled ahead and left unused
// in its pool waits for its first request as long as a kept-alive one waits for its next: its
// POST, sent after ReadHeaderTimeout (here 50 ms) has passed, is answered, not met with EOF.
// ReadHeaderTimeout still bounds a request from its first byte.
func TestSpareConnectionKeepsItsFirstRequest(t *testing.T) {
	ctx := context.Background()
	cfg := app.Defaults()
	cfg.DataDir, cfg.DatabaseURL, cfg.AdminToken = t.TempDir(), "sqlite:"+t.TempDir()+"/owed.db", owedtest.AdminToken
	a, err := app.New(ctx, cfg, app.Options{Log: owedtest.Logger(t), ServerTimeouts: app.ServerTimeouts{ReadHeader: 50 * time.Millisecond}})
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
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		a.Shutdown(sctx)
	})

	spare, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer spare.Close()
	// Ten times the header timeout with nothing sent: the server must not hang up.
	spare.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := spare.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("an unused connection after 500 ms: %v; want it still open", err)
	}
	spare.SetDeadline(time.Now().Add(5 * time.Second))
	body := `{"name":"ann","role":"author"}`
	fmt.Fprintf(spare, "POST /api/admin/users HTTP/1.1\r\nHost: owed\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		owedtest.AdminToken, len(body), body)
	res, err := http.ReadResponse(bufio.NewReader(spare), nil)
	if err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("POST on the spare connection: %v %v", res, err)
	}
	res.Body.Close()

	slow, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "GET /healthz HTTP/1.1\r\n") // and never the rest of the headers
	slow.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := slow.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a request whose headers never end: %v; want the server to hang up (EOF)", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
