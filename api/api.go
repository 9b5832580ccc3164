// Package api is owed's HTTP API: handlers as methods on one API value that holds their
// dependencies, one file per resource, every route in routes.go.
package api

import (
	"context"
	"log/slog"
	"time"

	"github.com/owed/owed/clock"
	"github.com/owed/owed/metrics"
	"github.com/owed/owed/models"
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
	// DailyBudget is the default per-author limit of model calls per UTC day.
	DailyBudget int64
	// PluginsDir is the operator's folder of extra SPA plugins.
	PluginsDir string
	// Version is reported by the overview.
	Version string
	// BackfillSummary, when set, adds the backfill queue's summary to the overview.
	BackfillSummary func(ctx context.Context) any
}

func (a *API) now() time.Time { return a.Clock.Now() }
