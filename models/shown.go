package models

import "time"

// ShownWhy is why a job is shown waiting, the rule's one home (shownSQL is the same rule in
// SQL, for the admin's filter by why and the overview's counts):
//   - review while a moderator decides it, whatever else holds;
//   - otherwise, while a lease holds it (at now), its row's why: it is being run;
//   - held while its task is held (h);
//   - breaker while the open breaker puts it off until deferred (its next probe; nil while
//     the breaker is closed): it is due by then, or was put off untried (no why of its own);
//   - else its row's why (its last real failure, if any).
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

// shownSQL is a condition on content_jobs that a job is shown why (ShownWhy), "none" for no
// why, with its arguments: held is SQL that is true when the job's task is held (heldTask, or
// the held tasks when known), deferred and now as ShownWhy takes them.
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
