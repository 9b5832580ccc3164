package api

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// shadowJSON is GET /api/admin/shadow's answer. Only its drift member is filled here (the
// candidate's members are built beside it: live, candidate, screens, scores).
type shadowJSON struct {
	Drift driftJSON `json:"drift"`
}

// getShadow answers the candidate's agreement with the live model and the drift runs.
func (a *API) getShadow(c echo.Context) error {
	drift, err := a.shadowDrift(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, shadowJSON{Drift: drift})
}
