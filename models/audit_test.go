package models_test

import (
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// The audit trail is pruned past its retention in batches; a retention of 0 keeps it all.
func TestPruneAuditKeepsAllWithoutARetention(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		now := f.clk.Now()
		for _, age := range []time.Duration{72 * time.Hour, 48 * time.Hour, 30 * time.Hour, time.Hour} {
			if err := f.store.Audit(f.ctx, models.AuditEntry{At: now.Add(-age), AdminName: "system", Action: models.AuditHolds, Target: "holds"}, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := f.store.PruneAudit(f.ctx, now, 0, 1); err != nil || n != 0 {
			t.Errorf("a retention of 0 pruned %d (err %v), want none", n, err)
		}
		if n, err := f.store.PruneAudit(f.ctx, now, 24*time.Hour, 2); err != nil || n != 3 {
			t.Errorf("a day's retention pruned %d (err %v), want the 3 older entries", n, err)
		}
		if n := f.Count(`SELECT COUNT(*) FROM audit`); n != 1 {
			t.Errorf("%d entries left, want the hour-old one", n)
		}
	})
}
