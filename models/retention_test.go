package models_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// TestPruneKeepsTheRetentionAndNeverOwedWork: 60 simulated days of events, webhook deliveries
// (delivered, cancelled and still pending, with attempts) and owed jobs; pruning at
// the end with a 30-day retention keeps exactly the last 30 days of history, every pending
// delivery and every owed job, however old, and deletes in batches.
func TestPruneKeepsTheRetentionAndNeverOwedWork(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		const days = 60
		day := 24 * time.Hour
		hook := f.InsertID(`INSERT INTO webhooks (url, events, secret, created_at) VALUES ('http://example.com/h', '*', 's', ?)`, f.NowMs())
		var pitches []int64
		for d := range days {
			at := f.clk.Now().Add(time.Duration(d) * day)
			ms := at.UnixMilli()
			for i := range 4 { // four events a day
				f.Exec(`INSERT INTO events (at, event, kind, item_id, user_id, outcome, attempt) VALUES (?, 'screen', 'pitch', ?, ?, 'allow', 1)`,
					ms+int64(i), d, ann)
			}
			// One delivered, one cancelled and one pending delivery a day, each with two attempts.
			for i, status := range []string{"delivered", "cancelled", "pending"} {
				var delivered any
				if status == "delivered" {
					delivered = ms + 1000
				}
				id := f.InsertID(`INSERT INTO webhook_deliveries (webhook_id, msg_id, event, payload, status, due_at, created_at, delivered_at)
					VALUES (?, ?, 'item.screened', '{}', ?, ?, ?, ?)`, hook, fmt.Sprintf("msg_%d_%d", d, i), status, ms, ms, delivered)
				for a := 1; a <= 2; a++ {
					f.Exec(`INSERT INTO webhook_attempts (delivery_id, attempt, at, status, latency_ms) VALUES (?, ?, ?, 500, 3)`, id, a, ms)
				}
			}
			// Owed work from every day: a pitch (its screen job made by the trigger) never screened.
			pitches = append(pitches, f.InsertID(`INSERT INTO pitches (user_id, body, created_at) VALUES (?, 'p', ?)`, ann, ms))
		}
		now := f.clk.Now().Add(days * day)
		count := func(q string, args ...any) int64 {
			t.Helper()
			var n int64
			if err := f.store.RawScan(f.ctx, &n, q, args...); err != nil {
				t.Fatal(err)
			}
			return n
		}
		jobsBefore := count(`SELECT COUNT(*) FROM content_jobs`)

		p, err := f.store.Prune(f.ctx, now, models.Retention{Events: 30 * day, Deliveries: 30 * day}, 7)
		if err != nil {
			t.Fatal(err)
		}
		cutoff := now.Add(-30 * day).UnixMilli()
		if p.Events != 30*4 || count(`SELECT COUNT(*) FROM events`) != 30*4 || count(`SELECT COUNT(*) FROM events WHERE at < ?`, cutoff) != 0 {
			t.Errorf("events: pruned %d, kept %d; want 120 pruned and the last 30 days' 120 kept", p.Events, count(`SELECT COUNT(*) FROM events`))
		}
		if p.Deliveries != 30*2 || p.Attempts != 30*2*2 {
			t.Errorf("pruned %d deliveries and %d attempts, want 60 and 120", p.Deliveries, p.Attempts)
		}
		if n := count(`SELECT COUNT(*) FROM webhook_deliveries WHERE status <> 'pending'`); n != 30*2 {
			t.Errorf("%d settled deliveries kept, want the last 30 days' 60", n)
		}
		if n := count(`SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'`); n != days {
			t.Errorf("%d pending deliveries left, want all %d: owed work is never pruned", n, days)
		}
		if n := count(`SELECT COUNT(*) FROM webhook_attempts a WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.id = a.delivery_id)`); n != 0 {
			t.Errorf("%d attempts of pruned deliveries left", n)
		}
		if n := count(`SELECT COUNT(*) FROM webhook_attempts`); n != (30*2+days)*2 {
			t.Errorf("%d attempts kept, want %d", n, (30*2+days)*2)
		}
		if n := count(`SELECT COUNT(*) FROM content_jobs`); n != jobsBefore || n != int64(len(pitches)) {
			t.Errorf("%d owed jobs after pruning, want all %d", n, jobsBefore)
		}
		if p.OldestEvent.UnixMilli() != cutoff || p.OldestDelivery.UnixMilli() != cutoff {
			t.Errorf("oldest kept: event %s, delivery %s", p.OldestEvent, p.OldestDelivery)
		}

		// Pruning again finds nothing; a zero retention keeps its table whole.
		if again, err := f.store.Prune(f.ctx, now, models.Retention{Events: 30 * day, Deliveries: 30 * day}, 0); err != nil ||
			again.Events+again.Deliveries+again.Attempts != 0 {
			t.Errorf("a second prune: %+v %v, want nothing", again, err)
		}
		if p, err := f.store.Prune(f.ctx, now.Add(100*day), models.Retention{}, 0); err != nil || p.Events != 0 || p.Deliveries != 0 {
			t.Errorf("zero retention pruned %+v %v", p, err)
		}
	})
}

// TestMaintenanceLeaseOneHolder: one replica holds a chore's lease and renews it; another
// takes it only once it has run out.
func TestMaintenanceLeaseOneHolder(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		now := f.clk.Now()
		take := func(owner string, at time.Time) bool {
			t.Helper()
			ok, err := f.store.TakeMaintenance(f.ctx, "prune", owner, at, 10*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !take("a", now) || take("b", now) || !take("a", now.Add(9*time.Minute)) {
			t.Fatal("a takes and renews the lease; b must not take it meanwhile")
		}
		if take("b", now.Add(18*time.Minute)) {
			t.Error("b took the lease a renewed 9 minutes after it began")
		}
		if !take("b", now.Add(20*time.Minute)) || take("a", now.Add(20*time.Minute)) {
			t.Error("b takes the lease once a's has run out, and then holds it")
		}
		if ok, err := f.store.TakeMaintenance(f.ctx, "nothing", "a", now, time.Minute); err != nil || ok {
			t.Errorf("an unknown chore: %v %v", ok, err)
		}
	})
}

// Kept Idempotency-Key answers go once older than their retention, newest kept; a zero
// retention keeps them all.
func TestPruneIdempotencyKeys(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		now := f.clk.Now()
		for i, age := range []time.Duration{3 * time.Hour, 2 * time.Hour, 30 * time.Minute} {
			f.Exec(`INSERT INTO idempotency_keys (user_id, idem_key, fingerprint, created_at, locked_until) VALUES (?, ?, 'fp', ?, 0)`,
				ann, fmt.Sprintf("k%d", i), now.Add(-age).UnixMilli())
		}
		keys := func() int64 {
			var n []int64
			if err := f.store.RawScan(f.ctx, &n, `SELECT COUNT(*) FROM idempotency_keys`); err != nil {
				t.Fatal(err)
			}
			return n[0]
		}
		if p, err := f.store.Prune(f.ctx, now, models.Retention{}, 0); err != nil || p.IdempotencyKeys != 0 || keys() != 3 {
			t.Fatalf("a zero retention pruned %d keys (%v), %d left; want all 3 kept", p.IdempotencyKeys, err, keys())
		}
		// The answer still tells the oldest rows kept.
		f.Exec(`INSERT INTO events (at, event, kind, item_id, user_id, outcome, attempt) VALUES (?, 'screen', 'pitch', 1, ?, 'allow', 1)`,
			now.Add(-time.Minute).UnixMilli(), ann)
		p, err := f.store.Prune(f.ctx, now, models.Retention{Idempotency: time.Hour}, 1)
		if err != nil || p.IdempotencyKeys != 2 || keys() != 1 {
			t.Errorf("an hour's retention pruned %d keys (%v), %d left; want the 2 older gone, 1 kept", p.IdempotencyKeys, err, keys())
		}
		if !p.OldestEvent.Equal(now.Add(-time.Minute).Truncate(time.Millisecond)) {
			t.Errorf("oldest event kept = %v, want %v", p.OldestEvent, now.Add(-time.Minute))
		}
	})
}
