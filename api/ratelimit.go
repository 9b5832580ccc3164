package api

import (
	"math"
	"net/http"
	"strconv"
	"sync"
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
	store := &buckets{limit: rate.Limit(a.WriteRate), burst: burst, forget: 10 * time.Minute, now: a.now,
		of: map[string]*bucket{}}
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

// buckets are the callers' token buckets on the API's clock (not Echo's store: the wall clock),
// each forgotten after forget unused.
type buckets struct {
	limit  rate.Limit
	burst  int
	forget time.Duration
	now    func() time.Time

	mu      sync.Mutex
	of      map[string]*bucket
	sweptAt time.Time
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

// Allow takes a token from id's bucket, reporting whether there was one.
func (b *buckets) Allow(id string) (bool, error) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.sweptAt) > b.forget {
		// A bucket unused for forget is full again: dropping it changes no answer.
		for k, o := range b.of {
			if now.Sub(o.used) > b.forget {
				delete(b.of, k)
			}
		}
		b.sweptAt = now
	}
	o := b.of[id]
	if o == nil {
		o = &bucket{lim: rate.NewLimiter(b.limit, b.burst)}
		b.of[id] = o
	}
	o.used = now
	return o.lim.AllowN(now, 1), nil
}
