package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

// eventJSON is one attempt at a job's task, or an admin's decision.
type eventJSON struct {
	ID           int64     `json:"id"`
	At           timestamp `json:"at"`
	Event        string    `json:"event" enum:"task"`
	Kind         string    `json:"kind" enum:"kind"`
	ItemID       int64     `json:"itemId"`
	UserID       int64     `json:"userId"`
	Outcome      string    `json:"outcome" enum:"outcome"`
	Why          *string   `json:"why" enum:"why"`
	Status       *int      `json:"status"`
	UpstreamMs   *int64    `json:"upstreamMs"`
	Attempt      int       `json:"attempt" description:"attempts made before this one: 0 for the first"`
	Confidence   *float64  `json:"confidence"`
	Art          *float64  `json:"art"`
	RequestBytes *int64    `json:"requestBytes"`
	Runs         *int      `json:"runs"`
	Error        *string   `json:"error" maxLength:"500" description:"what went wrong, in words; never a secret"`
	AdminID      *int64    `json:"adminId" description:"outcome decided: the admin who decided"`
	Note         *string   `json:"note" description:"outcome decided: the admin's note"`
	Verdict      *string   `json:"verdict" enum:"verdict" description:"outcome decided: the verdict decided"`
}

type eventListJSON struct {
	Events     []eventJSON `json:"events"`
	NextCursor *string     `json:"nextCursor"`
}

// eventsQuery are the query parameters of GET /api/admin/events.
type eventsQuery struct {
	Event   string `query:"event" enum:"task"`
	Why     string `query:"why" enum:"whyFilter"`
	UserID  int64  `query:"userId" minimum:"1"`
	Kind    string `query:"kind" enum:"kind"`
	ItemID  int64  `query:"itemId" minimum:"1"`
	Outcome string `query:"outcome" enum:"outcome"`
	pageQuery
}

// outcomes lists how an attempt can end.
var outcomes = []string{models.VerdictAllow, models.VerdictBlock, "scored", "pending", models.OutcomeDecided}

func eventOf(e models.Event) eventJSON {
	return eventJSON{ID: e.ID, At: msTime(e.At), Event: e.Event, Kind: e.Kind, ItemID: e.ItemID, UserID: e.UserID,
		Outcome: e.Outcome, Why: e.Why, Status: e.Status, UpstreamMs: e.UpstreamMs, Attempt: e.Attempt,
		Confidence: e.Confidence, Art: e.Art, RequestBytes: e.RequestBytes, Runs: e.Runs,
		Error: e.Error, AdminID: e.AdminID, Note: e.Note, Verdict: e.Verdict}
}

// listEvents pages through attempt events, newest first.
func (a *API) listEvents(c echo.Context) error {
	var f models.EventFilter
	var err error
	if f.Event, err = oneOf(c, "event", tasks...); err != nil {
		return err
	}
	if f.Why, err = oneOf(c, "why", whyFilter...); err != nil {
		return err
	}
	if f.Kind, err = oneOf(c, "kind", kinds...); err != nil {
		return err
	}
	if f.Outcome, err = oneOf(c, "outcome", outcomes...); err != nil {
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
