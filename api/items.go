package api

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

// itemPageJSON is everything owed knows of one item, for the moderator who decides on it or
// undoes a decision: the item, its author, its verdict, the work it still owes, every attempt
// and verdict, its review entries with their claims, the audit entries on it and the webhook
// deliveries it caused.
type itemPageJSON struct {
	Kind       models.Kind       `json:"kind" enum:"kind"`
	ID         int64             `json:"id"`
	Title      string            `json:"title" description:"a revision's song title; empty for a comment or pitch"`
	Content    string            `json:"content" description:"the item's whole content (a revision's code, a comment's or pitch's body)"`
	Author     jobAuthor         `json:"author"`
	Verdict    *models.Verdict   `json:"verdict" enum:"verdict" description:"the verdict it has now; null while none"`
	Confidence *float64          `json:"confidence"`
	Jobs       []jobJSON         `json:"jobs" description:"the work it still owes"`
	Events     []eventJSON       `json:"events" description:"every screen and score attempt with its error, and every verdict by hand, newest first"`
	Verdicts   []itemVerdictJSON `json:"verdicts" description:"every verdict it was given, oldest first: the model's, by hand, overturned"`
	Review     *itemReviewJSON   `json:"review" description:"its entry in the review queue because the model was unsure; null when none"`
	Appeal     *itemReviewJSON   `json:"appeal" description:"its author's appeal; null when none"`
	Audit      []auditEntryJSON  `json:"audit" description:"the audit entries on the item (verdicts, overturns, appeal decisions, review claims), newest first"`
	Deliveries []deliveryJSON    `json:"deliveries" description:"the webhook deliveries its events caused, newest first (attemptLog empty: see the delivery's own route)"`
}

// itemVerdictJSON is one verdict given to an item, and who gave it and why.
type itemVerdictJSON struct {
	At         timestamp           `json:"at"`
	Outcome    models.EventOutcome `json:"outcome" enum:"outcome" description:"allow or block: the model's; decided: by hand; overturned: changed by hand"`
	Verdict    models.Verdict      `json:"verdict" enum:"verdict"`
	Confidence *float64            `json:"confidence"`
	AdminID    *int64              `json:"adminId" description:"who decided by hand; null for the model"`
	AdminName  *string             `json:"adminName"`
	Note       *string             `json:"note" description:"why, in the moderator's words (internal)"`
	Reason     *string             `json:"reason" description:"why, for the author (public)"`
}

// itemReviewJSON is one review entry of an item, open or decided.
type itemReviewJSON struct {
	EnteredAt        timestamp        `json:"enteredAt"`
	Suggestion       *models.Verdict  `json:"suggestion" enum:"verdict" description:"the model's verdict (unsure), or the block appealed"`
	Confidence       *float64         `json:"confidence"`
	Note             *string          `json:"note" description:"the author's note of an appeal"`
	BlockedBy        *int64           `json:"blockedBy" description:"an appeal of a block by hand: the admin who blocked"`
	BlockedByName    *string          `json:"blockedByName"`
	Claim            *reviewClaimJSON `json:"claim" description:"a moderator's live claim; null when none"`
	DecidedAt        *timestamp       `json:"decidedAt"`
	DecidedBy        *int64           `json:"decidedBy"`
	DecidedByName    *string          `json:"decidedByName"`
	DecidedByCreator *auditAdminJSON  `json:"decidedByCreator" description:"an appeal of a block by hand: the admin who created the decider's account, as the audit trail has it (null: not recorded)"`
	Outcome          *models.Verdict  `json:"outcome" enum:"verdict"`
	Reason           *string          `json:"reason" description:"the decision's public reason, which the author sees"`
}

// auditAdminJSON is an admin as the audit trail names them.
type auditAdminJSON struct {
	AdminID   *int64 `json:"adminId"`
	AdminName string `json:"adminName"`
}

// itemPageRows caps each list of the page (newest kept).
const itemPageRows = maxJobEvents

// getItem answers an item's page.
func (a *API) getItem(c echo.Context) error {
	kind, id, err := itemPath(c, "item")
	if err != nil {
		return err
	}
	ctx, me := c.Request().Context(), caller(c).ID
	sub, ok, err := a.Store.ScreenSubject(ctx, kind, id)
	if err != nil {
		return err
	}
	if !ok {
		return notFound(string(kind))
	}
	name := a.userNames(ctx)
	author, err := name(sub.UserID)
	if err != nil {
		return err
	}
	out := itemPageJSON{Kind: kind, ID: id, Title: sub.Title, Content: sub.Text, Author: jobAuthor{ID: sub.UserID, Name: author}}
	screen, err := a.Store.ScreenOf(ctx, kind, id)
	if err != nil {
		return err
	}
	out.Verdict, out.Confidence = screen.Verdict, screen.Confidence
	if out.Jobs, err = a.itemJobs(ctx, kind, id); err != nil {
		return err
	}
	if out.Events, out.Verdicts, err = a.itemEvents(ctx, kind, id, name); err != nil {
		return err
	}
	if out.Review, out.Appeal, err = a.itemReviews(ctx, kind, id, me, name); err != nil {
		return err
	}
	entries, err := a.Store.ListAudit(ctx, models.AuditFilter{Target: target(kind, id)}, 0, itemPageRows)
	if err != nil {
		return err
	}
	out.Audit = each(entries, auditEntryOf)
	ds, err := a.Store.ItemDeliveries(ctx, kind, id, itemPageRows)
	if err != nil {
		return err
	}
	out.Deliveries = each(ds, func(d models.Delivery) deliveryJSON { return deliveryOf(d, nil) })
	return c.JSON(http.StatusOK, out)
}

// itemJobs are the jobs an item still owes, shown as the jobs list shows them.
func (a *API) itemJobs(ctx context.Context, kind models.Kind, id int64) ([]jobJSON, error) {
	holds, err := a.Store.Holds(ctx)
	if err != nil {
		return nil, err
	}
	deferred, err := a.deferral(ctx)
	if err != nil {
		return nil, err
	}
	jobs, err := a.Store.ListJobRows(ctx, models.JobFilter{Kind: kind, ItemID: id, Held: &holds, Deferred: deferred}, models.JobsByID, nil, len(models.Tasks))
	if err != nil {
		return nil, err
	}
	return each(jobs, a.jobOf(holds, deferred)), nil
}

// itemEvents are an item's events, newest first, and its verdicts among them, oldest first.
func (a *API) itemEvents(ctx context.Context, kind models.Kind, id int64, name func(int64) (string, error)) ([]eventJSON, []itemVerdictJSON, error) {
	evs, err := a.Store.ListEvents(ctx, models.EventFilter{Kind: kind, ItemID: id}, 0, itemPageRows)
	if err != nil {
		return nil, nil, err
	}
	events := each(evs, eventOf)
	verdicts := []itemVerdictJSON{}
	for _, e := range slices.Backward(evs) {
		if e.Event != models.TaskScreen || e.Outcome == models.OutcomePending || e.Outcome == models.OutcomeScored {
			continue
		}
		v := e.Verdict
		if v == nil { // the model's verdict is its outcome
			mv := models.Verdict(e.Outcome)
			v = &mv
		}
		iv := itemVerdictJSON{At: timeStr(e.At), Outcome: e.Outcome, Verdict: *v, Confidence: e.Confidence, AdminID: e.AdminID, Note: e.Note, Reason: e.Reason}
		if iv.AdminName, err = namePtr(name, e.AdminID); err != nil {
			return nil, nil, err
		}
		verdicts = append(verdicts, iv)
	}
	return events, verdicts, nil
}

// itemReviews are an item's review entry (the model was unsure) and appeal, with their claims.
func (a *API) itemReviews(ctx context.Context, kind models.Kind, id, me int64, name func(int64) (string, error)) (review, appeal *itemReviewJSON, err error) {
	reviews, err := a.Store.ReviewsOf(ctx, kind, id)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range reviews {
		r, err := a.itemReview(e, me, name)
		if err != nil {
			return nil, nil, err
		}
		if e.BlockedBy != nil && e.DecidedBy != nil {
			if r.DecidedByCreator, err = a.creatorOf(ctx, *e.DecidedBy); err != nil {
				return nil, nil, err
			}
		}
		if e.Reason == models.ReviewAppeal {
			appeal = r
		} else {
			review = r
		}
	}
	return review, appeal, nil
}

// itemReview shows one review entry of an item with its live claim.
func (a *API) itemReview(e models.ReviewEntry, me int64, name func(int64) (string, error)) (*itemReviewJSON, error) {
	out := &itemReviewJSON{EnteredAt: timeStr(e.EnteredAt), Suggestion: e.Suggestion, Confidence: e.Confidence, Note: e.Note,
		BlockedBy: e.BlockedBy, DecidedAt: timePtr(e.DecidedAt), DecidedBy: e.DecidedBy, Outcome: e.Outcome, Reason: e.PublicReason}
	var err error
	if out.BlockedByName, err = namePtr(name, e.BlockedBy); err != nil {
		return nil, err
	}
	if out.DecidedByName, err = namePtr(name, e.DecidedBy); err != nil {
		return nil, err
	}
	out.Claim, err = a.claimOf(e, me, name)
	return out, err
}

// claimOf is an entry's live claim, if any.
func (a *API) claimOf(e models.ReviewEntry, me int64, name func(int64) (string, error)) (*reviewClaimJSON, error) {
	if e.ClaimedBy == nil || e.ClaimUntil == nil || !e.ClaimUntil.After(a.now()) || e.DecidedAt != nil {
		return nil, nil
	}
	n, err := name(*e.ClaimedBy)
	if err != nil {
		return nil, err
	}
	return &reviewClaimJSON{AdminID: *e.ClaimedBy, AdminName: n, Until: timeStr(*e.ClaimUntil), Mine: *e.ClaimedBy == me}, nil
}

// creatorOf is the admin who created user id's account, as the audit trail has it (nil: no record).
func (a *API) creatorOf(ctx context.Context, id int64) (*auditAdminJSON, error) {
	es, err := a.Store.ListAudit(ctx, models.AuditFilter{Action: models.AuditUserCreate, Target: target("user", id)}, 0, 1)
	if err != nil || len(es) == 0 {
		return nil, err
	}
	return &auditAdminJSON{AdminID: es[0].AdminID, AdminName: es[0].AdminName}, nil
}

// userNames reads users' names, each once: a user deleted meanwhile has the empty name.
func (a *API) userNames(ctx context.Context) func(int64) (string, error) {
	names := map[int64]string{}
	return func(id int64) (string, error) {
		if n, ok := names[id]; ok {
			return n, nil
		}
		u, err := a.Store.UserByID(ctx, id)
		if errors.Is(err, models.ErrNotFound) {
			err = nil
		}
		names[id] = u.Name
		return u.Name, err
	}
}

// namePtr is the name of the user id names, nil for none.
func namePtr(name func(int64) (string, error), id *int64) (*string, error) {
	if id == nil {
		return nil, nil
	}
	n, err := name(*id)
	return &n, err
}
