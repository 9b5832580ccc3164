package media

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/owed/owed/clock"
	"github.com/owed/owed/outbound"
)

// Defaults applied by New to zero-valued Config fields.
const (
	DefaultMinGap    = 250 * time.Millisecond
	DefaultMaxGap    = 750 * time.Millisecond
	DefaultTimeout   = 30 * time.Second
	DefaultMaxBytes  = 32 << 20
	DefaultMaxPixels = 50_000_000
	// DefaultMaxDecodeBytes is the decode budget: the most memory one image's pixels may take
	// once decoded (see Config.MaxDecodeBytes). 128 MiB admits a 12-megapixel progressive JPEG
	// (about 90 MiB in Go's decoder) or a 5,600 × 5,600 RGBA PNG, and keeps the worst accepted
	// image, with the largest body, well inside a few hundred MB of process.
	DefaultMaxDecodeBytes = 128 << 20
	DefaultThumbSize      = 320
	// DefaultRateLimitWait is the wait after a 429 that names no wait of its own.
	DefaultRateLimitWait = 60 * time.Second
	// MaxRateLimitWait caps the wait a 429 can impose, so that a bogus or hostile
	// Retry-After cannot stall the engine for days; a longer real limit simply
	// answers 429 again once the cap has passed.
	MaxRateLimitWait = time.Hour
)

// Config configures an Engine. Zero-valued fields take the defaults above;
// the gap range takes its defaults only when MinGap and MaxGap are both zero
// (use SetGaps(0, 0) to disable the gap at run time).
type Config struct {
	// PreviewDir is where thumbnails are written; New creates it if missing.
	PreviewDir string
	// MinGap and MaxGap bound the random pause between two requests.
	MinGap, MaxGap time.Duration
	// Timeout is one fetch's deadline, headers and body included.
	Timeout time.Duration
	// MaxBytes caps a fetched body; a larger body fails and is read no further.
	MaxBytes int64
	// MaxPixels caps width*height of an image, checked from its header before
	// any pixel is decoded.
	MaxPixels int
	// MaxDecodeBytes caps the memory the decoded pixels of one image may take, estimated from
	// its header before any pixel is decoded: width × height × bytes per pixel of the form the
	// decoder returns (1 for paletted and 8-bit gray, 1.5–3 for JPEG's YCbCr, 4 for RGBA, 8 for
	// 16-bit RGBA), plus the decoder's own buffers of that order (a progressive JPEG's
	// coefficients, an interlaced PNG's passes, a PNG's two rows), and the thumbnailer's own
	// buffers (the shrunk copy, its strip, the thumbnail). A GIF costs its first frame, the only
	// one read.
	MaxDecodeBytes int64
	// ThumbSize is the longest side of a thumbnail, in pixels.
	ThumbSize int
	// DefaultRateLimit is the engine-wide wait after a 429 that names none.
	DefaultRateLimit time.Duration
	// AllowPrivate lets media URLs reach loopback, private and every other non-public
	// address (OWED_MEDIA_ALLOW_PRIVATE; tests with a local CDN). Off, such a row fails
	// without a request, and so does one whose host resolves, or redirects, to one.
	AllowPrivate bool
	// Outbound tunes the guarded client media is fetched with (tests: fresh connections, an
	// exempt address); its AllowPrivate and Redirects are set from this Config.
	Outbound outbound.Options
	// Clock tells the time and makes the timers the gaps are waited on (default
	// clock.Real). It must be safe for concurrent use when the engine is.
	Clock clock.Clock
	// Rand returns a number in [0,1) that picks the gap (default math/rand/v2).
	// The engine calls it under its lock, so it need not be concurrency-safe.
	Rand func() float64
}

// withDefaults returns c with every zero field replaced by its default.
func (c Config) withDefaults() Config {
	if c.MinGap == 0 && c.MaxGap == 0 {
		c.MinGap, c.MaxGap = DefaultMinGap, DefaultMaxGap
	}
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.MaxBytes = cmp.Or(c.MaxBytes, DefaultMaxBytes)
	c.MaxPixels = cmp.Or(c.MaxPixels, DefaultMaxPixels)
	c.MaxDecodeBytes = cmp.Or(c.MaxDecodeBytes, DefaultMaxDecodeBytes)
	c.ThumbSize = cmp.Or(c.ThumbSize, DefaultThumbSize)
	c.DefaultRateLimit = cmp.Or(c.DefaultRateLimit, DefaultRateLimitWait)
	c.Clock = cmp.Or[clock.Clock](c.Clock, clock.Real{})
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	return c
}

// Validate reports whether c, once defaults are applied, is usable: a preview
// directory is named, no duration or limit is negative, and MinGap <= MaxGap.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.PreviewDir == "" {
		errs = append(errs, errors.New("media: PreviewDir is required"))
	}
	if err := validateGaps(c.MinGap, c.MaxGap); err != nil {
		errs = append(errs, err)
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("media: Timeout %v is negative", c.Timeout))
	}
	if c.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("media: MaxBytes %d is negative", c.MaxBytes))
	}
	if c.MaxPixels < 0 {
		errs = append(errs, fmt.Errorf("media: MaxPixels %d is negative", c.MaxPixels))
	}
	if c.MaxDecodeBytes < 0 {
		errs = append(errs, fmt.Errorf("media: MaxDecodeBytes %d is negative", c.MaxDecodeBytes))
	}
	if c.ThumbSize < 0 {
		errs = append(errs, fmt.Errorf("media: ThumbSize %d is negative", c.ThumbSize))
	}
	if c.DefaultRateLimit < 0 {
		errs = append(errs, fmt.Errorf("media: DefaultRateLimit %v is negative", c.DefaultRateLimit))
	}
	return errors.Join(errs...)
}

func validateGaps(minGap, maxGap time.Duration) error {
	if minGap < 0 || maxGap < 0 {
		return fmt.Errorf("media: gaps must not be negative (min %v, max %v)", minGap, maxGap)
	}
	if minGap > maxGap {
		return fmt.Errorf("media: min gap %v exceeds max gap %v", minGap, maxGap)
	}
	return nil
}
