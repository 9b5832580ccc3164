package api

import (
	"fmt"
	"testing"
	"time"
)

// TestSignInLimiterKeysAreBounded: a caller cycling through endless addresses or tokens does
// not grow the limiter past its size; a key it forgot was idle the longest.
func TestSignInLimiterKeysAreBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	k := newKeyedLimiter(time.Minute, 2, 100)
	for i := range 10_000 {
		k.take(fmt.Sprintf("198.51.100.%d", i), now)
	}
	if n := k.len(); n != 100 {
		t.Errorf("%d keys held after 10000 distinct ones, want the bound 100", n)
	}
	// A key still held keeps its count: two takes, then refused until a token is back.
	k.take("a", now)
	k.take("a", now)
	if ok, wait := k.take("a", now); ok || wait != time.Minute {
		t.Errorf("third take at once: %v %v, want refused for a minute", ok, wait)
	}
	if ok, _ := k.take("a", now.Add(time.Minute)); !ok {
		t.Errorf("a take a minute later was refused")
	}
}

// TestSignInAddressKey: an IPv6 client's whole /64 shares one bucket; IPv4 addresses are their own.
func TestSignInAddressKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ a, b string }{
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"},
		{"2001:db8:1:2::1", "2001:db8:1:2:abcd::7"},
	} {
		if addrKey(c.a) != addrKey(c.b) {
			t.Errorf("%s and %s: keys %s and %s, want one /64", c.a, c.b, addrKey(c.a), addrKey(c.b))
		}
	}
	if addrKey("2001:db8:1:2::1") == addrKey("2001:db8:1:3::1") {
		t.Errorf("two /64s share a key")
	}
	if addrKey("192.0.2.1") == addrKey("192.0.2.2") || addrKey("192.0.2.1") != "192.0.2.1" {
		t.Errorf("IPv4 keys: %s %s", addrKey("192.0.2.1"), addrKey("192.0.2.2"))
	}
}

// len is how many keys the limiter holds.
func (k *keyedLimiter) len() int { return k.keys.Len() }
