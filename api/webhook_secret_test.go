package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// verifies reports whether the official Standard Webhooks library, given secret, accepts a
// delivery (the timestamp is the fake clock's, days from the real one, so it is not checked).
func verifies(t *testing.T, secret string, req hookRequest) bool {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatalf("the library refuses the secret %q: %v", secret, err)
	}
	return wh.VerifyIgnoringTimestamp(req.body, req.header) == nil
}

// TestWebhookSecretRotation: POST /api/admin/webhooks/{id}/secret answers a new secret once
// (no-store); for OWED_WEBHOOK_SECRET_OVERLAP each delivery carries two signatures,
// space-separated, so the official library verifies it with the old secret and with the new
// one; after the overlap only the new secret verifies. Only admins may rotate.
func TestWebhookSecretRotation(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, allowPrivate, func(c *app.Config) { c.WebhookSecretOverlap = 2 * time.Hour })
		rcv := newHookReceiver(t)
		id, old := subscribe(w, rcv.URL+"/h", "item.screened")
		path := fmt.Sprintf("/api/admin/webhooks/%d/secret", id)

		for _, as := range []role{asAnon, asAuthor, asBot} {
			r := w.do(http.MethodPost, path, as, nil)
			if r.Status != http.StatusUnauthorized && r.Status != http.StatusForbidden {
				t.Errorf("%s rotated: %d %s", as, r.Status, r.Body)
			}
		}
		checkError(t, w.do(http.MethodPost, "/api/admin/webhooks/987654/secret", asAdmin, nil), http.StatusNotFound, "not_found", "")

		r := w.do(http.MethodPost, path, asAdmin, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("rotate: %d %s", r.Status, r.Body)
		}
		if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control %q, want no-store", cc)
		}
		got := r.JSON()
		fresh, _ := got["secret"].(string)
		if !secretShape.MatchString(fresh) || fresh == old {
			t.Fatalf("new secret %q (old %q)", fresh, old)
		}
		if until := isTime(t, "previousSecretUntil", got["previousSecretUntil"]); !until.Equal(owedtest.Start.Add(2 * time.Hour)) {
			t.Errorf("previousSecretUntil %v, want the clock plus the overlap", until)
		}
		if num(obj(got["webhook"])["id"]) != id {
			t.Errorf("webhook %v", got["webhook"])
		}
		for _, p := range []string{"/api/admin/webhooks", fmt.Sprintf("/api/admin/webhooks/%d/deliveries", id)} {
			if strings.Contains(string(w.do(http.MethodGet, p, asAdmin, nil).Body), fresh) {
				t.Errorf("%s shows the new secret again", p)
			}
		}

		// Within the overlap: both signatures, either secret verifies.
		w.pitch(asAuthor, models.VerdictAllow)
		if n := deliver(w); n != 1 {
			t.Fatalf("delivered %d, want 1", n)
		}
		req := rcv.requests()[0]
		if sigs := strings.Fields(req.header.Get("webhook-signature")); len(sigs) != 2 || !strings.HasPrefix(sigs[0], "v1,") || !strings.HasPrefix(sigs[1], "v1,") {
			t.Fatalf("webhook-signature %q: want two v1 signatures", req.header.Get("webhook-signature"))
		}
		if !verifies(t, old, req) || !verifies(t, fresh, req) {
			t.Errorf("within the overlap: old secret verifies %v, new %v; want both", verifies(t, old, req), verifies(t, fresh, req))
		}
		tampered := hookRequest{req.path, req.header, append([]byte(nil), req.body...)}
		tampered.body[len(tampered.body)-2] ^= 1
		if verifies(t, old, tampered) || verifies(t, fresh, tampered) {
			t.Error("a changed body verified")
		}

		// After the overlap: the new secret's signature alone.
		w.env.Clock.Advance(2*time.Hour + time.Second)
		w.pitch(asAuthor, models.VerdictAllow)
		if n := deliver(w); n != 1 {
			t.Fatalf("delivered %d after the overlap, want 1", n)
		}
		req = rcv.requests()[1]
		if sigs := strings.Fields(req.header.Get("webhook-signature")); len(sigs) != 1 {
			t.Errorf("after the overlap webhook-signature %q: want one signature", req.header.Get("webhook-signature"))
		}
		if verifies(t, old, req) || !verifies(t, fresh, req) {
			t.Errorf("after the overlap: old secret verifies %v, new %v; want only the new", verifies(t, old, req), verifies(t, fresh, req))
		}
	})
}
