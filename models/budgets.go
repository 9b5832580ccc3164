package models

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// BudgetDay is the UTC day a time is charged to.
func BudgetDay(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// BudgetReset is the next 00:00 UTC after t, when a day's budget starts again.
func BudgetReset(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, 1)
}

// Charge spends n model calls of the user's budget for now's day only if the spend stays within
// their effective limit (ok false: nothing spent). Concurrent charges share one statement.
func (s *Store) Charge(ctx context.Context, userID int64, n int64, now time.Time) (spent int64, ok bool, err error) {
	call := chargeCall{userID: userID, day: BudgetDay(now), n: n}
	var out chargeOutcome
	if s.charges != nil {
		out, err = s.charges.do(ctx, call)
	} else {
		var outs []chargeOutcome
		if outs, err = s.chargeRows(ctx, []chargeCall{call}); err == nil {
			out = outs[0]
		}
	}
	if err != nil {
		return 0, false, fmt.Errorf("charge user %d: %w", userID, err)
	}
	if out.ok && n != 0 {
		s.changed(userID)
	}
	return out.spent, out.ok, nil
}

type chargeCall struct {
	userID int64
	day    string
	n      int64
}

type chargeOutcome struct {
	spent int64
	ok    bool
}

// chargeRows charges calls in one statement, each as it would have been alone: a user's calls
// as one sum, else one by one; users in id order so statements never deadlock.
func (s *Store) chargeRows(ctx context.Context, calls []chargeCall) ([]chargeOutcome, error) {
	type group struct {
		chargeCall       // the user's day, and n: the sum of their calls
		calls      []int // their places in calls, in order
		mixed      bool  // calls of other days: charged one by one
	}
	groups := map[int64]*group{}
	for i, c := range calls {
		g := groups[c.userID]
		if g == nil {
			g = &group{chargeCall: chargeCall{userID: c.userID, day: c.day}}
			groups[c.userID] = g
		}
		g.mixed = g.mixed || c.day != g.day
		g.n += c.n
		g.calls = append(g.calls, i)
	}
	type row struct {
		UserID int64  `json:"user_id"`
		Day    string `json:"day"`
		N      int64  `json:"n"`
	}
	var rows []row
	for _, g := range groups {
		if !g.mixed {
			rows = append(rows, row{g.userID, g.day, g.n})
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(a.UserID, b.UserID) })
	spent := make(map[int64]int64, len(rows))
	if len(rows) > 0 {
		param, err := jsonParam(rows)
		if err != nil {
			return nil, err
		}
		// The default limit is one parameter: looked up per row, each batch scanned itself.
		res, err := s.query(ctx, s.db, `WITH v AS (SELECT user_id, day, n FROM `+
			s.dialect.fromJSON("j", column{"user_id", "bigint"}, column{"day", "text"}, column{"n", "bigint"})+`)
			INSERT INTO budgets (user_id, day, spent)
			SELECT v.user_id, v.day, v.n FROM v
			WHERE v.n <= COALESCE((SELECT daily_limit FROM users WHERE id = v.user_id), ?)
			ORDER BY v.user_id
			ON CONFLICT (user_id, day) DO UPDATE SET spent = budgets.spent + excluded.spent
			WHERE budgets.spent + excluded.spent <= COALESCE((SELECT daily_limit FROM users WHERE id = budgets.user_id), ?)
			RETURNING user_id, spent`, param, s.dailyLimit, s.dailyLimit)
		if err != nil {
			return nil, err
		}
		defer res.Close()
		for res.Next() {
			var user, n int64
			if err := res.Scan(&user, &n); err != nil {
				return nil, err
			}
			spent[user] = n
		}
		if err := res.Err(); err != nil {
			return nil, err
		}
		// Released first: on SQLite the rows hold the one writer.
		res.Close()
	}
	outs := make([]chargeOutcome, len(calls))
	for _, g := range groups {
		total, ok := spent[g.userID]
		if !ok && len(g.calls) == 1 && !g.mixed {
			continue // refused, alone: as it would have been
		}
		if !ok {
			for _, i := range g.calls {
				one, err := s.chargeRows(ctx, []chargeCall{calls[i]})
				if err != nil {
					return nil, err
				}
				outs[i] = one[0]
			}
			continue
		}
		// Accepted as a sum: each call is told the spend just after it.
		after := total - g.n
		for _, i := range g.calls {
			after += calls[i].n
			outs[i] = chargeOutcome{spent: after, ok: true}
		}
	}
	return outs, nil
}

// Spent is what the user has spent on the day of now (0 when they have no row for it).
func (s *Store) Spent(ctx context.Context, userID int64, now time.Time) (int64, error) {
	spent, err := fetch[int64](ctx, s, s.read, `SELECT spent FROM budgets WHERE user_id = ? AND day = ?`, userID, BudgetDay(now))
	return wrapped(spent, err, "spent by user %d", userID)
}

// BudgetRow is one user's budget today.
type BudgetRow struct {
	UserID int64  `gorm:"column:user_id"`
	Name   string `gorm:"column:name"`
	Role   Role   `gorm:"column:role"`
	// OwnLimit is the user's own daily limit; nil: the store's default.
	OwnLimit *int64 `gorm:"column:daily_limit"`
	// DailyLimit is the limit in force: OwnLimit, else the store's default.
	DailyLimit int64 `gorm:"-"`
	Spent      int64 `gorm:"column:spent"`
}

// effectiveLimit is the daily limit of a user whose own is own: it, else the store's default.
func (s *Store) effectiveLimit(own *int64) int64 {
	if own != nil {
		return *own
	}
	return s.dailyLimit
}

// Budgets lists authors (and anyone who spent today) with today's spend, by id after afterID.
func (s *Store) Budgets(ctx context.Context, now time.Time, afterID int64, limit int) ([]BudgetRow, error) {
	rows, err := fetch[[]BudgetRow](ctx, s, s.read, `SELECT u.id AS user_id, u.name, u.role, u.daily_limit, COALESCE(b.spent, 0) AS spent
		FROM users u LEFT JOIN budgets b ON b.user_id = u.id AND b.day = ?
		WHERE (u.role = 'author' OR b.spent IS NOT NULL) AND u.id > ?
		ORDER BY u.id LIMIT ?`, BudgetDay(now), afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list budgets: %w", err)
	}
	for i := range rows {
		rows[i].DailyLimit = s.effectiveLimit(rows[i].OwnLimit)
	}
	return rows, nil
}

// PruneBudgets forgets days before the day of now: only today's spend is ever read.
func (s *Store) PruneBudgets(ctx context.Context, now time.Time) (int64, error) {
	n, err := s.exec(ctx, `DELETE FROM budgets WHERE day < ?`, BudgetDay(now))
	return wrapped(n, err, "prune budgets")
}
