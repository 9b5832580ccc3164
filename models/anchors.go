package models

import (
	"context"
	"fmt"
	"time"
)

// Anchor is an item of the frozen anchor set drift runs re-ask the live model about, with its
// expected verdict and/or art; one anchor per item.
type Anchor struct {
	ID        int64     `gorm:"column:id"`
	Kind      Kind      `gorm:"column:kind"`
	ItemID    int64     `gorm:"column:item_id"`
	Verdict   *Verdict  `gorm:"column:verdict"`
	Art       *float64  `gorm:"column:art"`
	CreatedAt time.Time `gorm:"column:created_at;serializer:unixms"`
}

const anchorColumns = `id, kind, item_id, verdict, art, created_at`

// AddAnchor adds an item to the anchor set with its expected verdict and/or art (checked by the
// caller); ErrConflict when it is an anchor already.
func (s *Store) AddAnchor(ctx context.Context, a Anchor) (Anchor, error) {
	a.CreatedAt = fromMillis(s.nowMs())
	ids, err := fetch[[]int64](ctx, s, s.db, `INSERT INTO anchors (kind, item_id, verdict, art, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (kind, item_id) DO NOTHING RETURNING id`, a.Kind, a.ItemID, a.Verdict, a.Art, a.CreatedAt.UnixMilli())
	if err != nil {
		return Anchor{}, fmt.Errorf("add anchor %s %d: %w", a.Kind, a.ItemID, err)
	}
	if len(ids) == 0 {
		return Anchor{}, ErrConflict
	}
	a.ID = ids[0]
	return a, nil
}

// Anchors lists the anchor set, oldest first.
func (s *Store) Anchors(ctx context.Context) ([]Anchor, error) {
	out, err := fetch[[]Anchor](ctx, s, s.read, `SELECT `+anchorColumns+` FROM anchors ORDER BY id`)
	return out, wrap(err, "list anchors")
}

// DeleteAnchor takes an anchor out of the set and answers what it was; ErrNotFound when none.
func (s *Store) DeleteAnchor(ctx context.Context, id int64) (Anchor, error) {
	return first[Anchor](ctx, s, s.db, "anchor", id, `DELETE FROM anchors WHERE id = ? RETURNING `+anchorColumns, id)
}
