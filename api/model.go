package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
	"github.com/owed/owed/scheduler"
)

// modelStateJSON is the model breaker and cap: state closed, open or probing; since when;
// consecutive failures; the next probe (or the end of the one under way); this process's
// calls in flight and their cap; the failure that opened it and the last real error.
type modelStateJSON struct {
	State       string      `json:"state" enum:"breakerState"`
	Since       *timestamp  `json:"since"`
	Failures    int         `json:"failures"`
	NextProbeAt *timestamp  `json:"nextProbeAt"`
	InFlight    int         `json:"inFlight" description:"model calls this replica's jobs are asking now (a score's three runs count three), out of cap; never more than three times the leased jobs"`
	Cap         int         `json:"cap" description:"OWED_MODEL_CONCURRENCY: model calls in flight per replica"`
	Why         *models.Why `json:"why" enum:"why" description:"the failure that opened the breaker; null while closed"`
	Status      *int        `json:"status" description:"its HTTP status, if any"`
	LastError   *string     `json:"lastError" description:"the last real failure in words (kept after the breaker closes)"`
	ScreensHeld bool        `json:"screensHeld" description:"screens are held: no job probes the model, so only a test call (POST /api/admin/model/probe) can close the breaker"`
	Probe       *probeJSON  `json:"probe,omitempty" description:"POST /api/admin/model/probe only: what the test call found"`
}

// probeJSON is what an admin's test call found.
type probeJSON struct {
	Answered   bool        `json:"answered"`
	Why        *models.Why `json:"why" enum:"why"`
	Status     *int        `json:"status"`
	Error      *string     `json:"error"`
	UpstreamMs int64       `json:"upstreamMs"`
	Closed     bool        `json:"closed" description:"the answer closed the breaker"`
}

var breakerStates = []string{models.BreakerClosed, models.BreakerOpen, models.BreakerProbing}

// modelState answers GET /api/admin/model.
func (a *API) modelState(c echo.Context) error {
	out, err := a.modelStateOf(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (a *API) modelStateOf(c echo.Context) (modelStateJSON, error) {
	ctx := c.Request().Context()
	st, err := a.Content.ModelState(ctx)
	if err != nil {
		return modelStateJSON{}, err
	}
	h, err := a.Store.Holds(ctx)
	if err != nil {
		return modelStateJSON{}, err
	}
	return modelStateJSON{State: st.State, Since: timePtr(st.Since), Failures: st.Failures,
		NextProbeAt: timePtr(st.NextProbeAt), InFlight: st.InFlight, Cap: st.Cap, Why: st.Why, Status: st.Status,
		LastError: st.LastError, ScreensHeld: h.Screen}, nil
}

// probeModel answers POST /api/admin/model/probe: one test call now (a fixed harmless subject,
// charged to nobody), at most one every 5 s across replicas, allowed while work is held; an
// answer closes an open breaker. It answers the model's state after it, with what the call found.
func (a *API) probeModel(c echo.Context) error {
	var r scheduler.ProbeResult
	r, err := a.Content.ProbeModel(c.Request().Context(), func(tx *models.Store, r scheduler.ProbeResult) error {
		return audit(c, tx, models.AuditProbe, "model", nil, probeOf(r))
	})
	var soon *scheduler.TooSoonError
	switch {
	case errors.As(err, &soon):
		secs := strconv.Itoa(int((soon.Wait + 999_999_999) / 1_000_000_000))
		c.Response().Header().Set("Retry-After", secs)
		return &Error{Status: http.StatusTooManyRequests, Code: "rate_limited", Message: "the model was probed less than 5 s ago; retry after " + secs + " s"}
	case errors.Is(err, scheduler.ErrNoModel):
		return &Error{Status: http.StatusConflict, Code: "unavailable", Message: "no model is configured: there is nothing to probe"}
	case err != nil:
		return err
	}
	a.Log.Info("model probe by hand", "answered", r.Answered, "why", r.Why, "status", r.Status, "closed", r.Closed, "by", caller(c).ID)
	out, err := a.modelStateOf(c)
	if err != nil {
		return err
	}
	p := probeOf(r)
	out.Probe = &p
	return c.JSON(http.StatusOK, out)
}

func probeOf(r scheduler.ProbeResult) probeJSON {
	p := probeJSON{Answered: r.Answered, UpstreamMs: r.UpstreamMs, Closed: r.Closed}
	if r.Why != "" {
		p.Why = new(models.Why(r.Why))
	}
	if r.Status != 0 {
		p.Status = new(r.Status)
	}
	if r.Error != "" {
		p.Error = new(r.Error)
	}
	return p
}
