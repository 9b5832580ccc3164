package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

// eventJSON is one attempt at a job's task, or an admin's decision.
type eventJSON struct {
	ID           int64               `json:"id"`
	At           timestamp           `json:"at"`
	Event        models.Task         `json:"event" enum:"task"`
	Kind         models.Kind         `json:"kind" enum:"kind"`
	ItemID       int64               `json:"itemId"`
	UserID       int64               `json:"userId"`
	Outcome      models.EventOutcome `json:"outcome" enum:"outcome"`
	Why          *models.Why         `json:"why" enum:"why"`
	Status       *int                `json:"status"`
	UpstreamMs   *int64              `json:"upstreamMs"`
	Attempt      int                 `json:"attempt" description:"attempts made before this one: 0 for the first"`
	Confidence   *float64            `json:"confidence"`
	Art          *float64            `json:"art"`
	RequestBytes *int64              `json:"requestBytes"`
	Runs         *int                `json:"runs"`
	Error        *string             `json:"error" maxLength:"500" description:"what went wrong, in words; never a secret"`
	AdminID      *int64              `json:"adminId" description:"outcome decided: the admin who decided"`
	Note         *string             `json:"note" description:"outcome decided: the admin's note"`
	Verdict      *models.Verdict     `json:"verdict" enum:"verdict" description:"outcome decided: the verdict decided"`
	Reason       *string             `json:"reason" description:"outcome decided or overturned: the public reason, which the item's author sees"`
	JobID        *int64              `json:"jobId" description:"the job the attempt was at; null for a verdict by hand on no owed job"`
}

type eventListJSON struct {
	Events     []eventJSON `json:"events"`
	NextCursor *string     `json:"nextCursor"`
}

// eventsQuery are the query parameters of GET /api/admin/events.
type eventsQuery struct {
	Event   models.Task         `query:"event" enum:"task"`
	Why     models.Why          `query:"why" enum:"whyFilter"`
	UserID  int64               `query:"userId" minimum:"1"`
	Kind    models.Kind         `query:"kind" enum:"kind"`
	ItemID  int64               `query:"itemId" minimum:"1"`
	Outcome models.EventOutcome `query:"outcome" enum:"outcome"`
	pageQuery
}

func eventOf(e models.Event) eventJSON {
	return eventJSON{ID: e.ID, At: timeStr(e.At), Event: e.Event, Kind: e.Kind, ItemID: e.ItemID, UserID: e.UserID,
		Outcome: e.Outcome, Why: e.Why, Status: e.Status, UpstreamMs: e.UpstreamMs, Attempt: e.Attempt,
		Confidence: e.Confidence, Art: e.Art, RequestBytes: e.RequestBytes, Runs: e.Runs,
		Error: e.Error, AdminID: e.AdminID, Note: e.Note, Verdict: e.Verdict, Reason: e.Reason, JobID: e.JobID}
}

// listEvents pages through attempt events, newest first.
func (a *API) listEvents(c echo.Context) error {
	var f models.EventFilter
	var err error
	if f.Event, err = oneOf(c, "event", models.Tasks...); err != nil {
		return err
	}
	if f.Why, err = oneOf(c, "why", whyFilter...); err != nil {
		return err
	}
	if f.Kind, err = oneOf(c, "kind", models.Kinds...); err != nil {
		return err
	}
	if f.Outcome, err = oneOf(c, "outcome", models.EventOutcomes...); err != nil {
		return err
	}
	if f.UserID, err = queryID(c, "userId"); err != nil {
		return err
	}
	if f.ItemID, err = queryID(c, "itemId"); err != nil {
		return err
	}
	limit, before, err := idPage(c, 50, 500)
	if err != nil {
		return err
	}
	evs, err := a.Store.ListEvents(c.Request().Context(), f, before, limit)
	if err != nil {
		return err
	}
	out, next := pageOf(evs, limit, eventOf, func(e models.Event) any { return idCursor{e.ID} })
	return c.JSON(http.StatusOK, eventListJSON{out, next})
}
