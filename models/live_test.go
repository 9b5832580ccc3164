package models_test

import (
	"errors"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// A stream ticket is good once, until its end and not at it: taken at its last millisecond it
// gives back its user and credential; taken again, or at its end, it is not found.
func TestStreamTicketIsGoodOnceBeforeItsEnd(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		ann := f.User("ann")
		cred := models.Credential{Kind: models.CredToken, Hash: "hash-of-ann"}
		for _, c := range []struct {
			after time.Duration
			good  bool
		}{{time.Minute - time.Millisecond, true}, {time.Minute, false}} {
			ticket, end, err := f.store.CreateStreamTicket(f.ctx, ann, cred, time.Minute)
			if err != nil || !end.Equal(f.clk.Now().Add(time.Minute)) {
				t.Fatalf("create: end %v, err %v", end, err)
			}
			f.clk.Advance(c.after)
			user, got, err := f.store.TakeStreamTicket(f.ctx, ticket)
			if c.good && (err != nil || user != ann || got != cred) {
				t.Errorf("taken %v after: user %d, credential %+v, err %v; want ann's", c.after, user, got, err)
			}
			if !c.good && !errors.Is(err, models.ErrNotFound) {
				t.Errorf("taken at its end: user %d, err %v; want not found", user, err)
			}
			if _, _, err := f.store.TakeStreamTicket(f.ctx, ticket); !errors.Is(err, models.ErrNotFound) {
				t.Errorf("taken twice: err %v, want not found", err)
			}
		}
	})
}
