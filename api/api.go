// Package api is owed's HTTP API: handlers as methods on one API value that holds their
// dependencies, one file per resource, every route in routes.go.
package api

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/owed/owed/clock"
	"github.com/owed/owed/media"
	"github.com/owed/owed/metrics"
	"github.com/owed/owed/models"
	"github.com/owed/owed/notify"
	"github.com/owed/owed/scheduler"
)

// API holds what the handlers need.
type API struct {
	Store   *models.Store
	Content *scheduler.Content
	Clock   clock.Clock
	Log     *slog.Logger
	Metrics *metrics.Metrics

	// InlineWait is how long a write waits for its item's screen before answering pending.
	InlineWait time.Duration
	// PluginsDir is the operator's folder of extra SPA plugins.
	PluginsDir string
	// WriteRate is each caller's sustained writes per second (0: unlimited); WriteBurst the
	// burst above it.
	WriteRate  float64
	WriteBurst int
	// Version is reported by the overview.
	Version string
	// Retention is how long history is kept (OWED_RETAIN_*), shown by the overview.
	Retention models.Retention
	// BackfillSummary, when set, adds the backfill queue's summary to the overview.
	BackfillSummary func(ctx context.Context) *scheduler.BackfillSummary
	// Backfill is the backfill queue behind /api/backfill; scrape changes kick it.
	Backfill *scheduler.Backfill
	// Media is the media engine whose cached previews /api/media/{id}/preview serves.
	Media *media.Engine
	// Webhooks, when set, is woken when a delivery is made due (redeliver).
	Webhooks *scheduler.Deliveries
	// WebhooksAllowPrivate lets subscriptions name loopback and private addresses.
	WebhooksAllowPrivate bool
	// SecureCookies marks session cookies Secure (OWED_PUBLIC_URL is https).
	SecureCookies bool
	// TrustedProxy reports whether a TCP peer is a trusted proxy (OWED_TRUSTED_PROXIES), whose
	// X-Forwarded-Proto is then believed; nil trusts none.
	TrustedProxy func(ip net.IP) bool

	signIns signInLimits
	// MediaAllowPrivate lets the bot push media URLs whose host is a loopback, private or
	// otherwise non-public address.
	MediaAllowPrivate bool
	// Notify wakes the long polls and streams of `mine` when an author's view changes; when
	// nil, a process-local notifier is made (which hears nothing unless the store tells it).
	Notify *notify.Hub

	liveOnce sync.Once
	live     *live
	memOnce  sync.Once   // mine_memory.go
	memory   *mineMemory // mine_memory.go
}

func (a *API) now() time.Time { return a.Clock.Now() }
