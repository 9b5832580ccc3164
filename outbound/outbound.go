// Package outbound is the one HTTP client owed uses to reach addresses it was given by someone
// else: media URLs pushed by the bot, webhook URLs set by admins. Such an address may point
// inside the network owed runs in (loopback, a private range, a cloud metadata service), so
// every connection is checked where it cannot be dodged: on the address actually dialled,
// after DNS, by the dialer's Control function. A host name that resolves to a public address
// when it is checked and to a private one when it is fetched (DNS rebinding), a redirect to an
// internal host, or a proxy taken from the environment all meet the same check.
//
// The list of non-public ranges is the maintained one of code.dny.dev/ssrf: every IPv4 range
// of the IANA special-purpose registry (0.0.0.0/8, private, loopback, link-local, carrier-grade
// NAT, benchmarking 198.18.0.0/15, reserved 240.0.0.0/4 and broadcast, multicast,
// documentation, …), and for IPv6 everything outside global unicast 2000::/3 (so loopback,
// IPv4-mapped and IPv4-compatible forms, NAT64 64:ff9b::/96, unique local, link-local and
// site-local fec0::/10) plus the special ranges inside it (6to4 2002::/16, Teredo, …).
package outbound

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// MaxRedirects is the most redirects a guarded client follows; each hop is dialled, and so
// checked, like the first.
const MaxRedirects = 3

// ErrRefused is wrapped by every error of a connection the guard refused. Its text is the same
// whatever the address and whether anything listens there, so a caller learns nothing about
// the inside of the network from it.
var ErrRefused = errors.New("refused: not a public address")

// ErrTooManyRedirects is wrapped by the error of a request that was redirected more often than
// its client follows.
var ErrTooManyRedirects = errors.New("too many redirects")

// guardian holds the deny lists. Any port and both TCP families are allowed: the ranges are the
// defence, and webhook receivers and CDNs may listen on any port.
var guardian = ssrf.New(ssrf.WithAnyPort())

// Check reports whether ip is a public address a guarded client may connect to: nil if so,
// else an error wrapping ErrRefused.
func Check(ip netip.Addr) error {
	if !ip.IsValid() {
		return ErrRefused
	}
	if err := guardian.SafeAddr(ip); err != nil {
		return ErrRefused
	}
	return nil
}

// CheckHost checks a URL's host as written (brackets allowed): a literal IP address must be
// public; a name passes, since only the dial can tell where it leads. It wraps ErrRefused.
func CheckHost(host string) error {
	ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if err != nil {
		return nil // a name (or no host at all: not this function's business)
	}
	return Check(ip)
}

// Options shape a guarded client.
type Options struct {
	// AllowPrivate turns the address check off: loopback, private and every other non-public
	// address may be reached (OWED_MEDIA_ALLOW_PRIVATE, OWED_WEBHOOKS_ALLOW_PRIVATE; tests with
	// a local server). Proxies stay off and redirects stay bounded.
	AllowPrivate bool
	// Exempt are exact address:port pairs reachable despite the check. It exists for tests,
	// which stand a loopback server in for a public host to show that the next hop of a
	// redirect is still checked; owed itself never sets it.
	Exempt []netip.AddrPort
	// Redirects is how many redirects are followed, at most MaxRedirects (more is taken as
	// MaxRedirects). With 0 none is: the redirect is the answer.
	Redirects int
	// Timeout bounds a whole request, redirects and body included (0: none; callers usually
	// bound each request by its context).
	Timeout time.Duration
	// DialTimeout bounds connecting and the TLS handshake (default 10 s).
	DialTimeout time.Duration
	// MaxIdleConnsPerHost is how many idle connections are kept per host (default 2).
	MaxIdleConnsPerHost int
	// DisableKeepAlives makes every request use a new connection.
	DisableKeepAlives bool
	// SameOrigin follows a redirect only to the origin (scheme, host and port) of the request
	// it answers; a redirect anywhere else is not followed, and is itself the answer. The model
	// client sets it: its URL may be private (an operator's local relay), so the address check
	// is off, and a redirect must not carry the author's text to another host.
	SameOrigin bool
	// Proxy is a proxy every request goes through (OWED_MODEL_PROXY); nil: none. The
	// environment's HTTP_PROXY and HTTPS_PROXY are never read. With the address check on, the
	// proxy is what is dialled, and so what is checked.
	Proxy *url.URL
	// Observe, when set, wraps the client's transport. It exists for tests that must know what
	// the client itself got (an answer, or the error its deadline ended it with), which a
	// server cannot tell; owed itself never sets it.
	Observe func(http.RoundTripper) http.RoundTripper
}

// NewClient returns the guarded client: a dialer that checks every address it connects to
// (unless AllowPrivate), no proxy, at most o.Redirects redirects, each one dialled through the
// same dialer. A refused connection fails the request with an error wrapping ErrRefused.
func NewClient(o Options) *http.Client {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	redirects := min(max(o.Redirects, 0), MaxRedirects)
	dialer := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}
	if !o.AllowPrivate {
		dialer.Control = control(slices.Clone(o.Exempt))
	}
	transport := &http.Transport{
		// A proxy from the environment would be dialled instead of the host, hiding the address
		// the guard must see, and would itself reach whatever it is asked to; only one the
		// caller names is used.
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          max(100, o.MaxIdleConnsPerHost),
		MaxIdleConnsPerHost:   o.MaxIdleConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   o.DialTimeout,
		ExpectContinueTimeout: time.Second,
		DisableKeepAlives:     o.DisableKeepAlives,
	}
	if o.Proxy != nil {
		transport.Proxy = http.ProxyURL(o.Proxy)
	}
	var rt http.RoundTripper = transport
	if o.Observe != nil {
		rt = o.Observe(transport)
	}
	return &http.Client{
		Transport: rt,
		Timeout:   o.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if redirects == 0 {
				return http.ErrUseLastResponse
			}
			if o.SameOrigin && !sameOrigin(req.URL, via[0].URL) {
				return http.ErrUseLastResponse
			}
			if len(via) > redirects {
				return fmt.Errorf("%w: more than %d", ErrTooManyRedirects, redirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("%w: redirect to a %s: URL", ErrRefused, req.URL.Scheme)
			}
			// The dial checks the hop anyway; a literal address fails here without one.
			return o.CheckURL(req.URL)
		},
	}
}

// sameOrigin reports whether a and b have the same scheme, host and port (the scheme's
// default port when none is written).
func sameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "https") {
			return "443"
		}
		return "80"
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

// CheckURL checks what can be checked of u before any lookup, as a client made with o would:
// a host written as an address must be public (or o.AllowPrivate, or exempt). A name passes:
// the dial checks where it leads. It wraps ErrRefused.
func (o Options) CheckURL(u *url.URL) error {
	if o.AllowPrivate {
		return nil
	}
	if ap, err := netip.ParseAddrPort(u.Host); err == nil && slices.Contains(o.Exempt, ap) {
		return nil
	}
	return CheckHost(u.Hostname())
}

// control is the dialer's check, run on the resolved address of every connection attempt
// before it is made.
func control(exempt []netip.AddrPort) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return ErrRefused
		}
		if slices.Contains(exempt, ap) {
			return nil
		}
		if network != "tcp4" && network != "tcp6" {
			return ErrRefused
		}
		return Check(ap.Addr())
	}
}
