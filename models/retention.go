package models

import (
	"context"
	"fmt"
	"time"
)

// Retention is how long settled history is kept; owed work is never pruned.
type Retention struct {
	Events     time.Duration // attempt events, by when they happened
	Deliveries time.Duration // delivered or cancelled webhook deliveries and their attempts, by when they were made
	// Idempotency is OWED_IDEMPOTENCY_TTL: kept answers of Idempotency-Keys, by when first asked.
	Idempotency time.Duration
	// Done is how long settled jobs are listed (ListDoneJobs); Events prunes them.
	Done time.Duration
}

// PruneBatch is how many rows one pruning statement deletes, holding SQLite's writer for milliseconds.
const PruneBatch = 500

// Pruned counts the rows one Prune removed, and the age of the oldest row each table kept.
type Pruned struct {
	Events, Deliveries, Attempts int64
	IdempotencyKeys              int64
	// OldestEvent and OldestDelivery are the oldest rows kept (zero when none is left).
	OldestEvent, OldestDelivery time.Time
}

// Prune deletes, as of now, events older than r.Events and delivered or cancelled deliveries
// older than r.Deliveries (a zero duration keeps that table whole), in batches of batch rows
// (PruneBatch if 0 or less) each its own transaction; a cancelled ctx stops it between batches.
func (s *Store) Prune(ctx context.Context, now time.Time, r Retention, batch int) (Pruned, error) {
	var p Pruned
	if batch <= 0 {
		batch = PruneBatch
	}
	var err error
	if r.Events > 0 {
		cutoff := now.Add(-r.Events).UnixMilli()
		p.Events, err = pruneBatches(ctx, batch, "events", func() (int64, error) {
			return s.exec(ctx, `DELETE FROM events WHERE id IN
				(SELECT id FROM events WHERE at < ? ORDER BY at, id LIMIT ?)`, cutoff, batch)
		})
		if err != nil {
			return p, err
		}
	}
	if r.Deliveries > 0 {
		cutoff := now.Add(-r.Deliveries).UnixMilli()
		p.Deliveries, err = pruneBatches(ctx, batch, "webhook deliveries", func() (int64, error) {
			var n, attempts int64
			err := s.WithTx(ctx, func(tx *Store) error {
				// Both statements take the same oldest settled ids.
				pick := `SELECT id FROM webhook_deliveries WHERE status <> 'pending' AND created_at < ?
					AND COALESCE(delivered_at, created_at) < ? ORDER BY created_at, id LIMIT ?`
				var err error
				attempts, err = tx.exec(ctx, `DELETE FROM webhook_attempts WHERE delivery_id IN (`+pick+`)`, cutoff, cutoff, batch)
				if err != nil {
					return err
				}
				n, err = tx.exec(ctx, `DELETE FROM webhook_deliveries WHERE id IN (`+pick+`)`, cutoff, cutoff, batch)
				return err
			})
			if err == nil {
				p.Attempts += attempts // counted once its transaction committed (WithTx may try it again)
			}
			return n, err
		})
		if err != nil {
			return p, err
		}
	}
	if r.Idempotency > 0 {
		cutoff := now.Add(-r.Idempotency).UnixMilli()
		p.IdempotencyKeys, err = pruneBatches(ctx, batch, "idempotency keys", func() (int64, error) {
			return s.pruneIdempotency(ctx, cutoff, batch)
		})
		if err != nil {
			return p, err
		}
	}
	var oldest struct{ Event, Delivery *int64 }
	if err := s.scan(ctx, s.read, &oldest, `SELECT (SELECT MIN(at) FROM events) AS event,
		(SELECT MIN(created_at) FROM webhook_deliveries WHERE status <> 'pending') AS delivery`); err != nil {
		return p, fmt.Errorf("prune: oldest rows: %w", err)
	}
	if oldest.Event != nil {
		p.OldestEvent = time.UnixMilli(*oldest.Event).UTC()
	}
	if oldest.Delivery != nil {
		p.OldestDelivery = time.UnixMilli(*oldest.Delivery).UTC()
	}
	return p, nil
}

// pruneBatches runs one (deleting up to batch rows of what) until it deletes fewer or ctx ends.
func pruneBatches(ctx context.Context, batch int, what string, one func() (int64, error)) (int64, error) {
	var total int64
	for ctx.Err() == nil {
		n, err := one()
		total += n
		if err != nil {
			return total, fmt.Errorf("prune %s: %w", what, err)
		}
		if n < int64(batch) {
			break
		}
	}
	return total, ctx.Err()
}

// TakeMaintenance takes or renews the named chore's lease for owner until now+ttl; true: owner holds it.
func (s *Store) TakeMaintenance(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	n, err := s.exec(ctx, `UPDATE maintenance_leases SET owner = ?, lease_until = ?
		WHERE name = ? AND (owner = ? OR owner IS NULL OR lease_until < ?)`,
		owner, now.Add(ttl).UnixMilli(), name, owner, now.UnixMilli())
	return wrapped(n == 1, err, "take maintenance lease %s", name)
}
