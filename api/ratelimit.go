package api

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// writeLimit limits each signed-in caller's writes (POST, PUT, PATCH, DELETE) to WriteRate a
// second with bursts of WriteBurst, answering 429 with Retry-After past that: one runaway
// client cannot flood the owed work. Reads and anonymous calls (which can write nothing) pass.
// The buckets are keyed by user, as many as the sign-in limiter's keys: a bucket forgotten
// past that was idle the longest.
func (a *API) writeLimit() echo.MiddlewareFunc {
	if a.WriteRate <= 0 {
		return func(next echo.HandlerFunc) echo.HandlerFunc { return next }
	}
	burst := a.WriteBurst
	if burst < 1 {
		burst = int(math.Ceil(a.WriteRate))
	}
	retry := strconv.Itoa(int(math.Ceil(1 / a.WriteRate)))
	writes := newKeyedLimiter(time.Duration(float64(time.Second)/a.WriteRate), burst, signInKeys)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			u, m := caller(c), c.Request().Method
			if u == nil || m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions {
				return next(c)
			}
			if ok, _ := writes.take(strconv.FormatInt(u.ID, 10), a.now()); !ok {
				c.Response().Header().Set("Retry-After", retry)
				return &Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
					Message: "too many writes from this token; retry after " + retry + " s"}
			}
			return next(c)
		}
	}
}
