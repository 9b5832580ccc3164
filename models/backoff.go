package models

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/owed/owed/clock"
)

// Backoff is how a call to the database is tried again: at most Tries tries (0: no bound),
// for at most For (0: no bound), pausing Pause then doubling up to MaxPause (0: no bound); with
// Jitter each pause is drawn between half and one and a half its length.
type Backoff struct {
	Tries    int
	For      time.Duration
	Pause    time.Duration
	MaxPause time.Duration
	Jitter   bool
}

// The store's policies: a transaction that did not commit (WithTx), a repeatable statement
// (retryRepeatable), the end of an idempotency hold (IdemSettle), and asking after a COMMIT
// whose answer was lost (commitOutcome).
var (
	txBackoff     = Backoff{Tries: MaxTxTries, Pause: 25 * time.Millisecond, Jitter: true}
	askBackoff    = Backoff{Tries: 20, Pause: 100 * time.Millisecond, MaxPause: 100 * time.Millisecond}
	repeatBackoff = Backoff{Tries: MaxTxTries}
	settleBackoff = Backoff{Tries: 10, Pause: 20 * time.Millisecond, MaxPause: 200 * time.Millisecond}
)

// Do runs f until it succeeds or says not to try again, tries or time run out, or ctx ends.
func (b Backoff) Do(ctx context.Context, clk clock.Clock, f func() (again bool, err error)) error {
	start := clk.Now()
	pause := b.Pause
	for try := 1; ; try++ {
		again, err := f()
		if err == nil || !again || (b.Tries > 0 && try >= b.Tries) || ctx.Err() != nil {
			return err
		}
		wait := pause
		if b.Jitter && wait > 0 {
			wait = wait/2 + rand.N(wait)
		}
		if b.For > 0 {
			left := b.For - clk.Now().Sub(start)
			if left <= 0 {
				return err
			}
			wait = min(wait, left)
		}
		if wait > 0 && clock.Sleep(ctx, clk, wait) != nil {
			return err
		}
		if pause *= 2; b.MaxPause > 0 {
			pause = min(pause, b.MaxPause)
		}
	}
}

// transient reports whether err is FaultTransient.
func transient(err error) bool { return FaultOf(err) == FaultTransient }
