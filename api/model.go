package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

// modelStateJSON is the model breaker and cap: state closed, open or probing; since when;
// consecutive failures; the next probe (or the end of the one under way); this process's
// calls in flight and their cap.
type modelStateJSON struct {
	State       string     `json:"state" enum:"breakerState"`
	Since       *timestamp `json:"since"`
	Failures    int        `json:"failures"`
	NextProbeAt *timestamp `json:"nextProbeAt"`
	InFlight    int        `json:"inFlight"`
	Cap         int        `json:"cap"`
}

var breakerStates = []string{models.BreakerClosed, models.BreakerOpen, models.BreakerProbing}

// modelState answers GET /api/admin/model.
func (a *API) modelState(c echo.Context) error {
	st, err := a.Content.ModelState(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, modelStateJSON{State: st.State, Since: timePtr(st.Since), Failures: st.Failures,
		NextProbeAt: timePtr(st.NextProbeAt), InFlight: st.InFlight, Cap: st.Cap})
}
