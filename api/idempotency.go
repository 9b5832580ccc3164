package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

// DefaultIdempotencyTTL is OWED_IDEMPOTENCY_TTL's default: how long a key's answer is kept.
const DefaultIdempotencyTTL = 24 * time.Hour

// The headers of Idempotency-Key (the IETF httpapi draft's), and of a replayed answer.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerReplayed       = "Idempotent-Replayed"
)

// keptHeaders are the headers of an answer kept with it for replay.
var keptHeaders = []string{echo.HeaderContentType, echo.HeaderLocation, "ETag", echo.HeaderCacheControl}

var (
	errIdemMismatch = &Error{Status: http.StatusUnprocessableEntity, Code: "idempotency_mismatch",
		Message: "this Idempotency-Key was used for another request; use a new key for a new request", Field: headerIdempotencyKey}
	errIdemInFlight = &Error{Status: http.StatusConflict, Code: "idempotency_in_flight",
		Message: "the first request with this Idempotency-Key is still running; try again shortly", Field: headerIdempotencyKey}
	errIdemNotKept = &Error{Status: http.StatusConflict, Code: "idempotency_answer_not_kept",
		Message: "the first request with this Idempotency-Key succeeded; its answer is not kept (it showed a secret once, or was lost), so read the resource instead", Field: headerIdempotencyKey}
)

// provisionalKey holds a handler's provisional answer (see provisional).
const provisionalKey = "owed.idem.provisional"

// provisional tells the Idempotency-Key middleware the answer to keep in the write's own
// transaction, from what it made, should nothing after the commit be done.
func provisional(c echo.Context, f func(made []any) (int, any)) {
	c.Set(provisionalKey, f)
}

// madeOf is the first value of type T a transaction made (zero when none).
func madeOf[T any](made []any) T {
	for _, m := range made {
		if v, ok := m.(T); ok {
			return v
		}
	}
	var zero T
	return zero
}

// writeRequest marks every write of a signed-in caller as a client's request for the store, and
// carries out its Idempotency-Key (1–255 printable characters, the caller's own): the first
// request's answer is kept; a repeat (same method, path, query and canonicalJSON body) within
// the TTL is answered with it and Idempotent-Replayed: true; another request with the key 422;
// a repeat while the first runs 409. A failure that wrote nothing keeps nothing. An answer that
// shows a secret once (secretAnswer), or any no-store one, is never kept: a repeat says that the
// first succeeded instead.
func (a *API) writeRequest(method, path string) echo.MiddlewareFunc {
	secret := secretAnswer(method, path)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			u := caller(c)
			key, given := req.Header[http.CanonicalHeaderKey(headerIdempotencyKey)]
			if u == nil || !given {
				r := &models.Request{}
				c.SetRequest(req.WithContext(models.WithRequest(req.Context(), r)))
				return next(c)
			}
			k, err := idempotencyKey(key)
			if err != nil {
				return err
			}
			fp, err := fingerprint(req)
			if err != nil {
				return err
			}
			ctx := req.Context()
			state, lease, kept, err := a.Store.IdemBegin(ctx, u.ID, k, fp, a.now(), a.IdempotencyTTL)
			if err != nil {
				return err
			}
			switch state {
			case models.IdemMismatch:
				return errIdemMismatch
			case models.IdemInFlight:
				c.Response().Header().Set("Retry-After", "1")
				return errIdemInFlight
			case models.IdemNotKept:
				return errIdemNotKept
			case models.IdemReplay:
				return replay(c, kept)
			}
			// Run it, keeping in the write's transaction what the client would be told.
			r := &models.Request{Hook: func(ctx context.Context, tx *models.Store, made []any) error {
				var ans *models.IdemAnswer
				if f, ok := c.Get(provisionalKey).(func([]any) (int, any)); ok && !secret {
					status, v := f(made)
					ans = &models.IdemAnswer{Status: status}
					if v != nil {
						b, err := jsonBody(v)
						if err != nil {
							return err
						}
						ans.Body, ans.Headers = b, map[string]string{echo.HeaderContentType: echo.MIMEApplicationJSON}
					}
				}
				return tx.IdemKeep(ctx, u.ID, k, lease, ans)
			}}
			c.SetRequest(req.WithContext(models.WithRequest(ctx, r)))
			rec := &recorder{ResponseWriter: c.Response().Writer}
			c.Response().Writer = rec
			err = next(c)
			c.Response().Writer = rec.ResponseWriter
			// The answer is kept past the request's end: the client may be gone, the key not.
			a.settleAnswer(context.WithoutCancel(ctx), c, u.ID, k, lease, rec, err != nil, secret)
			return err
		}
	}
}

// canonicalJSON is a JSON body in one form whatever its whitespace, key order or escapes; a body
// that is not JSON is taken as it is.
func canonicalJSON(body []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // numbers keep their text: 1.0 and 1 stay two requests, as a decimal may mean
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return body
	}
	b, err := json.Marshal(v) // objects' keys sorted
	if err != nil {
		return body
	}
	return b
}

// fingerprint is what a repeat must match: method, path, query and body (left to be read again).
func fingerprint(req *http.Request) (string, error) {
	body, err := readBody(req)
	if err != nil {
		return "", err
	}
	sum := sha256.New()
	io.WriteString(sum, req.Method+" "+req.URL.Path+"?"+req.URL.RawQuery+"\n")
	sum.Write(canonicalJSON(body))
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// replay answers a repeat with the kept answer, saying so (Idempotent-Replayed).
func replay(c echo.Context, kept models.IdemAnswer) error {
	h := c.Response().Header()
	for name, v := range kept.Headers {
		h.Set(name, v)
	}
	h.Set(headerReplayed, "true")
	if len(kept.Body) == 0 {
		return c.NoContent(kept.Status)
	}
	return c.Blob(kept.Status, h.Get(echo.HeaderContentType), kept.Body)
}

// settleAnswer ends the request's hold on its key: the answer is kept for repeats, unless a
// secret or no-store; a failed write's key is forgotten unless it committed.
func (a *API) settleAnswer(ctx context.Context, c echo.Context, userID int64, k string, lease int64, rec *recorder, failed, secret bool) {
	status := c.Response().Status
	switch {
	case failed || status >= 500:
		// Committed (end the hold) or not (forget the key): one of the two finds its row.
		a.settleKey(func() error { return a.Store.IdemFinish(ctx, userID, k, lease, nil) })
		a.settleKey(func() error { return a.Store.IdemRelease(ctx, userID, k, lease) })
	case secret || strings.Contains(c.Response().Header().Get(echo.HeaderCacheControl), "no-store"):
		a.settleKey(func() error { return a.Store.IdemKeep(ctx, userID, k, lease, nil) })
		a.settleKey(func() error { return a.Store.IdemFinish(ctx, userID, k, lease, nil) })
	default:
		ans := &models.IdemAnswer{Status: status, Body: rec.body.Bytes(), Headers: map[string]string{}}
		for _, name := range keptHeaders {
			if v := c.Response().Header().Get(name); v != "" {
				ans.Headers[name] = v
			}
		}
		a.settleKey(func() error { return a.Store.IdemFinish(ctx, userID, k, lease, ans) })
	}
}

// settleKey ends a request's hold on its key (Store.IdemSettle retries while the database is away).
func (a *API) settleKey(f func() error) {
	if err := a.Store.IdemSettle(context.Background(), f); err != nil {
		a.Log.Warn("idempotency key", "err", err)
	}
}

// idempotencyKey is the header's one key: 1–255 printable ASCII characters, bare or quoted.
func idempotencyKey(values []string) (string, error) {
	if len(values) != 1 {
		return "", invalid(headerIdempotencyKey, "Idempotency-Key must be given once")
	}
	k := values[0]
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		k = k[1 : len(k)-1]
	}
	if k == "" || len(k) > 255 {
		return "", invalid(headerIdempotencyKey, "Idempotency-Key must be 1 to 255 characters")
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return "", invalid(headerIdempotencyKey, "Idempotency-Key must be printable ASCII characters")
		}
	}
	return k, nil
}

// recorder keeps a copy of the answer's body as it is written.
type recorder struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (r *recorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// jsonBody is v as Echo's c.JSON writes it.
func jsonBody(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// secretAnswer reports whether the route a request is for answers with a token or a secret, or
// sets one as a cookie (the API tests fail any such answer that lacks no-store).
func secretAnswer(method, path string) bool {
	path = strings.TrimSuffix(path, "/")
	switch {
	case path == "/api/session":
		return true
	case method == http.MethodPost && (path == "/api/admin/users" || path == "/api/admin/webhooks"):
		return true
	case method == http.MethodPost && strings.HasPrefix(path, "/api/admin/users/") && strings.HasSuffix(path, "/token"):
		return true
	}
	return false
}

// noStore puts Cache-Control: no-store on every answer of a secretAnswer route, errors and
// replays included (it runs before routing).
func noStore(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if secretAnswer(c.Request().Method, c.Request().URL.Path) {
			c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
		}
		return next(c)
	}
}
