// Package api is owed's HTTP API: handlers as methods on one API value that holds their
// dependencies, one file per resource, every route in routes.go.
package api

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/owed/owed/clock"
	"github.com/owed/owed/media"
	"github.com/owed/owed/metrics"
	"github.com/owed/owed/models"
	"github.com/owed/owed/notify"
	"github.com/owed/owed/scheduler"
)

// Config is what the handlers need: the parts of the process they call and the limits they
// keep. Zero limits take their defaults.
type Config struct {
	Store   *models.Store
	Content *scheduler.Content
	Clock   clock.Clock
	Log     *slog.Logger
	Metrics *metrics.Metrics

	// InlineWait is how long a write waits for its item's screen before answering pending.
	InlineWait time.Duration
	// StreamSettle is how long a stream woken by a change waits before it reads the view, so
	// that changes coming together are sent as one event (0: DefaultStreamSettle).
	StreamSettle time.Duration
	// PluginsDir is the operator's folder of extra SPA plugins.
	PluginsDir string
	// WriteRate is each caller's sustained writes per second (0: unlimited); WriteBurst the
	// burst above it.
	WriteRate  float64
	WriteBurst int
	// Version is reported by the overview.
	Version string
	// IdempotencyTTL is how long an Idempotency-Key's answer is kept (0: DefaultIdempotencyTTL).
	IdempotencyTTL time.Duration
	// Retention is how long history is kept (OWED_RETAIN_*), shown by the overview.
	Retention models.Retention
	// BackfillSummary, when set, adds the backfill queue's summary to the overview.
	BackfillSummary func(ctx context.Context) *scheduler.BackfillSummary
	// Schedule, when set, is listed in the overview (each entry with its next run).
	Schedule *scheduler.Schedule
	// ClockProblem, when set, says how far the process's clock is from the database's when
	// that is too far ("" otherwise); /readyz shows it as "clock".
	ClockProblem func() string
	// Drift, when set, runs the anchor set; GET /api/admin/shadow shows its settings and runs.
	Drift *scheduler.Drift
	// Backfill is the backfill queue behind /api/backfill; scrape changes kick it.
	Backfill *scheduler.Backfill
	// Media is the media engine whose cached previews /api/media/{id}/preview serves.
	Media *media.Engine
	// Webhooks, when set, is woken when a delivery is made due (redeliver).
	Webhooks *scheduler.Deliveries
	// WebhooksAllowPrivate lets subscriptions name loopback and private addresses.
	WebhooksAllowPrivate bool
	// WebhookSecretOverlap is how long after a secret rotation deliveries carry the previous
	// secret's signature too (0: not at all; app's default is webhooks.DefaultSecretOverlap).
	WebhookSecretOverlap time.Duration
	// SecureCookies marks session cookies Secure (OWED_PUBLIC_URL is https).
	SecureCookies bool
	// TrustedProxy reports whether a TCP peer is a trusted proxy (OWED_TRUSTED_PROXIES), whose
	// X-Forwarded-Proto is then believed; nil trusts none.
	TrustedProxy func(ip net.IP) bool

	// MediaAllowPrivate lets the bot push media URLs whose host is a loopback, private or
	// otherwise non-public address.
	MediaAllowPrivate bool
	// Notify wakes the long polls and streams of `mine` when an author's view changes; when
	// nil, New makes a process-local notifier (which hears nothing unless the store tells it).
	Notify *notify.Hub
	// StreamsPerUser caps one user's streams and held long polls together (429 past it);
	// MaxStreams the process's (503). 0: the defaults (DefaultStreamsPerUser, DefaultMaxStreams).
	StreamsPerUser, MaxStreams int
	// CORSOrigins are the exact origins whose browsers may call the listener and public routes
	// (never /api/admin/*); none: no CORS.
	CORSOrigins []string
}

// API is the handlers with their dependencies and the state they share; make it with New.
type API struct {
	Config
	live    *live
	signIns signInLimits
}

// New returns the API ready to Register: its defaults filled in and its shared state made.
func New(cfg Config) *API {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Notify == nil {
		cfg.Notify = notify.New("", cfg.Log)
	}
	if cfg.StreamsPerUser <= 0 {
		cfg.StreamsPerUser = DefaultStreamsPerUser
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.StreamSettle <= 0 {
		cfg.StreamSettle = DefaultStreamSettle
	}
	if cfg.IdempotencyTTL <= 0 {
		cfg.IdempotencyTTL = DefaultIdempotencyTTL
	}
	a := &API{Config: cfg, signIns: newSignInLimits()}
	a.live = a.newLive()
	return a
}

func (a *API) now() time.Time { return a.Clock.Now() }
