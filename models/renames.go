package models

import (
	"context"
	"log/slog"
	"slices"
)

// renamesVersion is the migration that renamed users whose names differed only in case.
const renamesVersion = 17

// logRenames logs which users that migration renamed, when this start applied it.
func (s *Store) logRenames(ctx context.Context, applied []int, log *slog.Logger) {
	if log == nil || !slices.Contains(applied, renamesVersion) {
		return
	}
	var rows []struct {
		UserID  int64  `gorm:"column:user_id"`
		OldName string `gorm:"column:old_name"`
		NewName string `gorm:"column:new_name"`
	}
	if err := s.scan(ctx, s.db, &rows, `SELECT user_id, old_name, new_name FROM user_renames ORDER BY user_id`); err != nil {
		log.Warn("migration 0017: could not read the users it renamed", "err", err)
		return
	}
	for _, r := range rows {
		log.Warn("migration 0017 renamed a user whose name another user had in another case: names are now unique regardless of case",
			"userId", r.UserID, "was", r.OldName, "now", r.NewName)
	}
}
