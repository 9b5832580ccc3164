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

// Config is what the handlers need; zero limits take their defaults.
type Config struct {
	Store   *models.Store
	Content *scheduler.Content
	Clock   clock.Clock
	Log     *slog.Logger
	Metrics *metrics.Metrics

	InlineWait time.Duration // how long a write waits for its item's screen before answering pending
	// StreamSettle is how long a woken stream waits before it reads the view, so that changes
	// coming together are sent as one event (0: DefaultStreamSettle).
	StreamSettle   time.Duration
	PluginsDir     string  // the operator's folder of extra SPA plugins
	WriteRate      float64 // each caller's sustained writes per second (0: unlimited)
	WriteBurst     int
	Version        string           // reported by the overview
	IdempotencyTTL time.Duration    // how long an Idempotency-Key's answer is kept (0: DefaultIdempotencyTTL)
	Retention      models.Retention // OWED_RETAIN_*, shown by the overview
	// BackfillSummary, Schedule, ClockProblem and Drift, when set, are shown by the overview,
	// /readyz ("clock") and GET /api/admin/shadow.
	BackfillSummary      func(ctx context.Context) *scheduler.BackfillSummary
	Schedule             *scheduler.Schedule
	ClockProblem         func() string // how far the clock is from the database's when too far, else ""
	Drift                *scheduler.Drift
	Backfill             *scheduler.Backfill   // behind /api/backfill; scrape changes kick it
	Media                *media.Engine         // whose cached previews /api/media/{id}/preview serves
	Webhooks             *scheduler.Deliveries // when set, woken when a delivery is made due
	WebhooksAllowPrivate bool
	// WebhookSecretOverlap is how long after a secret rotation deliveries carry the previous
	// secret's signature too (0: not at all).
	WebhookSecretOverlap time.Duration
	SecureCookies        bool // session cookies are Secure (OWED_PUBLIC_URL is https)
	// TrustedProxy reports whether a TCP peer is a trusted proxy, whose X-Forwarded-Proto is
	// then believed; nil trusts none.
	TrustedProxy      func(ip net.IP) bool
	MediaAllowPrivate bool
	// Notify wakes the long polls and streams of `mine`; nil: a process-local notifier.
	Notify *notify.Hub
	// StreamsPerUser caps one user's streams and held long polls (429 past it); MaxStreams the
	// process's (503). 0: DefaultStreamsPerUser, DefaultMaxStreams.
	StreamsPerUser, MaxStreams int
	CORSOrigins                []string // exact origins allowed to call the listener and public routes
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
	orDefault(&cfg.StreamsPerUser, DefaultStreamsPerUser)
	orDefault(&cfg.MaxStreams, DefaultMaxStreams)
	orDefault(&cfg.StreamSettle, DefaultStreamSettle)
	orDefault(&cfg.IdempotencyTTL, DefaultIdempotencyTTL)
	a := &API{Config: cfg, signIns: signInLimits{addr: newKeyedLimiter(signInAddrEvery, signInAddrBurst, signInKeys),
		toks: newKeyedLimiter(signInTokEvery, signInTokBurst, signInKeys)}}
	a.live = a.newLive()
	return a
}

func (a *API) now() time.Time { return a.Clock.Now() }

// orDefault sets *v to def when it is not above zero.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
