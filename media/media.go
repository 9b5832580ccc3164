// Package media is the media engine of the backfill: it fetches the media rows
// of chat archives over HTTP, one request at a time with a random gap between
// requests, turns images and gifs into JPEG thumbnails under a preview
// directory, and classifies every row so that nothing is dropped by mistake:
// transient trouble (403/404/410/5xx, timeouts, connection errors) is "suspect"
// and retried once later, a 429 pauses the whole engine, and only content that
// can never make a preview is "failed".
package media

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/owed/owed/outbound"
)

// Media kinds of a row.
const (
	KindImage = "image"
	KindGIF   = "gif"
	KindVideo = "video"
	KindAudio = "audio"
)

// Preview states of a media row, as stored by the callers.
const (
	StatePending    = "pending"
	StateCached     = "cached"
	StateFailed     = "failed"
	StateSuspect    = "suspect"
	StateUnverified = "unverified"
	StateSkipped    = "skipped"
)

// Outcome is how one Preview ended.
type Outcome string

// Outcomes of Preview. RateLimited and Pending leave the row as it was.
const (
	// Cached: the thumbnail is stored at PreviewPath(ID).
	Cached Outcome = "cached"
	// Skipped: the kind has no preview (video, audio, unknown kinds); nothing was fetched.
	Skipped Outcome = "skipped"
	// Failed: the row can never make a preview (undecodable, too large, a 4xx
	// other than 403/404/408/410/429, not an http(s) URL, an address the guard
	// refuses, more than outbound.MaxRedirects redirects).
	Failed Outcome = "failed"
	// Suspect: a transient-looking failure on a first attempt; retry it once later.
	Suspect Outcome = "suspect"
	// RateLimited: the engine is rate limited; the row was not (or no longer
	// usefully) fetched and stays as it was.
	RateLimited Outcome = "ratelimited"
	// Unverified: a suspect row whose retry failed the same way.
	Unverified Outcome = "unverified"
	// Pending: the row was not handled because ctx was done or the thumbnail
	// could not be stored locally; it stays as it was and must not be recorded
	// as a verdict on the media.
	Pending Outcome = "pending"
)

// State is the preview state a row takes after this outcome (the state of the same name), or
// "" when the row must be left as it was (RateLimited, Pending).
func (o Outcome) State() string {
	if o == RateLimited || o == Pending {
		return ""
	}
	return string(o)
}

// Item is one media row to preview.
type Item struct {
	ID   int64
	Kind string
	URL  string
	// Retry marks the suspect retry: a transient failure now gives Unverified.
	Retry bool
}

// Result is the outcome of one Preview.
type Result struct {
	Outcome Outcome
	// Bytes is the size of the stored thumbnail; 0 unless Cached.
	Bytes int64
	// Status is the HTTP status seen, 0 when no response arrived.
	Status int
	// Err is a short reason for logs; it never contains the URL, which may
	// carry signed tokens.
	Err string
}

// BatchResult counts the outcomes of one Batch.
type BatchResult struct {
	Cached, Skipped, Failed, Suspect, RateLimited, Unverified int
}

func (b *BatchResult) add(o Outcome) {
	switch o {
	case Cached:
		b.Cached++
	case Skipped:
		b.Skipped++
	case Failed:
		b.Failed++
	case Suspect:
		b.Suspect++
	case RateLimited:
		b.RateLimited++
	case Unverified:
		b.Unverified++
	}
}

// Limit is the engine-wide rate limit. When inactive, Until and Remaining are zero.
type Limit struct {
	Active    bool
	Until     time.Time
	Remaining time.Duration
}

// Engine fetches and previews media. It is safe for concurrent use; requests
// from all callers share one gap schedule and one rate limit. Only real
// requests are spaced: skipped and rate-limited rows cost no gap.
type Engine struct {
	cfg    Config
	client *http.Client // the guarded client (package outbound)

	mu           sync.Mutex
	minGap       time.Duration
	maxGap       time.Duration
	lastRequest  time.Time // end of the latest request, or the slot reserved by the next one
	limitedUntil time.Time
}

// New validates cfg, applies its defaults and creates the preview directory.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.PreviewDir = filepath.Clean(cfg.PreviewDir)
	if err := os.MkdirAll(cfg.PreviewDir, 0o700); err != nil {
		return nil, fmt.Errorf("media: preview dir: %w", err)
	}
	cfg.Outbound.AllowPrivate, cfg.Outbound.Redirects = cfg.AllowPrivate, outbound.MaxRedirects
	return &Engine{cfg: cfg, client: outbound.NewClient(cfg.Outbound), minGap: cfg.MinGap, maxGap: cfg.MaxGap}, nil
}

// Gaps returns the current range of the random gap between requests.
func (e *Engine) Gaps() (minGap, maxGap time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.minGap, e.maxGap
}

// SetGaps changes the gap range for the requests that follow. Both must be
// non-negative and minGap <= maxGap; zero is taken literally (no gap).
func (e *Engine) SetGaps(minGap, maxGap time.Duration) error {
	if err := validateGaps(minGap, maxGap); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.minGap, e.maxGap = minGap, maxGap
	return nil
}

// RateLimit reports the engine-wide rate limit as of the engine's clock.
func (e *Engine) RateLimit() Limit {
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	until := e.limitedUntil
	e.mu.Unlock()
	if !now.Before(until) {
		return Limit{}
	}
	return Limit{Active: true, Until: until, Remaining: until.Sub(now)}
}

// limitFor extends the engine-wide limit to now+d; an earlier deadline never
// shortens a later one that another request already set.
func (e *Engine) limitFor(d time.Duration) time.Time {
	until := e.cfg.Clock.Now().Add(d)
	e.mu.Lock()
	defer e.mu.Unlock()
	if until.After(e.limitedUntil) {
		e.limitedUntil = until
	}
	return e.limitedUntil
}

// PreviewPath is where the thumbnail of media row id lives: a file under
// PreviewDir whose name is derived from id alone, sharded by the low byte of
// the id so no directory grows huge.
func (e *Engine) PreviewPath(id int64) string {
	return filepath.Join(e.cfg.PreviewDir, shard(id), strconv.FormatInt(id, 10)+".jpg")
}

func shard(id int64) string {
	return fmt.Sprintf("%02x", uint64(id)&0xff)
}

// RemovePreview deletes the thumbnail of id; a missing file is not an error.
func (e *Engine) RemovePreview(id int64) error {
	err := os.Remove(e.PreviewPath(id))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Batch previews items in order, calling record after each one; record
// persists the result (use Outcome.State for the row's new state). It stops:
//   - after the first RateLimited result, which is recorded and counted; the
//     later items are neither fetched nor recorded;
//   - at the first error from record, which it returns;
//   - when ctx is done or a thumbnail cannot be stored (Pending): that item is
//     not recorded, and the error is returned.
//
// The counts cover the recorded items only.
func (e *Engine) Batch(ctx context.Context, items []Item, record func(Item, Result) error) (BatchResult, error) {
	var counts BatchResult
	for _, item := range items {
		if err := ctx.Err(); err != nil {
			return counts, err
		}
		res := e.Preview(ctx, item)
		if res.Outcome == Pending {
			if err := ctx.Err(); err != nil {
				return counts, err
			}
			return counts, fmt.Errorf("media: preview %d: %s", item.ID, res.Err)
		}
		if err := record(item, res); err != nil {
			return counts, err
		}
		counts.add(res.Outcome)
		if res.Outcome == RateLimited {
			break
		}
	}
	return counts, nil
}
