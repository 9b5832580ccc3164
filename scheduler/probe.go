package scheduler

import (
	"context"
	"errors"
	"time"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
)

// ManualProbeGap is the least time between two test calls an admin asks for, across replicas.
const ManualProbeGap = 5 * time.Second

// probeSubject is the fixed, harmless subject of an admin's test call.
var probeSubject = modelclient.ScreenRequest{Kind: string(models.KindPitch),
	Subject: modelclient.Subject{Text: "owed model probe: a harmless test message; please allow it."}}

// ProbeResult is what an admin's test call found.
type ProbeResult struct {
	Answered   bool
	Why        string // "" when answered
	Status     int    // the HTTP status, 0 when none came
	Error      string // the failure in words
	UpstreamMs int64
	Closed     bool // the answer closed the breaker
}

// TooSoonError refuses a test call asked for within ManualProbeGap of the last one.
type TooSoonError struct{ Wait time.Duration }

func (e *TooSoonError) Error() string { return "a model probe was made less than 5 s ago" }

// ErrNoModel refuses a test call when no model is configured.
var ErrNoModel = errors.New("no model configured")

// ProbeModel makes one uncharged test call to the model for an admin, at most one every
// ManualProbeGap across replicas. Any answer closes an open breaker and makes the jobs it put
// off due; a failure is kept as the breaker's last error. record runs in the same transaction.
func (c *Content) ProbeModel(ctx context.Context, record func(tx *models.Store, r ProbeResult) error) (ProbeResult, error) {
	if c.model == nil || c.model.Unconfigured() != "" {
		return ProbeResult{}, ErrNoModel
	}
	ok, wait, err := c.store.TakeManualProbe(ctx, ManualProbeGap)
	if err != nil {
		return ProbeResult{}, err
	}
	if !ok {
		return ProbeResult{}, &TooSoonError{Wait: wait}
	}
	reply := c.model.Screen(ctx, probeSubject)
	r := ProbeResult{Answered: reply.Why == "" || !failure(reply), Why: string(reply.Why), Status: reply.Status, Error: reply.Error,
		UpstreamMs: reply.UpstreamMs}
	if r.Answered {
		r.Why, r.Error = "", ""
	}
	err = c.store.WithTx(context.WithoutCancel(ctx), func(tx *models.Store) error {
		if r.Answered {
			_, closed, err := tx.ManualProbeAnswered(ctx)
			if err != nil {
				return err
			}
			r.Closed = closed
		} else if err := tx.ManualProbeFailed(ctx, errorText(reply.Error)); err != nil {
			return err
		}
		if record != nil {
			return record(tx, r)
		}
		return nil
	})
	c.breaker.forget()
	if err != nil {
		return r, err
	}
	if r.Closed {
		c.log.Info("model breaker closed: an admin's test call got an answer")
		c.Wake() // the backlog drains now
	}
	return r, nil
}

// Deferral is when the jobs the breaker puts off are asked again (nil while it is closed).
func (c *Content) Deferral(ctx context.Context) (*time.Time, error) {
	row, err := c.breaker.state(ctx)
	if err != nil {
		return nil, err
	}
	return row.DeferredUntil(), nil
}

// ReleaseWalk ends the walk lock for an admin, so the queue goes on at once, and answers the
// chats whose walk held it; record runs in the same transaction.
func (b *Backfill) ReleaseWalk(ctx context.Context, record func(tx *models.Store, chats []string) error) ([]string, error) {
	var chats []string
	err := b.store.WithTx(ctx, func(tx *models.Store) error {
		var err error
		if chats, err = tx.ReleaseWalk(ctx, b.cfg.WalkIdle); err != nil {
			return err
		}
		if record != nil {
			return record(tx, chats)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(chats) > 0 {
		b.log.Info("walk lock released by an admin", "chats", chats)
		b.wake()
	}
	return chats, nil
}
