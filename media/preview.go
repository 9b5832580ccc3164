package media

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/owed/owed/clock"
	"github.com/owed/owed/outbound"
)

const userAgent = "owed-media/1"

// errRefusedReason is the reason of a row whose address the guard refused: one text for every
// address and port, so the outcome tells nothing about what answers inside.
const errRefusedReason = "refused: not a public address (OWED_MEDIA_ALLOW_PRIVATE is off)"

// drainLimit bounds how much of an unwanted body is read so the connection can
// be reused; anything longer is cheaper to drop with the connection.
const drainLimit = 16 << 10

// Preview handles one media row and classifies it (see the Outcome constants):
//
//   - video, audio and unknown kinds are Skipped without a request;
//   - a URL that is not http(s) is Failed without a request, and so is one whose host is
//     a literal non-public address (unless AllowPrivate);
//   - while the engine is rate limited it returns RateLimited without a request;
//   - otherwise it waits until a random gap in [minGap, maxGap] has passed
//     since the end of the engine's previous request (on Config.Clock), then
//     fetches item.URL within Config.Timeout;
//   - 2xx with a decodable PNG, JPEG, GIF (first frame) or WebP within
//     MaxBytes and MaxPixels: the thumbnail is written atomically to
//     PreviewPath(item.ID) and the result is Cached with its size;
//   - 2xx that is undecodable or over a limit: Failed;
//   - 429: the whole engine is rate limited until now + Retry-After (seconds or
//     an HTTP date), else the JSON body's "retry_after" (float seconds), else
//     DefaultRateLimit, capped at MaxRateLimitWait; the result is RateLimited;
//   - a host that resolves, or a redirect that leads, to a non-public address (unless
//     AllowPrivate), or more than outbound.MaxRedirects redirects: Failed, with the same
//     reason whatever the address and whether anything listens there;
//   - 403, 404, 408, 410, 5xx, timeouts and connection errors: Suspect, or
//     Unverified when item.Retry;
//   - any other status: Failed;
//   - ctx done, or the thumbnail cannot be written: Pending.
func (e *Engine) Preview(ctx context.Context, item Item) Result {
	if item.Kind != KindImage && item.Kind != KindGIF {
		return Result{Outcome: Skipped}
	}
	u, err := url.Parse(item.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Result{Outcome: Failed, Err: "not an http(s) URL"}
	}
	if e.cfg.Outbound.CheckURL(u) != nil {
		return Result{Outcome: Failed, Err: errRefusedReason}
	}
	if l := e.RateLimit(); l.Active {
		return limited(l)
	}
	if err := e.waitGap(ctx); err != nil {
		return Result{Outcome: Pending, Err: "canceled: " + err.Error()}
	}
	// Another caller may have hit a 429 while this one waited.
	if l := e.RateLimit(); l.Active {
		return limited(l)
	}
	res := e.fetch(ctx, item)
	e.requestDone()
	return res
}

func limited(l Limit) Result {
	return Result{Outcome: RateLimited, Err: "rate limited for " + l.Remaining.Round(time.Millisecond).String()}
}

// waitGap reserves the next request slot, a random gap after the previous
// request, and sleeps until it. Reserving under the lock keeps concurrent
// callers spaced too, without holding the lock while sleeping.
func (e *Engine) waitGap(ctx context.Context) error {
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	start := now
	if !e.lastRequest.IsZero() {
		gap := e.minGap
		if span := e.maxGap - e.minGap; span > 0 {
			r := min(max(e.cfg.Rand(), 0), 1)
			gap += min(time.Duration(r*float64(span)), span)
		}
		if next := e.lastRequest.Add(gap); next.After(start) {
			start = next
		}
	}
	e.lastRequest = start
	e.mu.Unlock()
	if d := start.Sub(now); d > 0 {
		return clock.Sleep(ctx, e.cfg.Clock, d)
	}
	return ctx.Err()
}

// requestDone measures the next gap from the end of this request, so a slow
// response does not eat into the pause the server gets.
func (e *Engine) requestDone() {
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	if now.After(e.lastRequest) {
		e.lastRequest = now
	}
	e.mu.Unlock()
}

func (e *Engine) fetch(ctx context.Context, item Item) Result {
	fctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(fctx, http.MethodGet, item.URL, nil)
	if err != nil {
		return Result{Outcome: Failed, Err: "bad request"}
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "image/*")

	resp, err := e.client.Do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return Result{Outcome: Pending, Err: "canceled: " + ctx.Err().Error()}
		case errors.Is(err, outbound.ErrRefused):
			// Refused before any connection: the same answer for an open port and a closed one.
			return Result{Outcome: Failed, Err: errRefusedReason}
		case errors.Is(err, outbound.ErrTooManyRedirects):
			return Result{Outcome: Failed, Err: fmt.Sprintf("more than %d redirects", outbound.MaxRedirects)}
		}
		return transient(item, 0, netReason(err))
	}
	defer resp.Body.Close()

	code := resp.StatusCode
	switch {
	case code == http.StatusTooManyRequests:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, drainLimit))
		wait, ok := retryAfter(resp.Header, body, e.cfg.Clock.Now())
		if !ok {
			wait = e.cfg.DefaultRateLimit
		}
		until := e.limitFor(min(wait, MaxRateLimitWait))
		return Result{Outcome: RateLimited, Status: code,
			Err: "429 until " + until.UTC().Format(time.RFC3339Nano)}
	case code >= 200 && code < 300:
		return e.store(ctx, item, resp)
	case suspectStatus(code):
		drain(resp.Body)
		return transient(item, code, "status "+strconv.Itoa(code))
	default:
		drain(resp.Body)
		return Result{Outcome: Failed, Status: code, Err: "status " + strconv.Itoa(code)}
	}
}

// suspectStatus reports statuses that may not be the media's fault: access
// hiccups, expired signed links, server trouble. They get one later retry.
func suspectStatus(code int) bool {
	switch code {
	case http.StatusForbidden, http.StatusNotFound, http.StatusRequestTimeout, http.StatusGone:
		return true
	}
	return code >= 500 && code < 600
}

func transient(item Item, status int, reason string) Result {
	if item.Retry {
		return Result{Outcome: Unverified, Status: status, Err: reason}
	}
	return Result{Outcome: Suspect, Status: status, Err: reason}
}

func drain(r io.Reader) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r, drainLimit))
}

// netReason names a transport failure without the URL, which may carry tokens.
func netReason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return "fetch: " + ue.Err.Error()
	}
	return "fetch: " + err.Error()
}

// retryAfter reads the wait a 429 asks for: the headers (outbound.RetryAfter), else a JSON
// body's "retry_after" in seconds, the form chat platforms such as Discord use; at most
// MaxRateLimitWait.
func retryAfter(h http.Header, body []byte, now time.Time) (time.Duration, bool) {
	if d, ok := outbound.RetryAfter(h, now); ok {
		return min(d, MaxRateLimitWait), true
	}
	var payload struct {
		RetryAfter *float64 `json:"retry_after"`
	}
	if json.Unmarshal(body, &payload) == nil && payload.RetryAfter != nil {
		if d, ok := seconds(*payload.RetryAfter); ok {
			return d, true
		}
	}
	return 0, false
}

// seconds converts a non-negative, finite number of seconds, saturating
// instead of overflowing.
func seconds(s float64) (time.Duration, bool) {
	if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
		return 0, false
	}
	if s >= MaxRateLimitWait.Seconds() {
		return MaxRateLimitWait, true
	}
	return time.Duration(s * float64(time.Second)), true
}

func (e *Engine) store(ctx context.Context, item Item, resp *http.Response) Result {
	code := resp.StatusCode
	limit := e.cfg.MaxBytes
	if resp.ContentLength > limit {
		return Result{Outcome: Failed, Status: code,
			Err: fmt.Sprintf("too large: %d bytes over %d", resp.ContentLength, limit)}
	}
	// One byte past the cap tells "exactly at the cap" from "over it".
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		if ctx.Err() != nil {
			return Result{Outcome: Pending, Status: code, Err: "canceled: " + ctx.Err().Error()}
		}
		return transient(item, code, "read: "+netReason(err))
	}
	if int64(len(data)) > limit {
		return Result{Outcome: Failed, Status: code, Err: fmt.Sprintf("too large: over %d bytes", limit)}
	}
	thumb, err := thumbnail(data, e.cfg.MaxPixels, e.cfg.MaxDecodeBytes, e.cfg.ThumbSize)
	if err != nil {
		return Result{Outcome: Failed, Status: code, Err: err.Error()}
	}
	if err := e.writePreview(item.ID, thumb); err != nil {
		return Result{Outcome: Pending, Status: code, Err: "store preview: " + err.Error()}
	}
	return Result{Outcome: Cached, Status: code, Bytes: int64(len(thumb))}
}

// writePreview stores data at PreviewPath(id) through a temporary file and a
// rename, so readers never see a half-written thumbnail.
func (e *Engine) writePreview(id int64, data []byte) (err error) {
	path := e.PreviewPath(id)
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*.jpg")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o600) // previews are served by owed alone, to bots and admins
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
