package api_test

import (
	"net/http"
	"testing"

	"github.com/owed/owed/app"
	"github.com/owed/owed/owedtest"
)

func TestWritesAreRateLimitedPerToken(t *testing.T) {
	t.Parallel()
	env := owedtest.NewEnv(t, "", func(c *app.Config) { c.WriteRate, c.WriteBurst = 0.5, 3 })
	_, ann := env.User("ann", "author")
	_, bob := env.User("bob", "author")
	pitch := map[string]string{"body": "a pitch"}
	for i := range 3 {
		if r := env.Do(http.MethodPost, "/api/listeners/pitches", ann, pitch); r.Status != http.StatusCreated {
			t.Fatalf("write %d within the burst: %d %s", i, r.Status, r.Body)
		}
	}
	r := env.Do(http.MethodPost, "/api/listeners/pitches", ann, pitch)
	if r.Status != http.StatusTooManyRequests || r.ErrorCode() != "rate_limited" || r.Header.Get("Retry-After") != "2" {
		t.Fatalf("write past the burst: %d %q Retry-After=%q %s", r.Status, r.ErrorCode(), r.Header.Get("Retry-After"), r.Body)
	}
	if r := env.Do(http.MethodGet, "/api/listeners/mine", ann, nil); r.Status != http.StatusOK {
		t.Fatalf("reads are not limited: %d", r.Status)
	}
	if r := env.Do(http.MethodPost, "/api/listeners/pitches", bob, pitch); r.Status != http.StatusCreated {
		t.Fatalf("another token has its own budget of writes: %d %s", r.Status, r.Body)
	}
	var mine struct{ Items []any }
	env.Do(http.MethodGet, "/api/listeners/mine", ann, nil).Decode(t, &mine)
	if len(mine.Items) != 3 {
		t.Fatalf("the refused write wrote something: %d items, want 3", len(mine.Items))
	}
}
