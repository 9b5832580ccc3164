// Package webhooks is what owed's webhooks are, apart from their rows: a delivery's body
// (Payload) and message id (NewMessageID), signing secrets (NewSecret, Key) and signatures by
// the Standard Webhooks scheme (Sign, SignAll; Verify for receivers and tests), and the checks
// of a subscription's URL (CheckURL). The store owes a delivery in the transaction that writes
// the result it reports (models.EnqueueWebhook, which builds its body here), and the
// scheduler's deliveries runner claims it with a lease, signs it, POSTs it and retries it on
// the scheme's schedule until the receiver answers 2xx or the subscription is disabled.
package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts every signing secret; the base64 key follows it.
const SecretPrefix = "whsec_"

// ErrBadSecret is returned for a secret that is not "whsec_" and base64.
var ErrBadSecret = errors.New("webhooks: the secret is not whsec_ followed by base64")

// Key decodes a "whsec_…" secret into the HMAC key (the base64 after the prefix).
func Key(secret string) ([]byte, error) {
	raw, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok || raw == "" {
		return nil, ErrBadSecret
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return nil, ErrBadSecret
	}
	return key, nil
}

// Sign returns the webhook-signature header value of a message by the Standard Webhooks
// scheme: "v1," and the base64 HMAC-SHA256, keyed by the secret's key, of
// msgID + "." + timestamp (unix seconds) + "." + body.
func Sign(secret, msgID string, timestamp int64, body []byte) (string, error) {
	key, err := Key(secret)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msgID))
	mac.Write([]byte{'.'})
	mac.Write([]byte(strconv.FormatInt(timestamp, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// SignAll returns the webhook-signature header value of a message signed with each secret:
// the signatures separated by spaces, as the Standard Webhooks scheme allows, so a receiver
// that knows either secret verifies the message (during a rotation's overlap).
func SignAll(secrets []string, msgID string, timestamp int64, body []byte) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for _, secret := range secrets {
		sig, err := Sign(secret, msgID, timestamp, body)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}

// DefaultSecretOverlap is how long, after a rotation, deliveries are signed with the old
// secret too (OWED_WEBHOOK_SECRET_OVERLAP).
const DefaultSecretOverlap = 24 * time.Hour
