package webhooks

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"strings"
)

// Payload is a delivery's body as the Standard Webhooks scheme shapes it: {"type": event,
// "timestamp": timestamp, "data": data}. The store calls it as it owes the deliveries, in the
// transaction that writes the result they report; timestamp is the event's time in the API's
// format (models.TimeFormat).
func Payload(event, timestamp string, data any) ([]byte, error) {
	return json.Marshal(struct {
		Type      string `json:"type"`
		Timestamp string `json:"timestamp"`
		Data      any    `json:"data"`
	}{event, timestamp, data})
}

// NewMessageID makes a message id (the webhook-id header): "msg_" and 24 random base32
// characters. One event gets one id, shared by its deliveries to every subscription, so a
// receiver subscribed twice can tell a repeat.
func NewMessageID() string {
	b := make([]byte, 15)
	rand.Read(b)
	return "msg_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// NewSecret makes a fresh signing secret: SecretPrefix and the base64 of 24 random bytes
// (Key reads it back).
func NewSecret() string {
	b := make([]byte, 24)
	rand.Read(b)
	return SecretPrefix + base64.StdEncoding.EncodeToString(b)
}
