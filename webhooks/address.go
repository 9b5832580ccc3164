package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// MaxURLLength bounds a subscription's URL.
const MaxURLLength = 2048

// URLError is a subscription URL refused; its message is meant for the admin who gave it.
type URLError struct{ Msg string }

func (e *URLError) Error() string { return e.Msg }

// Resolver looks host names up; net.DefaultResolver is one.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// sharedSpace is 100.64.0.0/10, carrier-grade NAT: not the public internet either.
var sharedSpace = netip.MustParsePrefix("100.64.0.0/10")

// Private reports whether ip is an address a webhook must not reach unless private addresses
// are allowed: loopback, private (RFC 1918, IPv6 unique local), link-local, unspecified,
// multicast, or carrier-grade NAT space, IPv4-mapped IPv6 forms included.
func Private(ip netip.Addr) bool {
	ip = ip.Unmap()
	return !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() || sharedSpace.Contains(ip)
}

// CheckURL checks a subscription URL: http or https, a host, at most MaxURLLength long; and,
// unless allowPrivate, a host that resolves (through r, net.DefaultResolver when nil) only to
// public addresses (see Private). It returns the URL as it will be used, or a *URLError saying
// what is wrong. The address is checked again on every delivery, since DNS can change.
func CheckURL(ctx context.Context, raw string, allowPrivate bool, r Resolver) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", &URLError{"url is required"}
	}
	if len(raw) > MaxURLLength {
		return "", &URLError{fmt.Sprintf("url must be at most %d characters", MaxURLLength)}
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return "", &URLError{"url must be an absolute http:// or https:// URL"}
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", &URLError{"url must be an http:// or https:// URL"}
	}
	host := u.Hostname()
	if host == "" {
		return "", &URLError{"url must name a host"}
	}
	u.Fragment, u.RawFragment = "", ""
	if allowPrivate {
		return u.String(), nil
	}
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if Private(ip) {
			return "", &URLError{fmt.Sprintf("url's host %s is a loopback, private or link-local address (set OWED_WEBHOOKS_ALLOW_PRIVATE to allow it)", host)}
		}
		return u.String(), nil
	}
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := r.LookupIPAddr(ctx, host)
	if err != nil || len(addrs) == 0 {
		return "", &URLError{fmt.Sprintf("url's host %s could not be resolved", host)}
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || Private(ip) {
			return "", &URLError{fmt.Sprintf("url's host %s resolves to %s, a loopback, private or link-local address (set OWED_WEBHOOKS_ALLOW_PRIVATE to allow it)", host, a.IP)}
		}
	}
	return u.String(), nil
}

// ErrPrivateAddress is the error of a delivery whose host resolved to a private address.
var ErrPrivateAddress = errors.New("refused to connect to a loopback, private or link-local address (OWED_WEBHOOKS_ALLOW_PRIVATE is off)")

// guardDial refuses connections to private addresses. It runs after name resolution, on the
// very address being dialled, so a host that resolved to a public address at creation and to
// a private one now is refused too.
func guardDial(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, ErrPrivateAddress)
	}
	if Private(ap.Addr()) {
		return fmt.Errorf("%s: %w", ap.Addr(), ErrPrivateAddress)
	}
	return nil
}
