package models

import (
	"context"
	"fmt"
	"time"
)

// ReleaseWalk ends the walk lock the active scrapes hold (their newest push plus idle) at once:
// their last push is moved back to idle ago, so the lock has lapsed; a push from the bot takes
// it again. It answers the chats whose walk held it (none: nothing to release).
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
	if err != nil {
		return nil, fmt.Errorf("release the walk lock: %w", err)
	}
	return chats, nil
}
