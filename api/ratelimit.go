package api

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"
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

// Sign-in limits (POST /api/session): per client address and per token, each a token bucket.
const (
	signInAddrBurst = 20
	signInAddrEvery = 3 * time.Second // one more sign-in per address every 3 s
	signInTokBurst  = 5
	signInTokEvery  = 30 * time.Second // one more per token every 30 s
	// signInKeys bounds each limiter's memory: past it the least recently seen key is forgotten.
	signInKeys = 10_000
)

// keyedLimiter is a token bucket per key on owed's clock (sign-ins by address and by token,
// writes by user), holding at most a fixed number of keys: past it the least recently used goes.
type keyedLimiter struct {
	mu    sync.Mutex
	keys  *lru.Cache[string, *rate.Limiter]
	every rate.Limit
	burst int
}

func newKeyedLimiter(every time.Duration, burst, keys int) *keyedLimiter {
	c, err := lru.New[string, *rate.Limiter](keys)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &keyedLimiter{keys: c, every: rate.Every(every), burst: burst}
}

// take spends one of key's tokens at now, or tells how long until one is free.
func (k *keyedLimiter) take(key string, now time.Time) (ok bool, wait time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l, found := k.keys.Get(key)
	if !found {
		l = rate.NewLimiter(k.every, k.burst)
		k.keys.Add(key, l)
	}
	r := l.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// signInLimits are the sign-in limiters of one API.
type signInLimits struct {
	addr, toks *keyedLimiter
}

// addrKey is the sign-in limit's key for a client address: IPv4 as it is, IPv6 its /64.
func addrKey(addr string) string {
	ip := net.ParseIP(addr)
	if ip == nil || ip.To4() != nil {
		return addr
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// tooManySignIns is the 429 of a refused sign-in, with Retry-After in whole seconds.
func tooManySignIns(wait time.Duration) (*Error, string) {
	secs := strconv.Itoa(max(1, int(math.Ceil(wait.Seconds()))))
	return &Error{Status: http.StatusTooManyRequests, Code: "rate_limited", Message: "too many sign-ins; retry after " + secs + " s"}, secs
}
