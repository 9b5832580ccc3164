package models

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"
)

// The review queue: items a moderator decides, 'unsure' when the model's verdict fell below the
// review band, 'appeal' when the author appealed a block.

// ReviewReason is why an item waits in the review queue.
type ReviewReason string

// Review reasons.
const (
	ReviewUnsure ReviewReason = "unsure" // the model's verdict was less sure than the band
	ReviewAppeal ReviewReason = "appeal" // the author appealed a block
)

// ReviewReasons lists every reason an entry is in the review queue.
var ReviewReasons = []ReviewReason{ReviewUnsure, ReviewAppeal}

// ReviewClaimFilter selects open entries by their claim, as the moderator asking sees them.
type ReviewClaimFilter string

// Claim filters.
const (
	ClaimMine      ReviewClaimFilter = "mine"      // the asker's live claim
	ClaimNone      ReviewClaimFilter = "unclaimed" // no live claim
	ClaimAvailable ReviewClaimFilter = "available" // the asker may take it: unclaimed or their own
)

// ReviewClaimFilters lists every claim filter.
var ReviewClaimFilters = []ReviewClaimFilter{ClaimMine, ClaimNone, ClaimAvailable}

// unclaimedSQL is true of a reviews row no live claim holds; its one argument is now (ms).
const unclaimedSQL = `(claimed_by IS NULL OR claim_until IS NULL OR claim_until <= ?)`

// ReviewDue is the due time of a job that waits for a moderator: never.
var ReviewDue = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// ReviewClaimFor is how long a moderator's claim on an entry lasts (renewed by claiming again).
const ReviewClaimFor = 5 * time.Minute

// Errors of the review queue.
var (
	// ErrNotBlocked refuses an appeal of an item that is not blocked.
	ErrNotBlocked = errors.New("only a blocked item can be appealed")
	// ErrAppealed refuses a second appeal of the same item.
	ErrAppealed = errors.New("the item was already appealed")
)

// ErrClaimed refuses a claim, or a decision, while another moderator's claim holds the entry.
type ErrClaimed struct {
	AdminID int64
	Until   time.Time
}

func (e *ErrClaimed) Error() string {
	return fmt.Sprintf("moderator %d holds the entry until %s", e.AdminID, e.Until.UTC().Format(time.RFC3339))
}

// ReviewEntry is one entry of the review queue, open or decided.
type ReviewEntry struct {
	ID         int64        `gorm:"column:id"`
	Kind       Kind         `gorm:"column:kind"`
	ItemID     int64        `gorm:"column:item_id"`
	UserID     int64        `gorm:"column:user_id"`
	Reason     ReviewReason `gorm:"column:reason"`
	EnteredAt  time.Time    `gorm:"column:entered_at;serializer:unixms"`
	Suggestion *Verdict     `gorm:"column:suggestion"`
	Confidence *float64     `gorm:"column:confidence"`
	Note       *string      `gorm:"column:note"`
	BlockedBy  *int64       `gorm:"column:blocked_by"`
	ClaimedBy  *int64       `gorm:"column:claimed_by"`
	ClaimUntil *time.Time   `gorm:"column:claim_until;serializer:unixms"`
	DecidedAt  *time.Time   `gorm:"column:decided_at;serializer:unixms"`
	DecidedBy  *int64       `gorm:"column:decided_by"`
	Outcome    *Verdict     `gorm:"column:outcome"`
	// PublicReason is the decision's public reason, for the item's author.
	PublicReason *string `gorm:"column:public_reason"`
}

const reviewColumns = `id, kind, item_id, user_id, reason, entered_at, suggestion, confidence, note, blocked_by,
	claimed_by, claim_until, decided_at, decided_by, outcome, public_reason`

// EnterReview sends a claimed screen job whose model verdict was unsure to the review queue
// (why review, due ReviewDue, an attempt added; the verdict kept as a suggestion) with ev, in
// one transaction; ok is false when the claim is gone.
func (s *Store) EnterReview(ctx context.Context, job Job, verdict Verdict, confidence float64, ev Event) (bool, error) {
	var ok bool
	err := s.WithTx(ctx, func(tx *Store) error {
		n, err := tx.exec(ctx, `UPDATE content_jobs SET due_at = ?, attempts = attempts + 1, why = ?, status = NULL,
			last_error = NULL, lease_until = NULL, lease_owner = NULL WHERE id = ? AND lease_owner = ?`,
			ReviewDue.UnixMilli(), WhyReview, job.ID, job.LeaseOwner)
		if err != nil || n == 0 {
			return err
		}
		ok = true
		if _, err := tx.exec(ctx, `INSERT INTO reviews (kind, item_id, user_id, reason, entered_at, suggestion, confidence)
			VALUES (?, ?, ?, 'unsure', ?, ?, ?) ON CONFLICT (kind, item_id, reason) DO NOTHING`,
			job.Kind, job.ItemID, job.UserID, tx.nowMs(), verdict, confidence); err != nil {
			return err
		}
		tx.changed(job.UserID)
		return tx.insertEvent(ctx, &ev)
	})
	return wrapped(ok, err, "send %s %d to review", job.Kind, job.ItemID)
}

// ReviewFilter selects open entries of the review queue.
type ReviewFilter struct {
	Kind   Kind
	Reason ReviewReason
	UserID int64
	Claim  ReviewClaimFilter
	Me     int64 // who asks, for Claim
}

// ReviewCursor is where a page of the queue starts: after entry ID, entered at EnteredAt (ms).
type ReviewCursor struct {
	EnteredAt int64
	ID        int64
}

// OpenReviews pages through the open entries of the review queue, oldest first.
func (s *Store) OpenReviews(ctx context.Context, f ReviewFilter, after *ReviewCursor, limit int) ([]ReviewEntry, error) {
	q := `SELECT ` + reviewColumns + ` FROM reviews WHERE decided_at IS NULL`
	var args []any
	add := func(cond string, a ...any) { q += ` AND ` + cond; args = append(args, a...) }
	if f.Kind != "" {
		add(`kind = ?`, f.Kind)
	}
	if f.Reason != "" {
		add(`reason = ?`, f.Reason)
	}
	if f.UserID != 0 {
		add(`user_id = ?`, f.UserID)
	}
	switch now := s.nowMs(); f.Claim {
	case ClaimMine:
		add(`claimed_by = ? AND claim_until > ?`, f.Me, now)
	case ClaimNone:
		add(unclaimedSQL, now)
	case ClaimAvailable:
		add(`(`+unclaimedSQL+` OR claimed_by = ?)`, now, f.Me)
	}
	if after != nil {
		add(`(entered_at > ? OR (entered_at = ? AND id > ?))`, after.EnteredAt, after.EnteredAt, after.ID)
	}
	q += ` ORDER BY entered_at, id LIMIT ?`
	args = append(args, limit)
	rows, err := fetch[[]ReviewEntry](ctx, s, s.read, q, args...)
	return rows, wrap(err, "review queue")
}

// ReviewCounts counts the open entries of the queue by reason.
func (s *Store) ReviewCounts(ctx context.Context) (map[ReviewReason]int64, error) {
	var rows []struct {
		Reason string `gorm:"column:reason"`
		N      int64  `gorm:"column:n"`
	}
	if err := s.scan(ctx, s.read, &rows, `SELECT reason, COUNT(*) AS n FROM reviews WHERE decided_at IS NULL GROUP BY reason`); err != nil {
		return nil, fmt.Errorf("review counts: %w", err)
	}
	out := map[ReviewReason]int64{ReviewUnsure: 0, ReviewAppeal: 0}
	for _, r := range rows {
		out[ReviewReason(r.Reason)] = r.N
	}
	return out, nil
}

// ReviewsOf lists an item's entries, open and decided, from the writer.
func (s *Store) ReviewsOf(ctx context.Context, kind Kind, itemID int64) ([]ReviewEntry, error) {
	rows, err := fetch[[]ReviewEntry](ctx, s, s.db, `SELECT `+reviewColumns+` FROM reviews WHERE kind = ? AND item_id = ? ORDER BY id`, kind, itemID)
	return rows, wrap(err, "reviews of %s %d", kind, itemID)
}

// AppealsOf lists an author's appeals.
func (s *Store) AppealsOf(ctx context.Context, userID int64) ([]ReviewEntry, error) {
	rows, err := fetch[[]ReviewEntry](ctx, s, s.read, `SELECT `+reviewColumns+` FROM reviews WHERE user_id = ? AND reason = 'appeal'`, userID)
	return rows, wrap(err, "appeals of user %d", userID)
}

// ClaimReview gives adminID the item's open entries until until in one statement, unless
// another moderator's claim holds them (*ErrClaimed); ErrNotFound when none is open.
func (s *Store) ClaimReview(ctx context.Context, kind Kind, itemID, adminID int64, until time.Time) ([]ReviewEntry, error) {
	now := s.nowMs()
	rows, err := fetch[[]ReviewEntry](ctx, s, s.db, `UPDATE reviews SET claimed_by = ?, claim_until = ?
		WHERE kind = ? AND item_id = ? AND decided_at IS NULL
			AND (`+unclaimedSQL+` OR claimed_by = ?)
		RETURNING `+reviewColumns, adminID, until.UnixMilli(), kind, itemID, now, adminID)
	if err != nil {
		return nil, fmt.Errorf("claim the review of %s %d: %w", kind, itemID, err)
	}
	if len(rows) > 0 {
		return rows, nil
	}
	open, err := s.ReviewsOf(ctx, kind, itemID)
	if err != nil {
		return nil, err
	}
	for _, e := range open {
		if e.DecidedAt == nil && e.ClaimedBy != nil && e.ClaimUntil != nil {
			return nil, &ErrClaimed{AdminID: *e.ClaimedBy, Until: *e.ClaimUntil}
		}
	}
	return nil, missing("review entry", fmt.Sprint("of ", kind, " ", itemID))
}

// ReleaseReview ends adminID's live claim on the item's open entries and answers its end (nil: none).
func (s *Store) ReleaseReview(ctx context.Context, kind Kind, itemID, adminID int64) (*time.Time, error) {
	// claim_until stays (RETURNING reads the row as updated): without a claimer it holds nothing.
	until, ok, err := maybe[int64](ctx, s, s.db, `UPDATE reviews SET claimed_by = NULL
		WHERE kind = ? AND item_id = ? AND decided_at IS NULL AND claimed_by = ? AND claim_until > ?
		RETURNING claim_until`, kind, itemID, adminID, s.nowMs())
	if err != nil || !ok {
		return nil, wrap(err, "release the review of %s %d", kind, itemID)
	}
	t := fromMillis(until)
	return &t, nil
}

// BlockNote is the note of the item's last verdict by hand to block it (nil: none).
func (s *Store) BlockNote(ctx context.Context, kind Kind, itemID int64) (*string, error) {
	note, err := fetch[*string](ctx, s, s.read, `SELECT note FROM events WHERE event = 'screen' AND kind = ? AND item_id = ?
		AND outcome IN ('decided', 'overturned') AND verdict = 'block' ORDER BY id DESC LIMIT 1`, kind, itemID)
	return note, wrap(err, "the block's note of %s %d", kind, itemID)
}

// HeldBy reports the live claim of another moderator than adminID on an open entry, if any.
func HeldBy(open []ReviewEntry, adminID int64, now time.Time) *ErrClaimed {
	for _, e := range open {
		if e.DecidedAt == nil && e.ClaimedBy != nil && *e.ClaimedBy != adminID && e.ClaimUntil != nil && e.ClaimUntil.After(now) {
			return &ErrClaimed{AdminID: *e.ClaimedBy, Until: *e.ClaimUntil}
		}
	}
	return nil
}

// FileAppeal records the author's appeal of their blocked item, with their note: ErrNotFound
// when the item is missing or another author's, ErrNotBlocked unless blocked, ErrAppealed when
// appealed before. The entry remembers who blocked it, so another moderator hears the appeal.
func (s *Store) FileAppeal(ctx context.Context, kind Kind, itemID, userID int64, note *string) (ReviewEntry, error) {
	table, err := itemTable(kind)
	if err != nil {
		return ReviewEntry{}, missing(string(kind), itemID)
	}
	var out ReviewEntry
	err = s.WithTx(ctx, func(tx *Store) error {
		owner, err := fetch[int64](ctx, tx, tx.db, `SELECT user_id FROM `+table+` WHERE id = ?`, itemID)
		if err != nil {
			return err
		}
		if owner != userID { // 0: no such item
			return missing(string(kind), itemID)
		}
		screen, err := fetch[struct {
			Verdict    string  `gorm:"column:verdict"`
			Confidence float64 `gorm:"column:confidence"`
		}](ctx, tx, tx.db, `SELECT verdict, confidence FROM screens WHERE kind = ? AND item_id = ?`, kind, itemID)
		if err != nil {
			return err
		}
		if screen.Verdict != string(VerdictBlock) {
			return ErrNotBlocked
		}
		// The last verdict's moderator (nil: the model's).
		blockedBy, err := fetch[*int64](ctx, tx, tx.db, `SELECT admin_id FROM events WHERE event = 'screen' AND kind = ? AND item_id = ?
			AND outcome <> 'pending' ORDER BY id DESC LIMIT 1`, kind, itemID)
		if err != nil {
			return err
		}
		rows, err := fetch[[]ReviewEntry](ctx, tx, tx.db, `INSERT INTO reviews (kind, item_id, user_id, reason, entered_at, suggestion, confidence, note, blocked_by)
			VALUES (?, ?, ?, 'appeal', ?, 'block', ?, ?, ?) ON CONFLICT (kind, item_id, reason) DO NOTHING RETURNING `+reviewColumns,
			kind, itemID, userID, tx.nowMs(), screen.Confidence, note, blockedBy)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return ErrAppealed
		}
		out = rows[0]
		tx.changed(userID)
		return nil
	})
	return wrapped(out, err, "appeal of %s %d", kind, itemID)
}

// ItemAppealDecidedData is the data of an item.appeal.decided event.
type ItemAppealDecidedData struct {
	Kind      Kind    `json:"kind"`
	ID        int64   `json:"id"`
	UserID    int64   `json:"userId"`
	SongID    *int64  `json:"songId,omitempty"`
	Outcome   Verdict `json:"outcome"`
	DecidedBy int64   `json:"decidedBy"`
	// Reason is the moderator's public reason for the author (never their note).
	Reason *string `json:"reason,omitempty"`
}

// DecideAppeal records a moderator's decision of an open appeal in one transaction: allow
// replaces the block with the moderator's allow (owing item.screened), block lets it stand.
// Either way ev (outcome decided) is kept, deciding the entry, and item.appeal.decided is owed.
func (s *Store) DecideAppeal(ctx context.Context, kind Kind, itemID int64, verdict Verdict, ev Event) error {
	err := s.WithTx(ctx, func(tx *Store) error {
		if verdict == VerdictAllow {
			if _, err := tx.exec(ctx, `DELETE FROM screens WHERE kind = ? AND item_id = ?`, kind, itemID); err != nil {
				return err
			}
			n, err := tx.exec(ctx, `INSERT INTO screens (kind, item_id, verdict, confidence, screened_at, public_reason) VALUES (?, ?, 'allow', 1, ?, ?)`,
				kind, itemID, tx.nowMs(), ev.Reason)
			if err != nil {
				return err
			}
			if n == 0 {
				return missing(string(kind), itemID)
			}
			if err := tx.enqueueWebhook(ctx, EventItemScreened, func() (any, error) {
				d, err := tx.screenedData(ctx, kind, itemID, VerdictAllow, 1)
				d.DecidedBy, d.Note, d.Reason = ev.AdminID, ev.Note, ev.Reason
				return d, err
			}); err != nil {
				return err
			}
		}
		if err := tx.enqueueWebhook(ctx, EventItemAppealDecided, func() (any, error) {
			d, err := tx.screenedData(ctx, kind, itemID, verdict, 1)
			out := ItemAppealDecidedData{Kind: kind, ID: itemID, UserID: d.UserID, SongID: d.SongID, Outcome: verdict, Reason: ev.Reason}
			if ev.AdminID != nil {
				out.DecidedBy = *ev.AdminID
			}
			return out, err
		}); err != nil {
			return err
		}
		tx.changed(ev.UserID)
		return tx.insertEvent(ctx, &ev)
	})
	return wrap(err, "decide the appeal of %s %d", kind, itemID)
}

// AuthorHistory is how an author's screened items ended.
type AuthorHistory struct {
	Allowed int64
	Blocked int64
}

// AuthorHistories counts each author's allowed and blocked items (every kind).
func (s *Store) AuthorHistories(ctx context.Context, userIDs []int64) (map[int64]AuthorHistory, error) {
	out := make(map[int64]AuthorHistory, len(userIDs))
	if len(userIDs) == 0 {
		return out, nil
	}
	ids := slices.Clone(userIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	list := idList(ids)
	var rows []struct {
		UserID  int64  `gorm:"column:user_id"`
		Verdict string `gorm:"column:verdict"`
		N       int64  `gorm:"column:n"`
	}
	// Driven from the authors' items, so the plan does not depend on the site's verdicts.
	verdictOf := func(kind string) string {
		return `(SELECT s.verdict FROM screens s WHERE s.kind = '` + kind + `' AND s.item_id = i.id)`
	}
	q := `SELECT user_id, verdict, COUNT(*) AS n FROM (
		SELECT i.user_id, ` + verdictOf("revision") + ` AS verdict FROM revisions i WHERE ` + s.dialect.idIn("i.user_id") + `
		UNION ALL SELECT i.user_id, ` + verdictOf("comment") + ` FROM comments i WHERE ` + s.dialect.idIn("i.user_id") + `
		UNION ALL SELECT i.user_id, ` + verdictOf("pitch") + ` FROM pitches i WHERE ` + s.dialect.idIn("i.user_id") + `
	) x WHERE verdict IS NOT NULL GROUP BY user_id, verdict`
	if err := s.scan(ctx, s.read, &rows, q, list, list, list); err != nil {
		return nil, fmt.Errorf("author histories: %w", err)
	}
	for _, r := range rows {
		h := out[r.UserID]
		if r.Verdict == string(VerdictAllow) {
			h.Allowed += r.N
		} else {
			h.Blocked += r.N
		}
		out[r.UserID] = h
	}
	return out, nil
}

// ReviewMeasures are the queue's waits per reason (p50, p90 s) and the model's overturned share.
type ReviewMeasures struct {
	Decided    map[ReviewReason]int64
	P50        map[ReviewReason]float64
	P90        map[ReviewReason]float64
	Suggested  int64   // decisions of a model's suggestion
	Overturned int64   // of which the moderator decided otherwise
	Share      float64 // Overturned / Suggested (0 when none)
}

// maxMeasured bounds the decisions a measure reads (the newest).
const maxMeasured = 20000

// MeasureReviews computes ReviewMeasures over the decisions made since since.
func (s *Store) MeasureReviews(ctx context.Context, since time.Time) (ReviewMeasures, error) {
	var rows []struct {
		Reason     string  `gorm:"column:reason"`
		Waited     int64   `gorm:"column:waited"`
		Suggestion *string `gorm:"column:suggestion"`
		Outcome    *string `gorm:"column:outcome"`
		BlockedBy  *int64  `gorm:"column:blocked_by"`
	}
	m := ReviewMeasures{Decided: map[ReviewReason]int64{}, P50: map[ReviewReason]float64{}, P90: map[ReviewReason]float64{}}
	if err := s.scan(ctx, s.read, &rows, `SELECT reason, decided_at - entered_at AS waited, suggestion, outcome, blocked_by
		FROM reviews WHERE decided_at IS NOT NULL AND decided_at >= ? ORDER BY decided_at DESC LIMIT ?`,
		since.UnixMilli(), maxMeasured); err != nil {
		return m, fmt.Errorf("review measures: %w", err)
	}
	waits := map[ReviewReason][]float64{}
	for _, r := range rows {
		reason := ReviewReason(r.Reason)
		waits[reason] = append(waits[reason], float64(r.Waited)/1000)
		if r.BlockedBy == nil && r.Suggestion != nil && r.Outcome != nil {
			m.Suggested++
			if *r.Suggestion != *r.Outcome {
				m.Overturned++
			}
		}
	}
	for _, reason := range ReviewReasons {
		w := waits[reason]
		m.Decided[reason] = int64(len(w))
		if len(w) == 0 {
			continue
		}
		sort.Float64s(w)
		m.P50[reason], m.P90[reason] = quantile(w, 0.5), quantile(w, 0.9)
	}
	if m.Suggested > 0 {
		m.Share = float64(m.Overturned) / float64(m.Suggested)
	}
	return m, nil
}

// quantile is the q-quantile of sorted values (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// notInReview is a condition RetryJobs adds: a job waiting for a moderator is never retried.
const notInReview = ` AND (why IS NULL OR why <> 'review')`
