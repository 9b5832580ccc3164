package webhooks

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/owed/owed/outbound"
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

// CheckURL checks a subscription URL: http or https, a host, at most MaxURLLength long; and,
// unless allowPrivate, a host that resolves (through r, net.DefaultResolver when nil) only to
// public addresses (outbound.Check, the list every delivery's dial is checked against too). It
// returns the URL as it will be used, or a *URLError saying what is wrong. The address is
// checked again on every delivery, since DNS can change.
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
	if ip, err := netip.ParseAddr(host); err == nil {
		if outbound.Check(ip) != nil {
			return "", &URLError{fmt.Sprintf("url's host %s is not a public address: loopback, private, link-local or otherwise reserved (set OWED_WEBHOOKS_ALLOW_PRIVATE to allow it)", host)}
		}
		return u.String(), nil
	}
	r = cmp.Or[Resolver](r, net.DefaultResolver)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := r.LookupIPAddr(ctx, host)
	if err != nil || len(addrs) == 0 {
		return "", &URLError{fmt.Sprintf("url's host %s could not be resolved", host)}
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || outbound.Check(ip.Unmap()) != nil {
			return "", &URLError{fmt.Sprintf("url's host %s resolves to %s, not a public address: loopback, private, link-local or otherwise reserved (set OWED_WEBHOOKS_ALLOW_PRIVATE to allow it)", host, a.IP)}
		}
	}
	return u.String(), nil
}
