package models

import (
	"context"
	"math"
)

// The SQL written from the held rule and the calls a task costs, for the tests that check it
// agrees with the Go rule.
var (
	HeldTasksSQL = heldTasks
	HeldTaskSQL  = heldTask
	TaskCallsSQL = taskCallsSQL
)

// AuthorJobsSQL is the author's view's read of their owed jobs.
const AuthorJobsSQL = authorJobsSQL

// EventColumns are the events table's columns as the store writes them (eventFields).
var EventColumns = eventColumns

// TxBackoff is WithTx's policy.
var TxBackoff = txBackoff

// ClaimDueSQL is the dialect's claim of due jobs, bound, as a claim alone (its own
// transaction) or inside a larger one sends it.
func (s *Store) ClaimDueSQL(alone bool) string { return s.dialect.bind(s.dialect.claimDue("", alone)) }

// MineVersionSQL is MineVersion's read of the kept rows; its arguments are the author four
// times, the budget day and the author again.
var MineVersionSQL = mineVersionSQL

// MineKindSQL is the statement (and its arguments) that reads the candidates of one kind for
// a page of the author's view, in the state state selects.
func MineKindSQL(kind Kind, userID int64, f MineFilter, state ItemState) (string, []any) {
	afterRank := 0
	if f.After != nil {
		afterRank = KindRank(f.After.Kind)
	}
	return mineKindSQL(KindRank(kind), userID, f, afterRank, mineStateFilter[state])
}

// Mine is the author's whole view: every item, newest first, with its owed jobs.
func (s *Store) Mine(ctx context.Context, userID int64) ([]MineItem, error) {
	items, _, err := s.MinePage(ctx, userID, MineFilter{Limit: math.MaxInt32})
	return items, err
}

// UniqueViolation is uniqueViolation: err is a refusal by the unique index named index.
var UniqueViolation = uniqueViolation

// HookRan reports whether r's hook was committed.
func (r *Request) HookRan() bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

// CountSessions counts a user's session rows, live or expired (0: everyone's).
func (s *Store) CountSessions(ctx context.Context, userID int64) (int64, error) {
	q, args := `SELECT COUNT(*) FROM sessions`, []any{}
	if userID != 0 {
		q, args = q+` WHERE user_id = ?`, append(args, userID)
	}
	var n int64
	err := s.scan(ctx, s.read, &n, q, args...)
	return n, err
}

// Stored reports whether a job's row may keep the why; the others are only shown, worked out
// when the job is read (held, breaker).
func (w Why) Stored() bool { return w != WhyHeld && w != WhyBreaker }
