package webhooks_test

import (
	"regexp"
	"testing"

	"github.com/owed/owed/webhooks"
)

func TestPayloadIsTheSchemesEnvelope(t *testing.T) {
	body, err := webhooks.Payload("song.scored", "2026-11-30T09:00:00.000Z", map[string]int{"songId": 7})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"song.scored","timestamp":"2026-11-30T09:00:00.000Z","data":{"songId":7}}`; string(body) != want {
		t.Errorf("payload = %s, want %s", body, want)
	}
	if _, err := webhooks.Payload("x", "t", func() {}); err == nil {
		t.Error("data that cannot be JSON made a payload")
	}
}

func TestNewSecretAndMessageID(t *testing.T) {
	a, b := webhooks.NewSecret(), webhooks.NewSecret()
	if a == b {
		t.Fatal("two secrets alike")
	}
	if key, err := webhooks.Key(a); err != nil || len(key) != 24 {
		t.Errorf("Key(NewSecret()) = %d bytes, %v; want 24", len(key), err)
	}
	id := webhooks.NewMessageID()
	if !regexp.MustCompile(`^msg_[a-z2-7]{24}$`).MatchString(id) || id == webhooks.NewMessageID() {
		t.Errorf("message id %q", id)
	}
}
