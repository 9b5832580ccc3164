package models

import (
	"context"
	"time"
)

// BudgetDay is the UTC day a time is charged to.
func BudgetDay(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// BudgetReset is the next 00:00 UTC after t, when a day's budget starts again.
func BudgetReset(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, 1)
}

// Charge spends n model calls of the user's budget for the day of now, atomically and only if
// the day's spend stays within the user's limit (their own, else defaultLimit): a charge the
// rest of the budget cannot cover is refused whole (ok false) and spends nothing. Concurrent
// charges never take the spend above the limit.
func (s *Store) Charge(ctx context.Context, userID int64, n, defaultLimit int64, now time.Time) (spent int64, ok bool, err error) {
	var rows []int64
	limit := `COALESCE((SELECT daily_limit FROM users WHERE id = ?), ?)`
	err = s.db.WithContext(ctx).Raw(`INSERT INTO budgets (user_id, day, spent) SELECT ?, ?, ? WHERE ? <= `+limit+`
		ON CONFLICT (user_id, day) DO UPDATE SET spent = budgets.spent + excluded.spent
		WHERE budgets.spent + excluded.spent <= `+limit+`
		RETURNING spent`, userID, BudgetDay(now), n, n, userID, defaultLimit, userID, defaultLimit).Scan(&rows).Error
	if err != nil || len(rows) == 0 {
		return 0, false, err
	}
	return rows[0], true, nil
}

// Spent is what the user has spent on the day of now.
func (s *Store) Spent(ctx context.Context, userID int64, now time.Time) (int64, error) {
	var rows []int64
	err := s.read.WithContext(ctx).Raw(`SELECT spent FROM budgets WHERE user_id = ? AND day = ?`, userID, BudgetDay(now)).Scan(&rows).Error
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	return rows[0], nil
}

// BudgetRow is one user's budget today.
type BudgetRow struct {
	UserID     int64  `gorm:"column:user_id"`
	Name       string `gorm:"column:name"`
	Role       string `gorm:"column:role"`
	DailyLimit *int64 `gorm:"column:daily_limit"`
	Spent      int64  `gorm:"column:spent"`
}

// Budgets lists authors (and anyone who spent today) with today's spend, by user id after
// afterID.
func (s *Store) Budgets(ctx context.Context, now time.Time, afterID int64, limit int) ([]BudgetRow, error) {
	var rows []BudgetRow
	err := s.read.WithContext(ctx).Raw(`SELECT u.id AS user_id, u.name, u.role, u.daily_limit, COALESCE(b.spent, 0) AS spent
		FROM users u LEFT JOIN budgets b ON b.user_id = u.id AND b.day = ?
		WHERE (u.role = 'author' OR b.spent IS NOT NULL) AND u.id > ?
		ORDER BY u.id LIMIT ?`, BudgetDay(now), afterID, limit).Scan(&rows).Error
	return rows, err
}

// PruneBudgets forgets days before the day of now: only today's spend is ever read.
func (s *Store) PruneBudgets(ctx context.Context, now time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Exec(`DELETE FROM budgets WHERE day < ?`, BudgetDay(now))
	return res.RowsAffected, res.Error
}
