package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

// holdsJSON is what is held.
type holdsJSON struct {
	Screen     bool `json:"screen"`
	Score      bool `json:"score"`
	Deliveries bool `json:"deliveries"`
}

// holdsRequest changes what is held; a field left out keeps its value.
type holdsRequest struct {
	Screen     *bool `json:"screen"`
	Score      *bool `json:"score"`
	Deliveries *bool `json:"deliveries"`
}

// verdictRequest is an admin's verdict on an item.
type verdictRequest struct {
	Verdict  models.Verdict `json:"verdict" required:"true" enum:"verdict"`
	Note     *string        `json:"note" nullable:"true" maxLength:"500" description:"why, for moderators and webhooks (not shown to the author); required with overturn"`
	Reason   *string        `json:"reason" nullable:"true" maxLength:"500" description:"why, for the item's author: shown in their view (mine), its stream, item.screened and an appeal's item.appeal.decided"`
	Overturn bool           `json:"overturn" description:"change a verdict already given (event outcome overturned; the webhook is sent again)"`
}

// getHolds answers what is held.
func (a *API) getHolds(c echo.Context) error {
	h, err := a.Store.Holds(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, holdsJSON(h))
}

// putHolds sets what is held (a field left out keeps its value); lifting a hold wakes its work.
func (a *API) putHolds(c echo.Context) error {
	var body holdsRequest
	if err := bind(c, &body); err != nil {
		return err
	}
	ctx := c.Request().Context()
	h, err := a.Store.Holds(ctx)
	if err != nil {
		return err
	}
	was := h
	for _, f := range []struct {
		v   *bool
		dst *bool
	}{{body.Screen, &h.Screen}, {body.Score, &h.Score}, {body.Deliveries, &h.Deliveries}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if err := a.Store.WithTx(ctx, func(tx *models.Store) error {
		if err := tx.SetHolds(ctx, h, caller(c).ID); err != nil {
			return err
		}
		return audit(c, tx, models.AuditHolds, "holds", holdsJSON(was), holdsJSON(h))
	}); err != nil {
		return err
	}
	a.Log.Info("holds", "screen", h.Screen, "score", h.Score, "deliveries", h.Deliveries, "by", caller(c).ID)
	if was.Deliveries && !h.Deliveries && a.Webhooks != nil {
		a.Webhooks.Wake()
	}
	if (was.Screen && !h.Screen || was.Score && !h.Score) && a.Content != nil {
		a.Content.Wake() // the held jobs are due now: run them, not at the next periodic sweep
	}
	return c.JSON(http.StatusOK, holdsJSON(h))
}

// maxNoteChars caps a verdict's note.
const maxNoteChars = 500

// check validates a verdict by hand and tidies its note: trimmed, and nil when blank.
func (body *verdictRequest) check() error {
	if body.Verdict != models.VerdictAllow && body.Verdict != models.VerdictBlock {
		return invalid("verdict", "verdict must be allow or block")
	}
	reason, err := checkWords("reason", body.Reason)
	if err != nil {
		return err
	}
	body.Reason = reason
	note, err := checkWords("note", body.Note)
	body.Note = note
	if err == nil && body.Overturn && note == nil {
		return invalid("note", "an overturn needs a note of its own: why the verdict changes")
	}
	return err
}

// event is the event of this verdict by hand on an item of authorID's: the admin's, with their
// note and reason, at confidence 1.
func (body verdictRequest) event(kind models.Kind, id, authorID, adminID int64, outcome models.EventOutcome) models.Event {
	return models.Event{Event: models.TaskScreen, Kind: kind, ItemID: id, UserID: authorID, Outcome: outcome,
		AdminID: &adminID, Note: body.Note, Reason: body.Reason, Verdict: &body.Verdict, Confidence: new(1.0)}
}

// decide records an admin's verdict on an item as if the model had answered it (confidence 1):
// the screen job is settled by the same trigger, an allowed revision owes its score, and the
// event says the admin decided, with their id and note. An item that already has a verdict
// keeps it (409): a verdict is recorded exactly once.
func (a *API) decide(c echo.Context) error {
	kind, id, err := itemPath(c, "item")
	if err != nil {
		return err
	}
	var body verdictRequest
	if err := bind(c, &body); err != nil {
		return err
	}
	if err := body.check(); err != nil {
		return err
	}
	ctx := c.Request().Context()
	sub, ok, err := a.Store.ScreenSubject(ctx, kind, id)
	if err != nil {
		return err
	}
	if !ok {
		return notFound(string(kind))
	}
	if done, err := a.decideReview(c, kind, id, sub.UserID, body); done || err != nil {
		return err // the review queue's claims and appeals (review.go)
	}
	before, err := a.Store.ScreenOf(ctx, kind, id)
	if err != nil {
		return err
	}
	if before.Verdict != nil {
		if body.Overturn {
			return a.overturn(c, kind, id, sub.UserID, body, *before.Verdict)
		}
		return &Error{Status: http.StatusConflict, Code: "decided", Message: "the " + string(kind) + " already has its verdict: " + string(*before.Verdict) +
			" (send \"overturn\": true to change it)"}
	}
	adminID := caller(c).ID
	ev := body.event(kind, id, sub.UserID, adminID, models.OutcomeDecided)
	if before.Job != nil {
		ev.Attempt, ev.JobID = before.Job.Attempts, &before.Job.ID
	}
	var recorded bool
	err = a.Store.WithTx(ctx, func(tx *models.Store) error {
		var err error
		if recorded, err = tx.RecordScreen(ctx, kind, id, body.Verdict, *ev.Confidence, ev); err != nil || !recorded {
			return err
		}
		return audit(c, tx, models.AuditVerdict, target(kind, id), nil, map[string]any{"verdict": body.Verdict, "note": body.Note, "reason": body.Reason})
	})
	if err != nil {
		return err
	}
	after, err := a.Store.ScreenOf(ctx, kind, id)
	if err != nil {
		return err
	}
	if !recorded {
		if after.Verdict == nil {
			return notFound(string(kind)) // deleted meanwhile
		}
		return &Error{Status: http.StatusConflict, Code: "decided", Message: "the " + string(kind) + " got its verdict meanwhile: " + string(*after.Verdict)}
	}
	a.Log.Info("screen", "kind", kind, "itemId", id, "userId", sub.UserID, "outcome", models.OutcomeDecided,
		"verdict", body.Verdict, "adminId", adminID)
	return a.decided(c, kind, id, body.Verdict, &after)
}

// decided answers an admin's verdict with the item's screen after it (nil: read now), starting an
// allowed revision's score.
func (a *API) decided(c echo.Context, kind models.Kind, id int64, verdict models.Verdict, after *models.ItemScreen) error {
	ctx := c.Request().Context()
	if kind == models.KindRevision && verdict == models.VerdictAllow && a.Content != nil {
		a.Content.RunItem(models.TaskScore, models.KindRevision, id)
	}
	if after == nil {
		s, err := a.Store.ScreenOf(ctx, kind, id)
		if err != nil {
			return err
		}
		after = &s
	}
	h, err := a.Store.Holds(ctx)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a.screenOf(ctx, *after, h))
}

// overturn changes an item's verdict by hand (the verdict route with "overturn": true): the
// new verdict is recorded with an event of outcome overturned (the admin, their note, the
// verdict), the item.screened webhook is owed again, and the audit trail keeps before and
// after, all in one transaction. The same verdict again is 409 decided: nothing to change.
func (a *API) overturn(c echo.Context, kind models.Kind, id, userID int64, body verdictRequest, was models.Verdict) error {
	ctx := c.Request().Context()
	if was == body.Verdict {
		return &Error{Status: http.StatusConflict, Code: "decided", Message: "the " + string(kind) + " already has this verdict: " + string(was)}
	}
	adminID := caller(c).ID
	ev := body.event(kind, id, userID, adminID, models.OutcomeOverturned)
	var changed bool
	var before *models.Verdict
	err := a.Store.WithTx(ctx, func(tx *models.Store) error {
		var err error
		if before, changed, err = tx.OverturnScreen(ctx, kind, id, body.Verdict, ev); err != nil || !changed {
			return err
		}
		return audit(c, tx, models.AuditOverturn, target(kind, id), map[string]any{"verdict": before},
			map[string]any{"verdict": body.Verdict, "note": body.Note, "reason": body.Reason})
	})
	if err != nil {
		return err
	}
	if !changed {
		if before == nil {
			return notFound(string(kind))
		}
		return &Error{Status: http.StatusConflict, Code: "decided", Message: "the " + string(kind) + " already has this verdict: " + string(*before)}
	}
	a.Log.Info("screen", "kind", kind, "itemId", id, "userId", userID, "outcome", models.OutcomeOverturned,
		"verdict", body.Verdict, "was", was, "adminId", adminID)
	return a.decided(c, kind, id, body.Verdict, nil)
}
