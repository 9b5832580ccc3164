package models

import "time"

// ShownWhy is why a job is shown waiting, the rule's one home (shownSQL is it in SQL): review
// while a moderator decides; while leased, its row's why; held while its task is held (h);
// breaker while the open breaker puts it off until deferred (due by then, or untried); else
// its row's why.
func ShownWhy(h Holds, deferred *time.Time, j *Job, now time.Time) *Why {
	if j.Why != nil && *j.Why == WhyReview || j.LeaseUntil != nil && j.LeaseUntil.After(now) {
		return j.Why
	}
	if h.Task(j.Task) {
		held := WhyHeld
		return &held
	}
	if deferred != nil && (!j.DueAt.After(*deferred) || j.Why == nil) {
		b := WhyBreaker
		return &b
	}
	return j.Why
}

// shownSQL is the condition that a job is shown why ("none": none), with its arguments; held is
// SQL true when the job's task is held.
func shownSQL(why Why, held string, deferred *time.Time, now int64) (string, []any) {
	const (
		notReview = `(why IS NULL OR why <> 'review')`
		unleased  = `(lease_until IS NULL OR lease_until <= ?)`
		putOff    = `(due_at <= ? OR why IS NULL)`
	)
	notHeld := ` AND NOT (` + held + ` AND ` + unleased + `)`
	switch why {
	case WhyReview:
		return `why = 'review'`, nil
	case WhyHeld:
		return notReview + ` AND ` + held + ` AND ` + unleased, []any{now}
	case WhyBreaker:
		if deferred == nil {
			return `1 = 0`, nil
		}
		return notReview + ` AND ` + putOff + ` AND ` + unleased + ` AND NOT (` + held + `)`, []any{deferred.UnixMilli(), now}
	}
	cond, args := `why = ?`, []any{why}
	if why == "none" {
		cond, args = `why IS NULL`, nil
	}
	cond, args = cond+notHeld, append(args, now)
	if deferred != nil {
		cond, args = cond+` AND NOT (`+putOff+` AND `+unleased+`)`, append(args, deferred.UnixMilli(), now)
	}
	return cond, args
}
