package webhooks_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/webhooks"
)

// The Standard Webhooks scheme's published test vector.
func TestSignMatchesTheStandardWebhooksVector(t *testing.T) {
	got, err := webhooks.Sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
	// The test verifier (the one docs/webhooks.md gives receivers) agrees.
	h := map[string][]string{"Webhook-Id": {"msg_p5jXN8AQM9LWM0D4loKWxJek"}, "Webhook-Timestamp": {"1614265330"},
		"Webhook-Signature": {"v1,bm9wZQ== " + got}}
	if err := webhooks.Verify("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", h, []byte(`{"test": 2432232314}`), time.Unix(1614265330, 0)); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if err := webhooks.Verify("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", h, []byte(`{"test": 2432232315}`), time.Unix(1614265330, 0)); err == nil {
		t.Fatal("a changed body verified")
	}
	if err := webhooks.Verify("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", h, []byte(`{"test": 2432232314}`), time.Unix(1614265330+600, 0)); err == nil {
		t.Fatal("a stale timestamp verified")
	}
}

func TestSignRefusesABadSecret(t *testing.T) {
	for _, s := range []string{"", "whsec_", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!"} {
		if _, err := webhooks.Sign(s, "msg_1", 1, nil); !errors.Is(err, webhooks.ErrBadSecret) {
			t.Errorf("Sign with secret %q: %v, want ErrBadSecret", s, err)
		}
	}
}

// resolver answers fixed addresses per host.
type resolver map[string][]string

func (r resolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	addrs, ok := r[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []net.IPAddr
	for _, a := range addrs {
		out = append(out, net.IPAddr{IP: net.ParseIP(a)})
	}
	return out, nil
}

func TestCheckURL(t *testing.T) {
	r := resolver{"hooks.example": {"93.184.215.7"}, "inside.example": {"93.184.215.8", "10.0.0.8"}, "localhost": {"127.0.0.1", "::1"},
		"nat64.example": {"64:ff9b::7f00:1"}, "docs.example": {"203.0.113.7"}}
	ok := map[string]string{
		"https://hooks.example/owed":          "https://hooks.example/owed",
		"HTTP://hooks.example:8443/a?b=c#d":   "http://hooks.example:8443/a?b=c",
		"  https://93.184.215.9/x ":           "https://93.184.215.9/x",
		"https://[2606:4700:4700::1111]/hook": "https://[2606:4700:4700::1111]/hook",
	}
	for in, want := range ok {
		got, err := webhooks.CheckURL(context.Background(), in, false, r)
		if err != nil || got != want {
			t.Errorf("CheckURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := map[string]string{
		"":                            "required",
		"ftp://hooks.example/":        "http",
		"/relative":                   "absolute",
		"hooks.example/owed":          "absolute",
		"https:///nohost":             "host",
		"http://127.0.0.1:8080/hook":  "OWED_WEBHOOKS_ALLOW_PRIVATE",
		"http://[::1]/hook":           "OWED_WEBHOOKS_ALLOW_PRIVATE",
		"http://169.254.169.254/":     "OWED_WEBHOOKS_ALLOW_PRIVATE",
		"http://localhost/hook":       "OWED_WEBHOOKS_ALLOW_PRIVATE",
		"http://inside.example/hook":  "10.0.0.8",
		"http://nowhere.example/hook": "could not be resolved",
		"http://nat64.example/hook":   "64:ff9b::7f00:1",
		"http://docs.example/hook":    "203.0.113.7",
		"https://hooks.example/" + strings.Repeat("a", webhooks.MaxURLLength): "at most",
	}
	for in, want := range bad {
		_, err := webhooks.CheckURL(context.Background(), in, false, r)
		var ue *webhooks.URLError
		if !errors.As(err, &ue) || !strings.Contains(ue.Msg, want) {
			t.Errorf("CheckURL(%q) = %v, want a URLError saying %q", in, err, want)
		}
	}
	// Allowed, private addresses pass without a lookup; the scheme is still checked.
	for _, in := range []string{"http://127.0.0.1:8080/hook", "http://localhost/hook", "http://nowhere.example/"} {
		if _, err := webhooks.CheckURL(context.Background(), in, true, resolver{}); err != nil {
			t.Errorf("CheckURL(%q, allowPrivate) = %v", in, err)
		}
	}
	if _, err := webhooks.CheckURL(context.Background(), "file:///etc/passwd", true, r); err == nil {
		t.Error("a file URL passed")
	}
}

// issueAddresses are the webhook hosts issue 12 found accepted (row 2): NAT64 and 6to4 forms of
// loopback, an IPv4-compatible one, "this network", benchmarking, reserved, broadcast, and
// IPv6 site-local.
var issueAddresses = []string{"[64:ff9b::7f00:1]", "[2002:7f00:1::1]", "[::7f00:1]", "0.1.2.3", "198.18.0.1", "240.0.0.1",
	"255.255.255.255", "[fec0::1]"}

// TestCheckURLRefusesEveryNonPublicForm: each of them is refused when subscribed, named or
// written literally, and allowed with allowPrivate.
func TestCheckURLRefusesEveryNonPublicForm(t *testing.T) {
	for _, host := range issueAddresses {
		in := "http://" + host + ":8080/hook"
		_, err := webhooks.CheckURL(context.Background(), in, false, resolver{})
		var ue *webhooks.URLError
		if !errors.As(err, &ue) || !strings.Contains(ue.Msg, "not a public address") {
			t.Errorf("CheckURL(%q) = %v, want a refusal", in, err)
		}
		r := resolver{"hooks.example": {strings.Trim(host, "[]")}}
		if _, err := webhooks.CheckURL(context.Background(), "https://hooks.example/x", false, r); !errors.As(err, &ue) {
			t.Errorf("a name resolving to %s: %v, want a refusal", host, err)
		}
		if _, err := webhooks.CheckURL(context.Background(), in, true, resolver{}); err != nil {
			t.Errorf("CheckURL(%q, allowPrivate) = %v", in, err)
		}
	}
}
