package media

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/owed/owed/outbound"
)

// guarded is an engine with OWED_MEDIA_ALLOW_PRIVATE off, as owed runs by default.
func guarded(t *testing.T, clock *fakeClock, exempt ...netip.AddrPort) *Engine {
	return newTestEngine(t, clock, func(c *Config) {
		c.AllowPrivate = false
		c.Outbound.Exempt = exempt
	})
}

func addrOf(c *cdn) netip.AddrPort { return netip.MustParseAddrPort(c.srv.Listener.Addr().String()) }

// TestLoopbackRowFailsUnfetched (issue 12, row 1): a row on 127.0.0.1, or on a name that
// resolves there, fails with the reason and is never fetched: the CDN standing in for an
// internal service records no request, and no gap is spent on it. An open port and a closed
// one end alike, so the outcomes tell nothing about which internal ports answer.
func TestLoopbackRowFailsUnfetched(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	inside := newCDN(t, clock, map[string]http.HandlerFunc{"/secret.png": serveBytes("image/png", pngBytes(t, 8, 8))})
	port := addrOf(inside).Port()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	e := guarded(t, clock)
	var results []Result
	for i, u := range []string{
		inside.url("/secret.png"),
		fmt.Sprintf("http://localhost:%d/secret.png", port),
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/secret.png", port),
		fmt.Sprintf("http://127.0.0.1:%d/secret.png", closed),
		fmt.Sprintf("http://localhost:%d/secret.png", closed),
		"http://169.254.169.254/latest/meta-data",
		"http://[64:ff9b::7f00:1]/x.png",
	} {
		res := e.Preview(context.Background(), image1(int64(i+1), u))
		if res.Outcome != Failed || res.Err != errRefusedReason || res.Status != 0 {
			t.Errorf("%s: %+v, want failed as refused", u, res)
		}
		results = append(results, res)
	}
	for _, r := range results[1:] {
		if r != results[0] {
			t.Errorf("outcomes differ: %+v and %+v; an open port must look like a closed one", results[0], r)
		}
	}
	if n := inside.hits.Load(); n != 0 {
		t.Fatalf("the internal server got %d requests", n)
	}
	// Literal addresses are refused before the gap: nothing was fetched, nothing waited for.
	if s := clock.Sleeps(); len(s) > 2 {
		t.Errorf("slept %v for rows that were never fetched", s)
	}

	// With OWED_MEDIA_ALLOW_PRIVATE on, the same row is fetched.
	open := newTestEngine(t, clock)
	if res := open.Preview(context.Background(), image1(9, inside.url("/secret.png"))); res.Outcome != Cached {
		t.Fatalf("allow-private: %+v, want cached", res)
	}
}

// TestRedirectToLoopbackFails (issue 12, row 1): a host the guard lets through (a loopback CDN
// exempted to stand in for a public one) that redirects to an internal address fails at the
// redirect hop: the internal server is never reached.
func TestRedirectToLoopbackFails(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	inside := newCDN(t, clock, map[string]http.HandlerFunc{"/secret.png": serveBytes("image/png", pngBytes(t, 8, 8))})
	front := newCDN(t, clock, map[string]http.HandlerFunc{
		"/ok.png": serveBytes("image/png", pngBytes(t, 8, 8)),
		"/literal": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, inside.url("/secret.png"), http.StatusFound)
		},
		"/name": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, fmt.Sprintf("http://localhost:%d/secret.png", addrOf(inside).Port()), http.StatusMovedPermanently)
		},
	})
	e := guarded(t, clock, addrOf(front))
	if res := e.Preview(context.Background(), image1(1, front.url("/ok.png"))); res.Outcome != Cached {
		t.Fatalf("the exempt front: %+v, want cached", res)
	}
	for i, p := range []string{"/literal", "/name"} {
		res := e.Preview(context.Background(), image1(int64(i+2), front.url(p)))
		if res.Outcome != Failed || res.Err != errRefusedReason {
			t.Errorf("%s: %+v, want failed as refused", p, res)
		}
	}
	if n := inside.hits.Load(); n != 0 {
		t.Fatalf("the internal server got %d requests through redirects", n)
	}
	if n := front.hits.Load(); n != 3 {
		t.Fatalf("the front got %d requests, want 3", n)
	}
}

// TestRedirectLimit: at most outbound.MaxRedirects redirects are followed; a longer chain fails.
func TestRedirectLimit(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	routes := map[string]http.HandlerFunc{"/0": serveBytes("image/png", pngBytes(t, 8, 8))}
	for i := 1; i <= 4; i++ {
		to := fmt.Sprintf("/%d", i-1)
		routes[fmt.Sprintf("/%d", i)] = func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusFound) }
	}
	c := newCDN(t, clock, routes)
	e := newTestEngine(t, clock)
	if res := e.Preview(context.Background(), image1(1, c.url(fmt.Sprintf("/%d", outbound.MaxRedirects)))); res.Outcome != Cached {
		t.Fatalf("%d redirects: %+v, want cached", outbound.MaxRedirects, res)
	}
	res := e.Preview(context.Background(), image1(2, c.url(fmt.Sprintf("/%d", outbound.MaxRedirects+1))))
	if res.Outcome != Failed || !strings.Contains(res.Err, "redirects") {
		t.Fatalf("%d redirects: %+v, want failed", outbound.MaxRedirects+1, res)
	}
}
