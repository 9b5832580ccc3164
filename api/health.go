package api

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

// healthz answers while the process serves.
func (a *API) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 only while the database answers and takes writes (on a connection of its
// own, never behind the pool) and the notifier hears it; "model" says "configured" or why not.
func (a *API) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := a.Store.Ping(ctx); err != nil {
		a.Log.Warn("not ready", "err", err)
		msg := "the database does not answer"
		if models.FaultOf(err) == models.FaultNotPrimary {
			msg = "the database server reached is read-only (not the primary)"
		}
		return notReady(c, "unavailable", msg)
	}
	// A database that takes no writes is not ready until a write succeeds again.
	if p := a.Store.StorageProblem(); p != "" {
		if err := a.Store.ProbeWrite(ctx); err != nil {
			if p = a.Store.StorageProblem(); p == "" {
				p = "the database takes no writes"
			}
			a.Log.Warn("not ready", "reason", p)
			return notReady(c, "insufficient_storage", p)
		}
	}
	// A deaf listener leaves streams blind to other replicas' writes: not ready.
	if a.Notify != nil {
		if p := a.Notify.Problem(); p != "" {
			return notReady(c, "unavailable", p)
		}
	}
	// Ready without a model too (writes are taken and wait as owed), but saying so.
	out := map[string]string{"status": "ready", "model": "configured"}
	if p := a.modelProblem(); p != "" {
		out["model"] = p
	} else if d := a.modelDegraded(ctx); d != "" {
		out["model"] = d
	}
	if a.ClockProblem != nil {
		if p := a.ClockProblem(); p != "" {
			out["clock"] = p
		}
	}
	return c.JSON(http.StatusOK, out)
}

// notReady is readyz's 503, with Retry-After.
func notReady(c echo.Context, code, msg string) error {
	c.Response().Header().Set("Retry-After", retryAfterSeconds)
	return c.JSON(http.StatusServiceUnavailable, map[string]any{"error": &Error{Code: code, Message: msg}})
}

// modelProblem says why no model is asked, or "".
func (a *API) modelProblem() string {
	if a.Content == nil {
		return ""
	}
	return a.Content.ModelProblem()
}

// modelStateWait bounds readiness's read of the model's breaker.
const modelStateWait = 250 * time.Millisecond

// modelDegraded says why the model is degraded while its breaker is not closed, else "".
func (a *API) modelDegraded(ctx context.Context) string {
	if a.Content == nil {
		return ""
	}
	// A short wait: outside locks can hold the store's pool, and no answer is not degraded.
	ctx, cancel := context.WithTimeout(ctx, modelStateWait)
	defer cancel()
	st, err := a.Content.ModelState(ctx)
	if err != nil || st.State == "closed" {
		return ""
	}
	out := "degraded: the breaker is " + st.State
	if st.LastError != nil && *st.LastError != "" {
		out += " (" + *st.LastError + ")"
	} else if st.Why != nil {
		out += " (" + string(*st.Why) + ")"
	}
	return out
}
