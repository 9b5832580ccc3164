package models

import (
	"context"
	"time"
)

// ReleaseWalk lapses the active scrapes' walk lock at once (their last push moved back idle ago)
// and answers the chats whose walk held it.
func (s *Store) ReleaseWalk(ctx context.Context, idle time.Duration) ([]string, error) {
	now := s.nowMs()
	lapsed := now - idle.Milliseconds()
	var chats []string
	err := s.WithTx(ctx, func(tx *Store) error {
		if err := tx.scan(ctx, tx.db, &chats, `SELECT chat_id FROM scrapes WHERE state = 'active' AND pushed_at > ? ORDER BY id`, lapsed); err != nil {
			return err
		}
		_, err := tx.exec(ctx, `UPDATE scrapes SET pushed_at = ? WHERE state = 'active' AND pushed_at > ?`, lapsed, lapsed)
		return err
	})
	return wrapped(chats, err, "release the walk lock")
}
