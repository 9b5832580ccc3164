package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/owed/owed/models"
	"github.com/owed/owed/notify"
)

// Default caps of held connections (OWED_STREAMS_PER_USER, OWED_MAX_STREAMS).
const (
	DefaultStreamsPerUser = 8
	DefaultMaxStreams     = 10000
)

// The kinds of held connection, as the gauge owed_streams_open labels them.
const (
	kindStream   = "stream"
	kindLongPoll = "long_poll"
)

const (
	// liveRetryFor is how long a waiter retries a failed re-read before it answers unavailable.
	liveRetryFor = 5 * time.Second
	// The pauses between retries double from liveRetryFirst, short because after a failover
	// each dead pooled connection fails one read.
	liveRetryFirst = 25 * time.Millisecond
	liveRetryMax   = time.Second
	liveRetryAfter = 5 * time.Second  // Retry-After (and retry:) with unavailable
	capRetryAfter  = 10 * time.Second // Retry-After of a refused stream or long poll
	readTimeout    = 10 * time.Second // one shared re-read, detached from any one waiter
)

var (
	errRevoked = &Error{Status: http.StatusUnauthorized, Code: "unauthorized",
		Message: "the credential this connection was opened with no longer works (signed out, token rotated, user disabled or session expired)"}
	errLiveUnavailable = &Error{Status: http.StatusServiceUnavailable, Code: "unavailable",
		Message: "the database is not answering; retry shortly"}
	errTooManyStreams = &Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
		Message: "too many streams and held long polls for this user; close one, or retry later"}
	errStreamsFull = &Error{Status: http.StatusServiceUnavailable, Code: "unavailable",
		Message: "this server holds as many streams and long polls as it can; retry later"}
)

// retryAfter sets Retry-After (whole seconds) and returns e.
func retryAfter(c echo.Context, d time.Duration, e *Error) *Error {
	c.Response().Header().Set("Retry-After", strconv.Itoa(int(d.Round(time.Second)/time.Second)))
	return e
}

// refuseHold is a refusal of the caps, closing the connection so that a client retrying at
// once cannot keep the listener's slots.
func refuseHold(c echo.Context, e *Error) *Error {
	c.Response().Header().Set(echo.HeaderConnection, "close")
	return retryAfter(c, capRetryAfter, e)
}

// refuseBody answers 400, closing the connection, to a GET on a live route that sends a body:
// a held request is never read again, so a trickled body would pin its socket.
func refuseBody(c echo.Context) error {
	req := c.Request()
	if req.ContentLength != 0 || len(req.TransferEncoding) > 0 {
		c.Response().Header().Set(echo.HeaderConnection, "close")
		return invalid("body", "this route takes no request body")
	}
	return nil
}

// liveCaps counts held streams and long polls, per user and in all.
type liveCaps struct {
	mu     sync.Mutex
	byUser map[int64]int
	total  int
	open   *prometheus.GaugeVec
	// full are the token hashes refused for their user's cap until one of its slots frees,
	// refused again before any database read (earlyRefusal).
	full   map[string]int64
	fullOf map[int64][]string // the keys of full, by user
}

// holdSlot takes a slot for a held connection of u: released by the func it returns (once),
// or refused with 429 (the user's cap) or 503 (the process's), each with Retry-After.
func (a *API) holdSlot(c echo.Context, userID int64, kind string) (func(), error) {
	l := a.live
	perUser, max := a.StreamsPerUser, a.MaxStreams
	cp := &l.caps
	cp.mu.Lock()
	if cp.byUser[userID] >= perUser {
		if cred := credOf(c); cred.Kind == models.CredToken && len(cp.full) < 100000 {
			if _, ok := cp.full[cred.Hash]; !ok {
				cp.full[cred.Hash] = userID
				cp.fullOf[userID] = append(cp.fullOf[userID], cred.Hash)
			}
		}
		cp.mu.Unlock()
		return nil, refuseHold(c, errTooManyStreams)
	}
	if cp.total >= max {
		cp.mu.Unlock()
		return nil, refuseHold(c, errStreamsFull)
	}
	cp.byUser[userID]++
	cp.total++
	cp.mu.Unlock()
	g := cp.open.WithLabelValues(kind)
	g.Inc()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.Dec()
			cp.mu.Lock()
			defer cp.mu.Unlock()
			cp.total--
			if cp.byUser[userID]--; cp.byUser[userID] <= 0 {
				delete(cp.byUser, userID)
			}
			for _, h := range cp.fullOf[userID] {
				delete(cp.full, h)
			}
			delete(cp.fullOf, userID)
		})
	}, nil
}

// atUserCap reports whether userID holds as many streams and held long polls here as they may.
func (a *API) atUserCap(userID int64) bool {
	cp := &a.live.caps
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.byUser[userID] >= a.StreamsPerUser
}

// earlyRefusal answers 429 at once, before authentication, to a bearer token whose user was
// refused for their cap and has not freed a slot since, on a request that would be held (a
// stream, or a long poll with wait and If-None-Match).
func (a *API) earlyRefusal(c echo.Context, token string) error {
	req := c.Request()
	if req.Method != http.MethodGet {
		return nil
	}
	switch req.URL.Path {
	case ticketPath:
	case "/api/listeners/mine":
		if req.URL.Query().Get("wait") == "" || req.Header.Get("If-None-Match") == "" {
			return nil
		}
	default:
		return nil
	}
	cp := &a.live.caps
	h := models.HashToken(token)
	cp.mu.Lock()
	userID, full := cp.full[h]
	full = full && cp.byUser[userID] >= a.StreamsPerUser
	cp.mu.Unlock()
	if full {
		return refuseHold(c, errTooManyStreams)
	}
	return nil
}

// coalescer shares one read among the waiters that want it. Unlike a plain singleflight, a
// waiter only gets a read that began after the wake that woke it (notify's Watch.At), so no
// change can be missed.
type coalescer struct {
	mu      sync.Mutex
	flights map[string]*flight
}

type flight struct {
	start int64
	done  chan struct{}
	val   any
	err   error
}

// keepDone is how long a finished read stays to be shared with waiters that come late.
const keepDone = 2 * time.Second

// do returns the result of a read of key that started after mark, running fn if none did.
func (co *coalescer) do(key string, mark int64, fn func() (any, error)) (any, error) {
	for {
		co.mu.Lock()
		f := co.flights[key]
		if f != nil && f.err != nil {
			select {
			case <-f.done:
				f = nil // a failed read is shared with those that waited for it, never kept
			default:
			}
		}
		if f != nil && f.start > mark {
			co.mu.Unlock()
			<-f.done
			return f.val, f.err
		}
		if f != nil {
			select {
			case <-f.done:
			default:
				// An older read is running: wait for it, then start (or share) a newer one.
				co.mu.Unlock()
				<-f.done
				continue
			}
		}
		nf := &flight{start: notify.Mark(), done: make(chan struct{})}
		co.flights[key] = nf
		co.mu.Unlock()
		val, err := fn()
		co.mu.Lock() // f.err is read under mu once done
		nf.val, nf.err = val, err
		close(nf.done)
		co.mu.Unlock()
		time.AfterFunc(keepDone, func() {
			co.mu.Lock()
			if co.flights[key] == nf {
				delete(co.flights, key)
			}
			co.mu.Unlock()
		})
		return nf.val, nf.err
	}
}

// credOf is the credential the request was authenticated with (authenticate sets it).
func credOf(c echo.Context) models.Credential {
	cr, _ := c.Get(credKey).(models.Credential)
	return cr
}

// liveView is what a waiter learns at a wake: the user as they are now, the view's state, and
// when the credential ends by itself (a session's expiry; zero for a token).
type liveView struct {
	u     *models.User
	st    mineState
	until time.Time
}

type credRead struct {
	u     models.User
	until time.Time
}

// liveRead reads what a woken waiter needs, shared by credential and by view, so N held
// connections of one author cost one read per change; errRevoked when the credential no
// longer works.
func (a *API) liveRead(userID int64, cred models.Credential, q *mineQuery, mark int64) (liveView, error) {
	l := a.live
	cv, err := l.co.do("c|"+strconv.FormatInt(userID, 10)+"|"+cred.Kind+"|"+cred.Hash, mark, detached(func(ctx context.Context) (any, error) {
		u, until, err := a.Store.CheckCredential(ctx, userID, cred)
		return credRead{u, until}, err
	}))
	if errors.Is(err, models.ErrNotFound) {
		return liveView{}, errRevoked
	} else if err != nil {
		return liveView{}, err
	}
	cr := cv.(credRead)
	u := cr.u
	key := "v|" + strconv.FormatInt(userID, 10) + "|" + strconv.FormatInt(u.DailyLimit, 10) + "|" + string(q.state) + "|" +
		string(q.kind) + "|" + strconv.Itoa(q.limit) + "|" + q.cursor
	sv, err := l.co.do(key, mark, detached(func(ctx context.Context) (any, error) { return a.readMine(ctx, &u, q) }))
	if err != nil {
		return liveView{}, err
	}
	return liveView{u: &u, st: sv.(mineState), until: cr.until}, nil
}

// liveBody is mineBody shared: waiters that need the same tag's answer at once build it once.
func (a *API) liveBody(u *models.User, q *mineQuery, st *mineState) ([]byte, error) {
	v, err := a.live.co.do("b|"+st.etag, 0, detached(func(ctx context.Context) (any, error) { return a.mineBody(ctx, u, q, st) }))
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// detached runs read under its own readTimeout, apart from any one waiter.
func detached[T any](read func(context.Context) (T, error)) func() (any, error) {
	return func() (any, error) {
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		defer cancel()
		return read(ctx)
	}
}

// liveBackoff is how a waiter's failed re-read is tried again (retrying).
var liveBackoff = models.Backoff{For: liveRetryFor, Pause: liveRetryFirst, MaxPause: liveRetryMax}

// retrying runs read until it succeeds, is refused for good (errRevoked), ctx ends or the
// server closes; past liveRetryFor it gives up with errLiveUnavailable.
func (a *API) retrying(ctx context.Context, read func() error) error {
	err := read()
	if err == nil || errors.Is(err, errRevoked) {
		return err
	}
	tries, cancel := context.WithCancel(ctx) // ended by the server closing too
	defer cancel()
	go func() {
		select {
		case <-a.closing():
			cancel()
		case <-tries.Done():
		}
	}()
	first := true
	err = liveBackoff.Do(tries, a.Clock, func() (bool, error) {
		if !first {
			err = read()
		}
		first = false
		if err != nil && !errors.Is(err, errRevoked) {
			a.Log.Warn("mine: re-read failed; retrying", "err", err)
			return true, err
		}
		return false, err
	})
	switch {
	case err == nil || errors.Is(err, errRevoked):
		return err
	case ctx.Err() != nil:
		return ctx.Err()
	case tries.Err() == nil:
		a.Log.Warn("mine: the database stays unreachable; ending the waiter", "err", err)
	}
	return errLiveUnavailable
}

// credUntil is when a session ends by itself (zero for a token, or when it cannot be read now).
func (a *API) credUntil(ctx context.Context, cred models.Credential) time.Time {
	if cred.Kind != models.CredSession {
		return time.Time{}
	}
	t, err := a.Store.SessionExpiry(ctx, cred.Hash)
	if err != nil {
		return time.Time{}
	}
	return t
}

// errorEvent is a stream's last event: `event: error`, data in the error shape, and for a
// fault a retry: hint so EventSource reconnects after it.
func errorEvent(e *Error, retry time.Duration) []byte {
	data, _ := json.Marshal(errorJSON{e.detail()})
	b := make([]byte, 0, len(data)+64)
	b = append(b, "event: error\n"...)
	if retry > 0 {
		b = append(b, "retry: "...)
		b = strconv.AppendInt(b, retry.Milliseconds(), 10)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

func (a *API) newLive() *live {
	return &live{closed: make(chan struct{}), cache: newMineCache(mineCacheBytes),
		caps: liveCaps{byUser: map[int64]int{}, full: map[string]int64{}, fullOf: map[int64][]string{}, open: a.liveGauge()},
		co:   coalescer{flights: map[string]*flight{}}}
}

// liveGauge is owed_streams_open, registered on the API's registry when there is one.
func (a *API) liveGauge() *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "owed_streams_open",
		Help: "Streams and held long polls of authors' views open in this process, by kind (stream, long_poll)."}, []string{"kind"})
	if a.Metrics != nil && a.Metrics.Registry != nil {
		_ = a.Metrics.Registry.Register(g)
	}
	for _, k := range []string{kindStream, kindLongPoll} {
		g.WithLabelValues(k)
	}
	return g
}

var (
	corsAllowHeaders  = []string{echo.HeaderAuthorization, echo.HeaderContentType, "If-None-Match", "Last-Event-ID", "Idempotency-Key"}
	corsExposeHeaders = []string{"ETag", "Retry-After", echo.HeaderLocation, headerReplayed}
)

// corsPaths are the routes browsers on other origins may call: the listener (author) routes
// and the public ones. Never /api/admin/*, the session or the bots' routes.
func corsPath(p string) bool {
	for _, pre := range []string{"/api/listeners/", "/api/songs", "/api/pitches"} {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	return false
}

// cors is Echo's CORS middleware, strict: only the exact origins configured, only corsPath,
// no credentials (never the session cookie).
func (a *API) cors() echo.MiddlewareFunc {
	return middleware.CORSWithConfig(middleware.CORSConfig{
		Skipper:       func(c echo.Context) bool { return !corsPath(c.Request().URL.Path) },
		AllowOrigins:  a.CORSOrigins,
		AllowMethods:  []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete},
		AllowHeaders:  corsAllowHeaders,
		ExposeHeaders: corsExposeHeaders,
		MaxAge:        600,
	})
}
