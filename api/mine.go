package api

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
	"github.com/owed/owed/notify"
)

// mineJSON is an author's view: a page of their items, and their budget today.
type mineJSON struct {
	Items      []mineItem `json:"items"`
	Budget     budgetJSON `json:"budget"`
	NextCursor *string    `json:"nextCursor"`
}

type budgetJSON struct {
	Limit    int64     `json:"limit"`
	Spent    int64     `json:"spent"`
	ResetsAt timestamp `json:"resetsAt"`
}

// mineStreamQuery are the query parameters of GET /api/listeners/mine/stream.
type mineStreamQuery struct {
	State  models.ItemState `query:"state" enum:"screenState"`
	Kind   models.Kind      `query:"kind" enum:"kind"`
	Limit  int              `query:"limit" minimum:"1" maximum:"500" default:"100"`
	Cursor string           `query:"cursor" description:"the nextCursor of the page before"`
}

type mineStreamParams struct {
	mineStreamQuery
	Ticket string `query:"ticket" description:"a stream ticket (POST /api/listeners/mine/ticket), instead of Authorization, for EventSource"`
}

type mineQueryParams struct {
	mineStreamQuery
	Wait int `query:"wait" minimum:"1" maximum:"60" description:"long poll: with a matching If-None-Match, hold the answer up to this many seconds until the view changes (200) or the wait ends (304)"`
}

// The view's page sizes, and the bounds of a long poll's wait.
const (
	mineDefaultLimit = 100
	mineMaxLimit     = 500
	maxWait          = 60 * time.Second
	pingEvery        = 15 * time.Second // a stream's comment line, so that proxies keep it open
	// minRecheck bounds how soon a waiter re-reads the view for time's sake alone, so that a
	// job that stays due cannot make it spin.
	minRecheck = time.Second
)

type mineQuery struct {
	state  models.ItemState
	kind   models.Kind
	limit  int
	cursor string // as given, for the ETag
	after  *models.MineCursor
	wait   time.Duration
}

// mineCursor is the opaque cursor of the view: the last item's place in its order.
type mineCursor struct {
	T int64       `json:"t"`
	K models.Kind `json:"k"`
	I int64       `json:"i"`
}

// parseMineQuery reads state, kind, limit, cursor and, for the long poll, wait.
func parseMineQuery(c echo.Context, withWait bool) (mineQuery, error) {
	var q mineQuery
	var err error
	if q.state, err = oneOf(c, "state", models.ItemStates...); err != nil {
		return q, err
	}
	if q.kind, err = oneOf(c, "kind", models.Kinds...); err != nil {
		return q, err
	}
	if q.limit, err = queryLimit(c, mineDefaultLimit, mineMaxLimit); err != nil {
		return q, err
	}
	var cur mineCursor
	ok, err := decodeCursor(c, &cur)
	if err != nil {
		return q, err
	}
	if ok {
		if models.KindRank(cur.K) < 0 || cur.I <= 0 {
			return q, invalid("cursor", "cursor is not one this server gave out")
		}
		q.cursor = c.QueryParam("cursor")
		q.after = &models.MineCursor{CreatedAt: cur.T, Kind: cur.K, ID: cur.I}
	}
	if withWait {
		if v := c.QueryParam("wait"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || time.Duration(n)*time.Second > maxWait {
				return q, invalid("wait", "wait must be a whole number of seconds from 1 to 60")
			}
			q.wait = time.Duration(n) * time.Second
		}
	}
	return q, nil
}

// mineState is an author's view at one version: what its ETag is made of, and the tag.
type mineState struct {
	v     models.MineVersion
	limit int64 // the author's effective daily limit
	etag  string
	now   time.Time
}

// readMine reads the version of u's view and its ETag, and wakes the runner for u when one of
// their jobs may be due.
func (a *API) readMine(ctx context.Context, u *models.User, q *mineQuery) (mineState, error) {
	now := a.now()
	v, err := a.Store.MineVersion(ctx, u.ID, now)
	if err != nil {
		return mineState{}, err
	}
	if v.Due(now) {
		a.Content.SweepAuthor(u.ID)
	}
	return mineState{v: v, limit: u.DailyLimit, etag: mineETag(u.ID, u.DailyLimit, &v, q), now: now}, nil
}

// recheckAt is when the view must be read again although nobody wrote: the UTC day's end, or
// when one of the author's jobs may come due.
func (st *mineState) recheckAt() time.Time {
	at := models.BudgetReset(st.now)
	if w := st.v.WakeAt(st.now); !w.IsZero() && w.Before(at) {
		at = w
	}
	if floor := st.now.Add(minRecheck); at.Before(floor) {
		at = floor
	}
	return at
}

// mineBody is the view's answer at st, kept by its ETag (mineCache).
func (a *API) mineBody(ctx context.Context, u *models.User, q *mineQuery, st *mineState) ([]byte, error) {
	cache := a.live.cache
	if body, ok := cache.get(st.etag); ok {
		return body, nil
	}
	items, next, err := a.Store.MinePage(ctx, u.ID, models.MineFilter{State: q.state, Kind: q.kind, Limit: q.limit, After: q.after, OwedJobs: &st.v.Jobs})
	if err != nil {
		return nil, err
	}
	deferred, err := a.deferral(ctx)
	if err != nil {
		return nil, err
	}
	out := mineJSON{Items: make([]mineItem, 0, len(items)), Budget: budgetJSON{Limit: st.limit, Spent: st.v.Spent, ResetsAt: timeStr(models.BudgetReset(st.now))}}
	var appeals map[itemRef]*appealJSON
	if st.v.Appeals != 0 {
		list, err := a.Store.AppealsOf(ctx, u.ID)
		if err != nil {
			return nil, err
		}
		appeals = appealsByItem(list)
	}
	for _, it := range items {
		m := mineItem{Kind: it.Kind, ID: it.ID, SongID: it.SongID, Title: it.Title, CreatedAt: timeStr(it.CreatedAt),
			State: stateOf(it.Verdict), Verdict: it.Verdict, Confidence: it.Confidence, Reason: it.Reason, Score: scoreOf(it.Score),
			Appeal: appeals[itemRef{it.Kind, it.ID}], Jobs: make([]jobBrief, 0, len(it.Jobs))}
		for _, j := range it.Jobs {
			// No lease: the ETag does not hash leases.
			b := jobBrief{Task: j.Task, Why: models.ShownWhy(st.v.Held, deferred, &j, time.Time{}), Attempts: j.Attempts}
			if j.Why == nil || *j.Why != models.WhyReview { // a moderator decides: no next attempt
				next := timeStr(j.DueAt)
				b.NextAttemptAt = &next
			}
			m.Jobs = append(m.Jobs, b)
		}
		out.Items = append(out.Items, m)
	}
	if next != nil {
		out.NextCursor = encodeCursor(mineCursor{T: next.CreatedAt, K: next.Kind, I: next.ID})
	}
	body, err := json.Marshal(&out)
	if err == nil {
		cache.put(st.etag, body)
	}
	return body, err
}

// mine lists the caller's own items with their verdicts, scores, owed jobs and budget. The
// ETag (mineETag) is read before the answer is built, so an answer is never older than its
// ETag and a 304 never hides a change. With wait=N and a matching If-None-Match the answer is
// held (holdMine).
func (a *API) mine(c echo.Context) error {
	if err := refuseBody(c); err != nil {
		return err
	}
	q, err := parseMineQuery(c, true)
	if err != nil {
		return err
	}
	u := caller(c)
	ctx := c.Request().Context()
	inm := c.Request().Header.Get("If-None-Match")
	var w *notify.Watch
	if q.wait > 0 && inm != "" {
		// Watched before the version is read, so that no change falls between the two.
		w = a.Notify.Watch(u.ID)
		defer func() { w.Close() }()
	}
	st, err := a.readMine(ctx, u, &q)
	if err != nil {
		return err
	}
	if w != nil && etagMatches(inm, st.etag) {
		var gone bool
		if u, st, gone, err = a.holdMine(c, u, &q, st, inm, &w); gone || err != nil {
			return err
		}
	}
	res := c.Response()
	res.Header().Set("ETag", st.etag)
	res.Header().Set("Cache-Control", "private, no-cache")
	if etagMatches(inm, st.etag) {
		return c.NoContent(http.StatusNotModified)
	}
	body, err := a.mineBody(ctx, u, &q, &st)
	if err != nil {
		return err
	}
	res.Header().Set(echo.HeaderContentLength, strconv.Itoa(len(body)))
	return c.JSONBlob(http.StatusOK, body)
}

// holdMine holds a long poll whose If-None-Match names the view at st, re-reading it when the
// notifier wakes it, until the tag no longer matches (200), the wait ends or the server shuts
// down (304). gone reports that the client went away. *w moves on at each wake.
func (a *API) holdMine(c echo.Context, u *models.User, q *mineQuery, st mineState, inm string, w **notify.Watch) (*models.User, mineState, bool, error) {
	ctx := c.Request().Context()
	release, err := a.holdSlot(c, u.ID, kindLongPoll)
	if err != nil {
		return u, st, false, err
	}
	defer release()
	cred := credOf(c)
	until := a.credUntil(ctx, cred)
	deadline := st.now.Add(q.wait)
	closing := a.closing()
	outlive(c.Response(), q.wait+time.Minute)
	for etagMatches(inm, st.etag) && a.now().Before(deadline) {
		recheck := st.recheckAt()
		if !until.IsZero() {
			recheck = earliest(recheck, until)
		}
		timer, stop := a.Clock.NewTimer(earliest(deadline, recheck).Sub(a.now()))
		var mark int64 // the wake's: reads that started after it are shared
		select {
		case <-(*w).C():
			mark = (*w).At()
		case <-timer:
			mark = notify.Mark()
			if !a.now().Before(deadline) && (until.IsZero() || a.now().Before(until)) {
				stop()
				return u, st, false, nil
			}
		case <-ctx.Done():
			stop()
			return u, st, true, nil // the client is gone
		case <-closing:
			stop()
			return u, st, false, nil
		}
		stop()
		// Every wake checks the credential again and shares reads begun after it; Next
		// watches the change after this one, so none is missed.
		*w = (*w).Next()
		var view liveView
		if err := a.retrying(ctx, func() (err error) { view, err = a.liveRead(u.ID, cred, q, mark); return err }); err != nil {
			if errors.Is(err, errLiveUnavailable) {
				return u, st, false, retryAfter(c, liveRetryAfter, errLiveUnavailable)
			}
			if ctx.Err() != nil {
				return u, st, true, nil
			}
			return u, st, false, err
		}
		u, st, until = view.u, view.st, view.until
	}
	return u, st, false, nil
}

// mineStream serves the author's view as server-sent events: an event "mine" (id: the ETag,
// data: the view) at once unless Last-Event-ID names the current tag, then one per change; a
// ": ping" every 15 s keeps proxies from closing it. It ends with an `event: error` when its
// credential is revoked or the database stays unreachable.
func (a *API) mineStream(c echo.Context) error {
	if err := refuseBody(c); err != nil {
		return err
	}
	q, err := parseMineQuery(c, false)
	if err != nil {
		return err
	}
	u := caller(c)
	req := c.Request()
	ctx := req.Context()
	release, err := a.holdSlot(c, u.ID, kindStream)
	if err != nil {
		return err
	}
	defer release()
	cred := credOf(c)
	s := &mineStreamer{a: a, u: u, q: q, w: a.Notify.Watch(u.ID), last: req.Header.Get("Last-Event-ID"), cred: cred}
	defer func() { s.w.Close() }()
	if s.st, err = a.readMine(ctx, u, &q); err != nil {
		return err
	}
	s.until = a.credUntil(ctx, cred)
	res := c.Response()
	h := res.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx would otherwise buffer the events
	res.WriteHeader(http.StatusOK)
	rc := outlive(res, time.Minute)
	s.send = func(b []byte) bool {
		// Each write gets its own deadline: a client that stops reading is dropped.
		_ = rc.SetWriteDeadline(time.Now().Add(time.Minute))
		if _, err := res.Write(b); err != nil {
			return false
		}
		res.Flush()
		return true
	}
	if s.send([]byte(": owed\n\n")) {
		s.run(ctx)
	}
	return nil
}

// mineStreamer is one stream of an author's view, with what it needs between events.
type mineStreamer struct {
	a     *API
	u     *models.User
	q     mineQuery
	st    mineState
	w     *notify.Watch
	last  string // the tag of the last event the client has
	send  func([]byte) bool
	cred  models.Credential // what the stream was opened with, checked again at every wake
	until time.Time         // when that credential ends by itself (a session's expiry), or zero
}

// run sends events until ctx ends, the server shuts down, a write fails, or fail ends it.
func (s *mineStreamer) run(ctx context.Context) {
	a := s.a
	nextPing := a.now().Add(pingEvery)
	closing := a.closing()
	for {
		if s.st.etag != s.last {
			var body []byte
			err := a.retrying(ctx, func() (err error) { body, err = a.liveBody(s.u, &s.q, &s.st); return err })
			if err != nil {
				s.fail(ctx, err)
				return
			}
			ev := make([]byte, 0, len(body)+64)
			ev = append(ev, "event: mine\nid: "...)
			ev = append(ev, s.st.etag...)
			ev = append(ev, "\ndata: "...)
			ev = append(append(ev, body...), "\n\n"...)
			if !s.send(ev) {
				return
			}
			s.last = s.st.etag
		}
		recheck := s.st.recheckAt()
		if !s.until.IsZero() {
			recheck = earliest(recheck, s.until)
		}
		var mark int64 // the wake's: reads that started after it are shared
		woke := false
		for reread := false; !reread; {
			timer, stop := a.Clock.NewTimer(earliest(nextPing, recheck).Sub(a.now()))
			select {
			case <-s.w.C():
				reread, mark, woke = true, s.w.At(), true
			case <-timer:
				mark = notify.Mark()
				now := a.now()
				if !now.Before(nextPing) {
					if !s.send([]byte(": ping\n\n")) {
						stop()
						return
					}
					nextPing = now.Add(pingEvery)
				}
				reread = !now.Before(recheck)
			case <-ctx.Done():
				stop()
				return
			case <-closing:
				stop()
				return
			}
			stop()
		}
		// A woken stream lets the author's changes settle (StreamSettle), then reads once after
		// the last of them; Next watches the change after that, so none is missed.
		if woke && !a.settle(ctx, closing) {
			return
		}
		s.w = s.w.Next()
		for woke && s.w.At() != 0 {
			mark = s.w.At()
			s.w = s.w.Next()
		}
		var view liveView
		if err := a.retrying(ctx, func() (err error) { view, err = a.liveRead(s.u.ID, s.cred, &s.q, mark); return err }); err != nil {
			s.fail(ctx, err)
			return
		}
		s.u, s.st, s.until = view.u, view.st, view.until
	}
}

// DefaultStreamSettle is API.StreamSettle's default: one write's changes in quick succession
// (an item, then its verdict) are sent as one event.
const DefaultStreamSettle = 25 * time.Millisecond

// settle waits StreamSettle on the wall clock, and reports false when ctx ends or the server
// shuts down first.
func (a *API) settle(ctx context.Context, closing <-chan struct{}) bool {
	t := time.NewTimer(a.StreamSettle)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-closing:
	}
	return false
}

// fail ends the stream for err: an `event: error` in the error shape (unauthorized, or
// unavailable with a retry: hint), unless the client or the server is what ended it.
func (s *mineStreamer) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	switch {
	case errors.Is(err, errRevoked):
		s.a.Log.Info("mine stream: credential revoked; ending the stream", "userId", s.u.ID)
		s.send(errorEvent(errRevoked, 0))
	default:
		s.a.Log.Warn("mine stream: ending the stream", "userId", s.u.ID, "err", err)
		s.send(errorEvent(errLiveUnavailable, liveRetryAfter))
	}
}

// outlive lifts the server's timeouts off a request that waits: no read deadline, and a write
// deadline d from now.
func outlive(res *echo.Response, d time.Duration) *http.ResponseController {
	rc := http.NewResponseController(res.Writer)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Now().Add(d))
	return rc
}

// live is what the views share.
type live struct {
	closed  chan struct{}
	closeMu sync.Once
	cache   *mineCache
	caps    liveCaps  // held streams and long polls, per user and in all (mine_live.go)
	co      coalescer // shared re-reads of woken waiters
}

func (a *API) closing() <-chan struct{} { return a.live.closed }

// CloseStreams ends every stream and answers every held long poll (304), now and from now on:
// the server's graceful shutdown waits for open requests.
func (a *API) CloseStreams() {
	a.live.closeMu.Do(func() { close(a.live.closed) })
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// mineCacheBytes bounds the answers of `mine` kept in memory, zstd-packed (2 to 4 KB a view of
// 100 items, so some ten thousand of them).
const mineCacheBytes = 32 << 20

// Both are safe for concurrent use.
var (
	mineAnswerPacker, _   = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	mineAnswerUnpacker, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0))
)

// mineCache keeps recent answers of the author's view by ETag, least recently used first out,
// within a bound in bytes. An ETag's version never comes back, so its answer never goes stale.
type mineCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	ll    *list.List // front: most recently used
	byTag map[string]*list.Element
}

type mineCached struct {
	tag    string
	packed []byte
}

func newMineCache(max int64) *mineCache {
	return &mineCache{max: max, ll: list.New(), byTag: map[string]*list.Element{}}
}

func cost(tag string, packed []byte) int64 { return int64(len(tag) + len(packed) + 64) }

// get is the answer kept under tag, if any (the caller's own copy).
func (c *mineCache) get(tag string) ([]byte, bool) {
	c.mu.Lock()
	e, ok := c.byTag[tag]
	if ok {
		c.ll.MoveToFront(e)
	}
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	body, err := mineAnswerUnpacker.DecodeAll(e.Value.(*mineCached).packed, nil)
	return body, err == nil
}

// put keeps body under tag, dropping the least recently used answers past the bound; an answer
// whose packed size is over a sixteenth of the bound is not kept.
func (c *mineCache) put(tag string, body []byte) {
	packed := mineAnswerPacker.EncodeAll(body, make([]byte, 0, len(body)/4))
	if cost(tag, packed) > c.max/16 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byTag[tag]; ok {
		return
	}
	c.byTag[tag] = c.ll.PushFront(&mineCached{tag: tag, packed: packed})
	c.size += cost(tag, packed)
	for c.size > c.max {
		old := c.ll.Remove(c.ll.Back()).(*mineCached)
		delete(c.byTag, old.tag)
		c.size -= cost(old.tag, old.packed)
	}
}

type jobBrief struct {
	Task          models.Task `json:"task" enum:"task"`
	Why           *models.Why `json:"why" enum:"why"`
	Attempts      int         `json:"attempts"`
	NextAttemptAt *timestamp  `json:"nextAttemptAt" description:"null while the job waits for a moderator (why review)"`
}

type mineItem struct {
	Kind       models.Kind      `json:"kind" enum:"kind"`
	ID         int64            `json:"id"`
	SongID     *int64           `json:"songId,omitempty"`
	Title      string           `json:"title,omitempty"`
	CreatedAt  timestamp        `json:"createdAt"`
	State      models.ItemState `json:"state" enum:"screenState"`
	Verdict    *models.Verdict  `json:"verdict" enum:"verdict"`
	Confidence *float64         `json:"confidence"`
	Reason     *string          `json:"reason" description:"a moderator's public reason for the verdict; null when none"`
	Score      *scoreJSON       `json:"score"`
	Jobs       []jobBrief       `json:"jobs"`
	Appeal     *appealJSON      `json:"appeal" description:"your appeal of the item's block and its outcome; null when none"`
}

// mineETag is the strong ETag of an author's view at version v: a hash of the author, the
// filters and page, their daily limit, and of v the day, change counter, spend and holds.
func mineETag(userID, limit int64, v *models.MineVersion, q *mineQuery) string {
	b := make([]byte, 0, 128)
	b = append(b, "mine/3"...) // a new shape of the answer must change this, or old ETags would match it
	b = binary.AppendVarint(b, userID)
	// The filters and the page: another page of one view is another answer.
	b = appendString(b, string(q.state))
	b = appendString(b, string(q.kind))
	b = binary.AppendVarint(b, int64(q.limit))
	b = appendString(b, q.cursor)
	b = binary.AppendVarint(b, limit)
	b = appendString(b, v.Day)
	b = binary.AppendVarint(b, v.Version)
	b = binary.AppendVarint(b, v.Spent)
	if v.Appeals != 0 { // only then, so ETags made before appeals existed still match
		b = append(b, 'a')
		b = binary.AppendVarint(b, v.Appeals)
	}
	b = strconv.AppendBool(b, v.Held.Screen)
	b = strconv.AppendBool(b, v.Held.Score)
	sum := sha256.Sum256(b)
	var tag [2 + 24]byte
	tag[0], tag[len(tag)-1] = '"', '"'
	base64.RawURLEncoding.Encode(tag[1:len(tag)-1], sum[:18])
	return string(tag[:])
}

// appendString appends s with its length, so that no two sequences of strings encode alike.
func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// etagMatches reports whether an If-None-Match header names etag (weak comparison), or is *.
func etagMatches(header, etag string) bool {
	for header != "" {
		var t string
		t, header, _ = strings.Cut(header, ",")
		t = strings.TrimSpace(t)
		if t == etag || t == "*" || (strings.HasPrefix(t, "W/") && t[2:] == etag) {
			return true
		}
	}
	return false
}
