package models

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/owed/owed/clock"
)

// Backoff is how a call to the database is tried again: at most Tries tries in all (0: no
// bound) and for at most For after the first one began (0: no bound), pausing on a clock
// between tries: Pause after the first failed try, twice that after the next, and so on up to
// MaxPause (0: no bound); zero Pause tries again at once. With Jitter each pause is drawn
// between half and one and a half times its length, so that replicas cut off together do not
// come back together.
type Backoff struct {
	Tries    int
	For      time.Duration
	Pause    time.Duration
	MaxPause time.Duration
	Jitter   bool
}

// The store's policies: a transaction that certainly did not commit (WithTx), a repeatable
// statement (retryRepeatable: a pool whose connections were cut drops each dead one as it
// meets it, so it tries again at once), the statements that end a request's hold on its
// idempotency key (IdemSettle: each try may meet another connection the cut left dead), and
// asking after a COMMIT whose answer was lost (commitOutcome: for a few seconds, while the
// server may still be finishing it).
var (
	txBackoff     = Backoff{Tries: MaxTxTries, Pause: 25 * time.Millisecond, Jitter: true}
	askBackoff    = Backoff{Tries: 20, Pause: 100 * time.Millisecond, MaxPause: 100 * time.Millisecond}
	repeatBackoff = Backoff{Tries: MaxTxTries}
	settleBackoff = Backoff{Tries: 10, Pause: 20 * time.Millisecond, MaxPause: 200 * time.Millisecond}
)

// Do runs f until it succeeds, or says the error it returned is not worth another try, the
// tries or the time run out, or ctx ends; it returns f's last error. The pauses are waited on
// clk (the store's: Options.RetryClock).
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

// transient is FaultOf(err) == FaultTransient: the again of a call tried again while the
// database does not answer.
func transient(err error) bool { return FaultOf(err) == FaultTransient }
