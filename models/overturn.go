package models

import (
	"context"
	"fmt"
)

// OverturnScreen changes an item's verdict by hand to verdict, with ev (OutcomeOverturned): the
// old verdict is replaced as a verdict is recorded (triggers included) and item.screened owed
// again. was is the verdict it had; changed is false when the item is gone or already had verdict.
func (s *Store) OverturnScreen(ctx context.Context, kind Kind, itemID int64, verdict Verdict, ev Event) (was *Verdict, changed bool, err error) {
	if _, err := itemTable(kind); err != nil {
		return nil, false, fmt.Errorf("overturn: %w", err)
	}
	err = s.WithTx(ctx, func(tx *Store) error {
		old, err := fetch[*string](ctx, tx, tx.db, `DELETE FROM screens WHERE kind = ? AND item_id = ? RETURNING verdict`, kind, itemID)
		if err != nil || old == nil {
			return err
		}
		v := Verdict(*old)
		was = &v
		if v == verdict {
			return errSameVerdict
		}
		if kind == KindRevision && verdict == VerdictBlock {
			if _, err := tx.exec(ctx, `DELETE FROM content_jobs WHERE task = 'score' AND kind = 'revision' AND item_id = ?`, itemID); err != nil {
				return err
			}
		}
		ok, err := tx.RecordScreen(ctx, kind, itemID, verdict, 1, ev)
		if err != nil {
			return err
		}
		changed = ok
		if ok {
			tx.changedAll() // a song's listeners and the author alike
		}
		return nil
	})
	if err == errSameVerdict {
		return was, false, nil
	}
	return wrapped2(was, changed, err, "overturn the verdict of %s %d", kind, itemID)
}

var errSameVerdict = fmt.Errorf("the item already has this verdict")
