package models

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Audit actions: what an operator did, to Target ("job:12", "user:3", "holds", "webhook:2" …).
const (
	AuditHolds         = "holds.set"
	AuditVerdict       = "verdict.decide"
	AuditOverturn      = "verdict.overturn"
	AuditRetry         = "job.retry"
	AuditRetryBulk     = "jobs.retry"
	AuditTokenRotate   = "user.token.rotate"
	AuditUserDisable   = "user.disable"
	AuditUserEnable    = "user.enable"
	AuditUserCreate    = "user.create"
	AuditBudget        = "user.budget"
	AuditWebhookCreate = "webhook.create"
	AuditWebhookUpdate = "webhook.update"
	AuditWebhookDelete = "webhook.delete"
	AuditBackfillStart = "backfill.start"
	AuditBackfillPause = "backfill.pause"
	AuditBackfillSet   = "backfill.settings"
	AuditWalkRelease   = "backfill.walk.release"
	AuditProbe         = "model.probe"
	AuditAppealDecide  = "appeal.decide"
	AuditWebhookSecret = "webhook.secret.rotate"
	AuditReviewClaim   = "review.claim"
	AuditReviewRelease = "review.release"
	// The anchor set of drift runs.
	AuditAnchorAdd    = "anchor.add"
	AuditAnchorDelete = "anchor.delete"
	// The candidate made live, and the configured model again (docs/shadow.md).
	AuditModelPromote  = "model.promote"
	AuditModelRollback = "model.rollback"
)

// AuditEntry is one operator action: who, when, what, on what, and Before and After (JSON).
type AuditEntry struct {
	ID        int64
	At        time.Time
	AdminID   *int64
	AdminName string
	Action    string
	Target    string
	Before    json.RawMessage
	After     json.RawMessage
}

// AuditBy is an entry's author: the admin's id and name (a nil user: the system).
func AuditBy(u *User) (id *int64, name string) {
	if u == nil {
		return nil, "system"
	}
	uid := u.ID
	return &uid, u.Name
}

// Audit records one operator action (in WithTx's transaction there); before and after as JSON.
func (s *Store) Audit(ctx context.Context, e AuditEntry, before, after any) error {
	if e.At.IsZero() {
		e.At = fromMillis(s.nowMs())
	}
	var b, a *string
	for _, p := range []struct {
		v   any
		raw json.RawMessage
		dst **string
	}{{before, e.Before, &b}, {after, e.After, &a}} {
		raw := p.raw
		if raw == nil && p.v != nil {
			var err error
			if raw, err = json.Marshal(p.v); err != nil {
				return fmt.Errorf("audit %s: %w", e.Action, err)
			}
		}
		if raw != nil && string(raw) != "null" {
			txt := string(raw)
			*p.dst = &txt
		}
	}
	_, err := s.exec(ctx, `INSERT INTO audit (at, admin_id, admin_name, action, target, before, after) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		e.At.UnixMilli(), e.AdminID, e.AdminName, e.Action, e.Target, b, a)
	return wrap(err, "audit %s", e.Action)
}

// AuditFilter selects audit entries: each field set narrows the list.
type AuditFilter struct {
	Action  string
	AdminID int64
	Target  string    // exact target ("job:12")
	Since   time.Time // at or after
	Until   time.Time // before
}

// ListAudit pages through the audit trail newest first, before the id beforeID (0: from the newest).
func (s *Store) ListAudit(ctx context.Context, f AuditFilter, beforeID int64, limit int) ([]AuditEntry, error) {
	q := `SELECT id, at, admin_id, admin_name, action, target, before, after FROM audit WHERE 1 = 1`
	var args []any
	add := func(cond string, a ...any) { q += ` AND ` + cond; args = append(args, a...) }
	if f.Action != "" {
		add("action = ?", f.Action)
	}
	if f.AdminID != 0 {
		add("admin_id = ?", f.AdminID)
	}
	if f.Target != "" {
		add("target = ?", f.Target)
	}
	if !f.Since.IsZero() {
		add("at >= ?", f.Since.UnixMilli())
	}
	if !f.Until.IsZero() {
		add("at < ?", f.Until.UnixMilli())
	}
	if beforeID > 0 {
		add("id < ?", beforeID)
	}
	q += ` ORDER BY id DESC LIMIT ` + strconv.Itoa(max(limit, 0))
	var rows []struct {
		ID        int64   `gorm:"column:id"`
		At        int64   `gorm:"column:at"`
		AdminID   *int64  `gorm:"column:admin_id"`
		AdminName string  `gorm:"column:admin_name"`
		Action    string  `gorm:"column:action"`
		Target    string  `gorm:"column:target"`
		Before    *string `gorm:"column:before"`
		After     *string `gorm:"column:after"`
	}
	if err := s.scan(ctx, s.read, &rows, q, args...); err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	out := make([]AuditEntry, 0, len(rows))
	for _, r := range rows {
		e := AuditEntry{ID: r.ID, At: fromMillis(r.At), AdminID: r.AdminID, AdminName: r.AdminName, Action: r.Action, Target: r.Target}
		if r.Before != nil {
			e.Before = json.RawMessage(*r.Before)
		}
		if r.After != nil {
			e.After = json.RawMessage(*r.After)
		}
		out = append(out, e)
	}
	return out, nil
}

// PruneAudit deletes audit entries older than keep (0 keeps them all), in batches of batch rows.
func (s *Store) PruneAudit(ctx context.Context, now time.Time, keep time.Duration, batch int) (int64, error) {
	if keep <= 0 {
		return 0, nil
	}
	if batch <= 0 {
		batch = PruneBatch
	}
	cutoff := now.Add(-keep).UnixMilli()
	return pruneBatches(ctx, batch, "audit", func() (int64, error) {
		return s.exec(ctx, `DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE at < ? ORDER BY at, id LIMIT ?)`, cutoff, batch)
	})
}
