package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

// reviewEntryJSON is one open entry of the review queue, with what a moderator needs to decide it.
type reviewEntryJSON struct {
	Kind       models.Kind         `json:"kind" enum:"kind"`
	ID         int64               `json:"id" description:"the item's id"`
	Reason     models.ReviewReason `json:"reason" enum:"reviewReason"`
	EnteredAt  timestamp           `json:"enteredAt"`
	Suggestion *models.Verdict     `json:"suggestion" enum:"verdict" description:"the model's verdict (unsure), or the block appealed"`
	Confidence *float64            `json:"confidence"`
	Note       *string             `json:"note" description:"the author's note of an appeal"`
	BlockedBy  *int64              `json:"blockedBy" description:"an appeal of a block by hand: the admin who blocked (another admin must decide)"`
	BlockNote  *string             `json:"blockNote" description:"an appeal of a block by hand: the blocker's note on the block"`
	Content    reviewContentJSON   `json:"content"`
	Author     reviewAuthorJSON    `json:"author"`
	Claim      *reviewClaimJSON    `json:"claim" description:"a moderator's live claim; null when none"`
}

type reviewContentJSON struct {
	Title string `json:"title"`
	Text  string `json:"text"`
}

type reviewAuthorJSON struct {
	ID      int64  `json:"id"`
	Name    string `json:"name"`
	Allowed int64  `json:"allowed" description:"the author's items allowed"`
	Blocked int64  `json:"blocked" description:"the author's items blocked"`
}

type reviewClaimJSON struct {
	AdminID   int64     `json:"adminId"`
	AdminName string    `json:"adminName"`
	Until     timestamp `json:"until"`
	Mine      bool      `json:"mine" description:"whether the caller holds the claim"`
}

type reviewCountsJSON struct {
	Unsure int64 `json:"unsure"`
	Appeal int64 `json:"appeal"`
}

func reviewCountsOf(n map[models.ReviewReason]int64) reviewCountsJSON {
	return reviewCountsJSON{Unsure: n[models.ReviewUnsure], Appeal: n[models.ReviewAppeal]}
}

type reviewListJSON struct {
	Entries    []reviewEntryJSON `json:"entries"`
	NextCursor *string           `json:"nextCursor"`
	Counts     reviewCountsJSON  `json:"counts" description:"open entries by reason, whatever the filter"`
}

// reviewQuery are the query parameters of GET /api/admin/review.
type reviewQuery struct {
	Kind   models.Kind         `query:"kind" enum:"kind"`
	Reason models.ReviewReason `query:"reason" enum:"reviewReason"`
	UserID int64               `query:"userId" description:"the author"`
	Claim  string              `query:"claim" enum:"reviewClaim" description:"mine: your live claims; unclaimed: no live claim; available: unclaimed or yours (what you may take)"`
	Limit  int                 `query:"limit" minimum:"1" maximum:"100" default:"20"`
	Cursor string              `query:"cursor" description:"the nextCursor of the page before"`
}

type reviewCursor struct {
	T int64 `json:"t"`
	I int64 `json:"i"`
}

// reviewMeasuresJSON are the queue's measures over the last 7 days.
type reviewMeasuresJSON struct {
	Open       reviewCountsJSON  `json:"open"`
	Decided    reviewCountsJSON  `json:"decided" description:"decisions in the last 7 days"`
	P50Seconds reviewSecondsJSON `json:"p50Seconds" description:"median time from entering review to the decision"`
	P90Seconds reviewSecondsJSON `json:"p90Seconds"`
	Suggested  int64             `json:"suggested" description:"decisions of a model's suggestion (unsure entries, appeals of the model's blocks)"`
	Overturned int64             `json:"overturned" description:"of which the moderator decided otherwise"`
	Share      float64           `json:"overturnedShare"`
	Since      timestamp         `json:"since"`
}

type reviewSecondsJSON struct {
	Unsure *float64 `json:"unsure"`
	Appeal *float64 `json:"appeal"`
}

// appealRequest is an author's appeal of a block.
type appealRequest struct {
	Note *string `json:"note" nullable:"true" maxLength:"500"`
}

// appealJSON is an appeal as its author sees it.
type appealJSON struct {
	State     string     `json:"state" enum:"appealState" description:"pending, granted (the item is public) or denied (the block stands)"`
	Note      *string    `json:"note"`
	At        timestamp  `json:"at"`
	DecidedAt *timestamp `json:"decidedAt"`
	Reason    *string    `json:"reason" description:"the moderator's answer to you, when they gave one"`
}

// appealStates are the states of an appeal.
var appealStates = []string{"pending", "granted", "denied"}

func appealOf(e models.ReviewEntry) *appealJSON {
	out := &appealJSON{State: "pending", Note: e.Note, At: timeStr(e.EnteredAt), DecidedAt: timePtr(e.DecidedAt), Reason: e.PublicReason}
	if e.Outcome != nil {
		out.State = "denied"
		if *e.Outcome == models.VerdictAllow {
			out.State = "granted"
		}
	}
	return out
}

// measureWindow is how far back the review measures look.
const measureWindow = 7 * 24 * time.Hour

// listReview answers the open entries of the review queue, oldest first.
func (a *API) listReview(c echo.Context) error {
	var f models.ReviewFilter
	var err error
	if f.Kind, err = oneOf(c, "kind", models.Kinds...); err != nil {
		return err
	}
	if f.Reason, err = oneOf(c, "reason", models.ReviewReasons...); err != nil {
		return err
	}
	if f.UserID, err = queryID(c, "userId"); err != nil {
		return err
	}
	if f.Claim, err = oneOf(c, "claim", models.ReviewClaimFilters...); err != nil {
		return err
	}
	f.Me = caller(c).ID
	limit, err := queryLimit(c, 20, 100)
	if err != nil {
		return err
	}
	cur, err := pageCursor(c, func(cur reviewCursor) bool { return cur.I > 0 && cur.T >= 0 })
	if err != nil {
		return err
	}
	var after *models.ReviewCursor
	if cur != nil {
		after = &models.ReviewCursor{EnteredAt: cur.T, ID: cur.I}
	}
	ctx := c.Request().Context()
	open, err := a.Store.OpenReviews(ctx, f, after, limit+1)
	if err != nil {
		return err
	}
	out := reviewListJSON{Entries: []reviewEntryJSON{}}
	if len(open) > limit {
		open = open[:limit]
		last := open[limit-1]
		out.NextCursor = encodeCursor(reviewCursor{T: last.EnteredAt.UnixMilli(), I: last.ID})
	}
	if out.Entries, err = a.reviewEntries(ctx, open, caller(c).ID); err != nil {
		return err
	}
	counts, err := a.Store.ReviewCounts(ctx)
	if err != nil {
		return err
	}
	out.Counts = reviewCountsOf(counts)
	return c.JSON(http.StatusOK, out)
}

// reviewEntries adds to each entry its item's content, author and claim (a gone item's is left out).
func (a *API) reviewEntries(ctx context.Context, open []models.ReviewEntry, me int64) ([]reviewEntryJSON, error) {
	out := make([]reviewEntryJSON, 0, len(open))
	history, err := a.Store.AuthorHistories(ctx, each(open, func(e models.ReviewEntry) int64 { return e.UserID }))
	if err != nil {
		return nil, err
	}
	name := a.userNames(ctx)
	for _, e := range open {
		sub, ok, err := a.Store.ScreenSubject(ctx, e.Kind, e.ItemID)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		h := history[e.UserID]
		n, err := name(e.UserID)
		if err != nil {
			return nil, err
		}
		j := reviewEntryJSON{Kind: e.Kind, ID: e.ItemID, Reason: e.Reason, EnteredAt: timeStr(e.EnteredAt), Suggestion: e.Suggestion,
			Confidence: e.Confidence, Note: e.Note, BlockedBy: e.BlockedBy, Content: reviewContentJSON{Title: sub.Title, Text: sub.Text},
			Author: reviewAuthorJSON{ID: e.UserID, Name: n, Allowed: h.Allowed, Blocked: h.Blocked}}
		if j.Claim, err = a.claimOf(e, me, name); err != nil {
			return nil, err
		}
		if e.Reason == models.ReviewAppeal && e.BlockedBy != nil {
			if j.BlockNote, err = a.Store.BlockNote(ctx, e.Kind, e.ItemID); err != nil {
				return nil, err
			}
		}
		out = append(out, j)
	}
	return out, nil
}

// claimedError is the 409 of an entry another moderator holds.
func claimedError(held *models.ErrClaimed) *Error {
	return &Error{Status: http.StatusConflict, Code: "claimed",
		Message: "another moderator (user " + itoa(int(held.AdminID)) + ") holds this entry until " + string(timeStr(held.Until))}
}

// claimAudit is a claim as the audit trail keeps it (nil: no live claim).
func claimAudit(held *models.ErrClaimed) any {
	if held == nil {
		return nil
	}
	return map[string]any{"claimedBy": held.AdminID, "until": timeStr(held.Until)}
}

// claimReview gives the caller an item's open entries for models.ReviewClaimFor (again: renews).
// Taking an entry is audited with the live claim it replaced; a renewal is not.
func (a *API) claimReview(c echo.Context) error {
	kind, id, err := itemPath(c, "entry")
	if err != nil {
		return err
	}
	ctx, me := c.Request().Context(), caller(c).ID
	until := a.now().Add(models.ReviewClaimFor)
	var claimed []models.ReviewEntry
	err = a.Store.WithTx(ctx, func(tx *models.Store) error {
		was, err := tx.ReviewsOf(ctx, kind, id)
		if err != nil {
			return err
		}
		if claimed, err = tx.ClaimReview(ctx, kind, id, me, until); err != nil {
			return err
		}
		before := models.HeldBy(was, 0, a.now()) // anyone's live claim: no admin has id 0
		if before != nil && before.AdminID == me {
			return nil
		}
		return audit(c, tx, models.AuditReviewClaim, target(kind, id), claimAudit(before), claimAudit(&models.ErrClaimed{AdminID: me, Until: until}))
	})
	var held *models.ErrClaimed
	switch {
	case errors.As(err, &held):
		return claimedError(held)
	case err != nil:
		return err
	}
	out, err := a.reviewEntries(ctx, claimed[:1], me)
	if err != nil {
		return err
	}
	if len(out) == 0 {
		return notFound("review entry") // the item went meanwhile
	}
	a.Log.Info("review claim", "kind", kind, "itemId", id, "adminId", me)
	return c.JSON(http.StatusOK, out[0])
}

// releaseReview ends the caller's claim on an item's open entries; audited. Without one: 204,
// or 409 claimed while another moderator holds it, 404 when the item has no open entry.
func (a *API) releaseReview(c echo.Context) error {
	kind, id, err := itemPath(c, "entry")
	if err != nil {
		return err
	}
	ctx, me := c.Request().Context(), caller(c).ID
	var released *time.Time
	err = a.Store.WithTx(ctx, func(tx *models.Store) error {
		var err error
		if released, err = tx.ReleaseReview(ctx, kind, id, me); err != nil || released == nil {
			return err
		}
		return audit(c, tx, models.AuditReviewRelease, target(kind, id), claimAudit(&models.ErrClaimed{AdminID: me, Until: *released}), nil)
	})
	if err != nil {
		return err
	}
	if released == nil {
		all, err := a.Store.ReviewsOf(ctx, kind, id)
		if err != nil {
			return err
		}
		if held := models.HeldBy(all, me, a.now()); held != nil {
			return claimedError(held)
		}
		if !slices.ContainsFunc(all, func(e models.ReviewEntry) bool { return e.DecidedAt == nil }) {
			return notFound("review entry")
		}
	} else {
		a.Log.Info("review release", "kind", kind, "itemId", id, "adminId", me)
	}
	return c.NoContent(http.StatusNoContent)
}

// reviewMeasures answers the queue's measures: open entries, time to decision, overturns.
func (a *API) reviewMeasures(c echo.Context) error {
	ctx := c.Request().Context()
	since := a.now().Add(-measureWindow)
	m, err := a.Store.MeasureReviews(ctx, since)
	if err != nil {
		return err
	}
	counts, err := a.Store.ReviewCounts(ctx)
	if err != nil {
		return err
	}
	secs := func(q map[models.ReviewReason]float64) reviewSecondsJSON {
		var out reviewSecondsJSON
		if v, ok := q[models.ReviewUnsure]; ok {
			out.Unsure = &v
		}
		if v, ok := q[models.ReviewAppeal]; ok {
			out.Appeal = &v
		}
		return out
	}
	return c.JSON(http.StatusOK, reviewMeasuresJSON{
		Open:       reviewCountsOf(counts),
		Decided:    reviewCountsOf(m.Decided),
		P50Seconds: secs(m.P50), P90Seconds: secs(m.P90), Suggested: m.Suggested, Overturned: m.Overturned, Share: m.Share,
		Since: timeStr(since)})
}

// checkWords tidies an optional note or reason: trimmed, nil when blank, at most 500 characters.
func checkWords(field string, text *string) (*string, error) {
	if text == nil {
		return nil, nil
	}
	n := strings.TrimSpace(*text)
	if strings.ContainsRune(n, 0) || !utf8.ValidString(n) {
		return nil, invalid(field, field+" must be text without NUL bytes")
	}
	if utf8.RuneCountInString(n) > maxNoteChars {
		return nil, invalid(field, field+" is longer than 500 characters")
	}
	if n == "" {
		return nil, nil
	}
	return &n, nil
}

// appeal files the author's appeal of their blocked item: it enters the review queue.
func (a *API) appeal(c echo.Context) error {
	kind, id, err := itemPath(c, "item")
	if err != nil {
		return err
	}
	var body appealRequest
	if err := bind(c, &body); err != nil {
		return err
	}
	note, err := checkWords("note", body.Note)
	if err != nil {
		return err
	}
	u := caller(c)
	e, err := a.Store.FileAppeal(c.Request().Context(), kind, id, u.ID, note)
	switch {
	case errors.Is(err, models.ErrNotBlocked):
		return &Error{Status: http.StatusConflict, Code: "not_blocked", Message: "only a blocked " + string(kind) + " can be appealed"}
	case errors.Is(err, models.ErrAppealed):
		return &Error{Status: http.StatusConflict, Code: "appealed", Message: "this " + string(kind) + " was already appealed; an item is appealed once"}
	case err != nil:
		return err
	}
	a.Log.Info("appeal", "kind", kind, "itemId", id, "userId", u.ID)
	return c.JSON(http.StatusCreated, appealOf(e))
}

// decideReview is the verdict route's part for the review queue: 409 claimed while another
// moderator holds the item; an open appeal it decides itself (done true), by another admin than
// the blocker's (409 same_moderator). An unsure entry is decided by the verdict's own event.
func (a *API) decideReview(c echo.Context, kind models.Kind, id, authorID int64, body verdictRequest) (bool, error) {
	ctx, me := c.Request().Context(), caller(c).ID
	all, err := a.Store.ReviewsOf(ctx, kind, id)
	if err != nil {
		return false, err
	}
	var open []models.ReviewEntry
	var appeal *models.ReviewEntry
	for i, e := range all {
		if e.DecidedAt == nil {
			open = append(open, e)
			if e.Reason == models.ReviewAppeal {
				appeal = &all[i]
			}
		}
	}
	if held := models.HeldBy(open, me, a.now()); held != nil {
		return true, claimedError(held)
	}
	if appeal == nil {
		return false, nil
	}
	if appeal.BlockedBy != nil && *appeal.BlockedBy == me {
		return true, &Error{Status: http.StatusConflict, Code: "same_moderator",
			Message: "you blocked this " + string(kind) + " by hand: another moderator must decide its appeal"}
	}
	ev := body.event(kind, id, authorID, me, models.OutcomeDecided)
	decided, err := a.appealDecided(ctx, *appeal, me, body)
	if err != nil {
		return true, err
	}
	if err := a.Store.WithTx(ctx, func(tx *models.Store) error {
		if err := tx.DecideAppeal(ctx, kind, id, body.Verdict, ev); err != nil {
			return err
		}
		return audit(c, tx, models.AuditAppealDecide, target(kind, id),
			map[string]any{"verdict": models.VerdictBlock, "appeal": "pending", "note": appeal.Note, "blockedBy": appeal.BlockedBy},
			decided)
	}); err != nil {
		return true, err
	}
	a.Log.Info("appeal decided", "kind", kind, "itemId", id, "userId", authorID, "verdict", body.Verdict, "adminId", me)
	return true, a.decided(c, kind, id, body.Verdict, nil)
}

// appealDecided is an appeal's decision as the audit trail keeps it.
func (a *API) appealDecided(ctx context.Context, appeal models.ReviewEntry, me int64, body verdictRequest) (map[string]any, error) {
	state := "denied"
	if body.Verdict == models.VerdictAllow {
		state = "granted"
	}
	out := map[string]any{"verdict": body.Verdict, "appeal": state, "note": body.Note, "reason": body.Reason}
	if appeal.BlockedBy != nil {
		creator, err := a.creatorOf(ctx, me)
		if err != nil {
			return nil, err
		}
		out["deciderCreatedBy"] = creator
	}
	return out, nil
}

// inReview refuses to retry a job that waits for a moderator (a retry would ask the model again).
func inReview(j models.Job) error {
	if j.Why != nil && *j.Why == models.WhyReview {
		return &Error{Status: http.StatusConflict, Code: "review",
			Message: "the job waits for a moderator (the model was unsure): decide it in the review queue"}
	}
	return nil
}

// appealsByItem indexes an author's appeals by item, for their view.
func appealsByItem(appeals []models.ReviewEntry) map[itemRef]*appealJSON {
	out := make(map[itemRef]*appealJSON, len(appeals))
	for _, e := range appeals {
		out[itemRef{e.Kind, e.ItemID}] = appealOf(e)
	}
	return out
}

type itemRef struct {
	kind models.Kind
	id   int64
}
