package outbound_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/owed/owed/outbound"
)

// nonPublic are addresses that must never be reached, in every spelling the issue found
// accepted or that is easy to miss.
var nonPublic = []string{
	"127.0.0.1", "127.255.255.254", "0.0.0.0", "0.1.2.3", "10.1.2.3", "172.16.0.1", "192.168.1.1",
	"169.254.169.254", "100.64.0.1", "198.18.0.1", "198.19.255.255", "240.0.0.1", "255.255.255.255",
	"224.0.0.1", "192.0.0.8", "192.0.2.1",
	"::1", "::", "::7f00:1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:8.8.8.8",
	"64:ff9b::7f00:1", "64:ff9b::a00:1", "2002:7f00:1::1", "2002:a00:1::1", "2001::1", "2001:db8::1",
	"fc00::1", "fd12:3456::1", "fe80::1", "fec0::1", "ff02::1", "100::1",
}

var public = []string{"8.8.8.8", "1.1.1.1", "93.184.215.14", "2606:4700:4700::1111", "2a00:1450:4001:82a::200e"}

func TestCheckRanges(t *testing.T) {
	for _, s := range nonPublic {
		ip := netip.MustParseAddr(s)
		if err := outbound.Check(ip); !errors.Is(err, outbound.ErrRefused) {
			t.Errorf("Check(%s) = %v, want ErrRefused", s, err)
		}
		if err := outbound.CheckHost("[" + s + "]"); !errors.Is(err, outbound.ErrRefused) {
			t.Errorf("CheckHost([%s]) = %v, want ErrRefused", s, err)
		}
	}
	for _, s := range public {
		if err := outbound.Check(netip.MustParseAddr(s)); err != nil {
			t.Errorf("Check(%s) = %v, want nil", s, err)
		}
	}
	if err := outbound.Check(netip.Addr{}); err == nil {
		t.Error("the zero address passed")
	}
	if err := outbound.CheckHost("cdn.example.com"); err != nil {
		t.Errorf("a name is for the dial to judge: %v", err)
	}
}

// server is a loopback server counting the requests it gets.
type server struct {
	*httptest.Server
	hits atomic.Int64
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) addr() netip.AddrPort { return netip.MustParseAddrPort(s.Listener.Addr().String()) }

func ok(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "inside") }

func get(t *testing.T, c *http.Client, u string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return resp, err
}

// TestRefusesLoopbackAtDial: an address given literally, or a name that resolves to loopback,
// is refused before any connection is made, whether or not something listens there.
func TestRefusesLoopbackAtDial(t *testing.T) {
	srv := newServer(t, ok)
	c := outbound.NewClient(outbound.Options{Redirects: outbound.MaxRedirects})
	port := srv.addr().Port()
	closed := closedPort(t)
	for _, u := range []string{
		srv.URL,
		fmt.Sprintf("http://localhost:%d/", port), // resolved, then refused on the address dialled
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", port),
		fmt.Sprintf("http://127.0.0.1:%d/", closed),
	} {
		_, err := get(t, c, u)
		if !errors.Is(err, outbound.ErrRefused) {
			t.Errorf("GET %s: %v, want ErrRefused", u, err)
		}
	}
	if n := srv.hits.Load(); n != 0 {
		t.Fatalf("the loopback server was reached %d times", n)
	}
	// A closed port and an open one fail alike: nothing tells the caller which answers.
	_, errOpen := get(t, c, srv.URL)
	_, errClosed := get(t, c, fmt.Sprintf("http://127.0.0.1:%d/", closed))
	open := strings.ReplaceAll(unwrapURL(errOpen), strconv.Itoa(int(port)), "PORT")
	shut := strings.ReplaceAll(unwrapURL(errClosed), strconv.Itoa(closed), "PORT")
	if open != shut {
		t.Errorf("open port: %q, closed port: %q; want the same", open, shut)
	}
}

func unwrapURL(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return fmt.Sprint(err)
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// TestRedirectHopChecked: a host the guard lets through (a loopback server exempted to stand in
// for a public CDN) that redirects inside is refused at the redirect hop, and the inside server
// is never reached — whether the hop names an address, or a name that resolves to one.
func TestRedirectHopChecked(t *testing.T) {
	inside := newServer(t, ok)
	for name, target := range map[string]string{
		"literal": inside.URL + "/secret",
		"name":    fmt.Sprintf("http://localhost:%d/secret", inside.addr().Port()),
	} {
		t.Run(name, func(t *testing.T) {
			front := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target, http.StatusFound)
			})
			c := outbound.NewClient(outbound.Options{Redirects: outbound.MaxRedirects, Exempt: []netip.AddrPort{front.addr()}})
			_, err := get(t, c, front.URL+"/img.png")
			if !errors.Is(err, outbound.ErrRefused) {
				t.Fatalf("redirect inside: %v, want ErrRefused", err)
			}
			if front.hits.Load() != 1 || inside.hits.Load() != 0 {
				t.Fatalf("front hit %d times, inside %d; want 1 and 0", front.hits.Load(), inside.hits.Load())
			}
		})
	}
	// With the check off, the same chain goes through: the test above fails for the right reason.
	front := newServer(t, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, inside.URL, http.StatusFound) })
	c := outbound.NewClient(outbound.Options{Redirects: outbound.MaxRedirects, AllowPrivate: true})
	if resp, err := get(t, c, front.URL); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("allow-private: %v %v", resp, err)
	}
}

// TestRedirectLimit: three redirects are followed, a fourth is refused; with Redirects 0 the
// redirect itself is the answer.
func TestRedirectLimit(t *testing.T) {
	var srv *server
	srv = newServer(t, func(w http.ResponseWriter, r *http.Request) {
		var n int
		if _, err := fmt.Sscanf(r.URL.Path, "/hop/%d", &n); err != nil || n == 0 {
			ok(w, r)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("%s/hop/%d", srv.URL, n-1), http.StatusFound)
	})
	c := outbound.NewClient(outbound.Options{Redirects: outbound.MaxRedirects, AllowPrivate: true})
	if resp, err := get(t, c, srv.URL+"/hop/3"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("3 redirects: %v %v", resp, err)
	}
	srv.hits.Store(0)
	if _, err := get(t, c, srv.URL+"/hop/4"); !errors.Is(err, outbound.ErrTooManyRedirects) {
		t.Fatalf("4 redirects: %v, want ErrTooManyRedirects", err)
	}
	if n := srv.hits.Load(); n != 4 {
		t.Fatalf("%d requests for a chain refused at its 4th redirect, want 4", n)
	}
	// More than MaxRedirects asked for is MaxRedirects.
	c = outbound.NewClient(outbound.Options{Redirects: 10, AllowPrivate: true})
	if _, err := get(t, c, srv.URL+"/hop/4"); !errors.Is(err, outbound.ErrTooManyRedirects) {
		t.Fatalf("Redirects 10, 4 redirects: %v", err)
	}
	c = outbound.NewClient(outbound.Options{AllowPrivate: true})
	if resp, err := get(t, c, srv.URL+"/hop/1"); err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("Redirects 0: %v %v, want the 302 itself", resp, err)
	}
	// Only http and https are followed.
	odd := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "ftp://example.com/x", http.StatusFound)
	})
	c = outbound.NewClient(outbound.Options{Redirects: outbound.MaxRedirects, AllowPrivate: true})
	if _, err := get(t, c, odd.URL); err == nil {
		t.Fatal("a redirect to ftp: was followed")
	}
}

// TestNoProxyFromEnvironment: a proxy named in the environment is not used (it would be dialled
// instead of the host, and reach whatever it is asked to). net/http exempts loopback hosts from
// the environment's proxy anyway, so the request names a host that does not resolve: through a
// proxy it would reach the proxy, without one it fails at DNS.
func TestNoProxyFromEnvironment(t *testing.T) {
	proxy := newServer(t, ok)
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		t.Setenv(k, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	c := outbound.NewClient(outbound.Options{AllowPrivate: true})
	if _, err := get(t, c, "http://cdn.owed-test.invalid/x.png"); err == nil {
		t.Fatal("a host that does not resolve answered")
	}
	if n := proxy.hits.Load(); n != 0 {
		t.Fatalf("the environment's proxy got %d requests", n)
	}
}
