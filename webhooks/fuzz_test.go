package webhooks

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/owed/owed/outbound"
)

// fixedResolver resolves every host name to one address.
type fixedResolver struct{ ip net.IP }

func (r fixedResolver) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) {
	return []net.IPAddr{{IP: r.ip}}, nil
}

// FuzzCheckURL feeds arbitrary subscription URLs to the check that guards deliveries against
// private addresses. When every host name resolves to a private address, an accepted URL must
// name a public address literally; when every name resolves to a public one, what is accepted
// is an absolute http(s) URL with a host, and checking it again accepts it unchanged.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://example.com/hook", "http://93.184.215.14:8080/x?y=1#frag", "https://[2606:2800:220:1::]/",
		"http://127.0.0.1/", "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://[fe80::1%25eth0]/",
		"http://169.254.169.254/latest/meta-data", "http://0.0.0.0/", "http://100.64.0.1/", "http://10.0.0.1/",
		"http://2130706433/", "http://0x7f.1/", "http://127.1/", "HTTP://EXAMPLE.COM", "ftp://example.com/",
		"http://user:pass@example.com/", "//example.com", "https://", "javascript:alert(1)", " http://example.com ",
		"http://[::]:80/", "http://224.0.0.1/", "http://example.com\x00.evil/",
		"http://[64:ff9b::7f00:1]/", "http://[2002:7f00:1::1]/", "http://[::7f00:1]/", "http://0.1.2.3/", "http://198.18.0.1/",
		"http://240.0.0.1/", "http://255.255.255.255/", "http://[fec0::1]/",
	} {
		f.Add(s)
	}
	ctx := context.Background()
	private := fixedResolver{net.ParseIP("10.1.2.3")}
	public := fixedResolver{net.ParseIP("93.184.215.14")}
	f.Fuzz(func(t *testing.T, raw string) {
		if out, err := CheckURL(ctx, raw, false, private); err == nil {
			u, perr := url.Parse(out)
			if perr != nil {
				t.Fatalf("CheckURL(%q) = %q, which does not parse: %v", raw, out, perr)
			}
			ip, ierr := netip.ParseAddr(u.Hostname())
			if ierr != nil || outbound.Check(ip) != nil {
				t.Fatalf("CheckURL(%q) = %q accepted a host that is not a public address literal", raw, out)
			}
		}
		out, err := CheckURL(ctx, raw, false, public)
		if err != nil {
			if _, ok := err.(*URLError); !ok {
				t.Fatalf("CheckURL(%q): %T %v, want a *URLError", raw, err, err)
			}
			return
		}
		u, perr := url.Parse(out)
		if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Fragment != "" {
			t.Fatalf("CheckURL(%q) = %q: not an absolute http(s) URL with a host and no fragment", raw, out)
		}
		if len(strings.TrimSpace(raw)) > MaxURLLength {
			t.Fatalf("CheckURL accepted %d characters", len(raw))
		}
		again, err := CheckURL(ctx, out, false, public)
		if err != nil || again != out {
			t.Fatalf("CheckURL(%q) = %q, but checking that again gives %q, %v", raw, out, again, err)
		}
	})
}
