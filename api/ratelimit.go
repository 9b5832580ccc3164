package api

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"golang.org/x/time/rate"
)

// writeLimit limits each signed-in caller's writes (POST, PUT, PATCH, DELETE) to WriteRate a
// second with bursts of WriteBurst, answering 429 with Retry-After past that: one runaway
// client cannot flood the owed work. Reads and anonymous calls (which can write nothing) pass.
func (a *API) writeLimit() echo.MiddlewareFunc {
	if a.WriteRate <= 0 {
		return func(next echo.HandlerFunc) echo.HandlerFunc { return next }
	}
	burst := a.WriteBurst
	if burst < 1 {
		burst = int(math.Ceil(a.WriteRate))
	}
	retry := strconv.Itoa(int(math.Ceil(1 / a.WriteRate)))
	store := middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
		Rate: rate.Limit(a.WriteRate), Burst: burst, ExpiresIn: 10 * time.Minute})
	return middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{
		Skipper: func(c echo.Context) bool {
			switch c.Request().Method {
			case http.MethodGet, http.MethodHead, http.MethodOptions:
				return true
			}
			return caller(c) == nil
		},
		IdentifierExtractor: func(c echo.Context) (string, error) { return strconv.FormatInt(caller(c).ID, 10), nil },
		DenyHandler: func(c echo.Context, _ string, _ error) error {
			c.Response().Header().Set("Retry-After", retry)
			return &Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
				Message: "too many writes from this token; retry after " + retry + " s"}
		},
		ErrorHandler: func(c echo.Context, err error) error { return err },
		Store:        store,
	})
}
