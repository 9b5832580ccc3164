package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

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
	confidence := 1.0
	ev := models.Event{Event: models.TaskScreen, Kind: kind, ItemID: id, UserID: userID, Outcome: models.OutcomeOverturned,
		AdminID: &adminID, Note: body.Note, Reason: body.Reason, Verdict: &body.Verdict, Confidence: &confidence}
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
