package api

import (
	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

type eventJSON struct {
	ID           int64               `json:"id"`
	At           string              `json:"at"`
	Event        models.Task         `json:"event"`
	Kind         models.Kind         `json:"kind"`
	ItemID       int64               `json:"itemId"`
	UserID       int64               `json:"userId"`
	Outcome      models.EventOutcome `json:"outcome"`
	Why          *models.Why         `json:"why"`
	Status       *int                `json:"status"`
	UpstreamMs   *int64              `json:"upstreamMs"`
	Attempt      int                 `json:"attempt"`
	Confidence   *float64            `json:"confidence"`
	Art          *float64            `json:"art"`
	RequestBytes *int64              `json:"requestBytes"`
	Runs         *int                `json:"runs"`
	Error        *string             `json:"error"`
	AdminID      *int64              `json:"adminId"`
	Note         *string             `json:"note"`
	Verdict      *models.Verdict     `json:"verdict"`
}

func eventOf(e models.Event) eventJSON {
	return eventJSON{ID: e.ID, At: wireTime(e.At), Event: e.Event, Kind: e.Kind, ItemID: e.ItemID, UserID: e.UserID,
		Outcome: e.Outcome, Why: e.Why, Status: e.Status, UpstreamMs: e.UpstreamMs, Attempt: e.Attempt,
		Confidence: e.Confidence, Art: e.Art, RequestBytes: e.RequestBytes, Runs: e.Runs,
		Error: e.Error, AdminID: e.AdminID, Note: e.Note, Verdict: e.Verdict}
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
	return page(c, "events", evs, limit, eventOf, func(e models.Event) any { return idCursor{e.ID} })
}
