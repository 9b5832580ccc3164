package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/owed/owed/api"
	"github.com/owed/owed/clock"
	"github.com/owed/owed/frontend"
	"github.com/owed/owed/media"
	"github.com/owed/owed/metrics"
	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
	"github.com/owed/owed/notify"
	"github.com/owed/owed/scheduler"
)

// Options are what tests (and main) may hand New beyond the configuration.
type Options struct {
	Clock clock.Clock
	Log   *slog.Logger
	// HTTPClient is the model's client (nil: a shared pooled one); media and webhooks always
	// use package outbound's guarded client.
	HTTPClient *http.Client
	Out        io.Writer // receives the first admin token when one is made (stdout in production)
	// ServerTimeouts bound how long Serve's HTTP server waits on a client (zero: defaults).
	ServerTimeouts ServerTimeouts
	// BackfillRateWindow is scheduler.BackfillConfig.RateWindow (zero: default; negative: plain rate).
	BackfillRateWindow time.Duration
	// DatabaseClock sets Clock by the database's clock, as the real clock always is.
	DatabaseClock bool
	BeatEvery     time.Duration // the notifier's heartbeat period (zero: notify.DefaultBeatEvery)
}

// ServerTimeouts are the HTTP server's limits on slow clients (defaults: 10 s, 1 m, 2 m, 2 m).
type ServerTimeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

func (t ServerTimeouts) withDefaults() ServerTimeouts {
	for _, d := range []struct {
		at  *time.Duration
		def time.Duration
	}{{&t.ReadHeader, 10 * time.Second}, {&t.Read, time.Minute}, {&t.Write, 2 * time.Minute}, {&t.Idle, 2 * time.Minute}} {
		if *d.at <= 0 {
			*d.at = d.def
		}
	}
	return t
}

func (t ServerTimeouts) server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, WriteTimeout: t.Write, IdleTimeout: t.Idle}
}

// App is one owed process.
type App struct {
	Config  Config
	Store   *models.Store
	Content *scheduler.Content
	Drift   *scheduler.Drift // re-runs the anchor set against the live model
	Echo    *echo.Echo
	Metrics *metrics.Metrics
	Log     *slog.Logger
	Clock   clock.Clock

	Webhooks *scheduler.Deliveries
	Media    *media.Engine
	Backfill *scheduler.Backfill // the backfill queue and scrape deletes, on Media
	// Notify wakes authors' long polls and streams (in-process on SQLite, LISTEN on PostgreSQL).
	Notify   *notify.Hub
	API      *api.API
	Schedule *scheduler.Schedule // the periodic work on robfig/cron (see newSchedule)

	server        *http.Server
	metricsServer *http.Server // /metrics on OWED_METRICS_ADDR, when set, at metricsAddr
	metricsAddr   string
	failed        chan error // see Failed
	timeouts      ServerTimeouts
	// dbClock is Clock when set by the database's clock, else nil; clockProblem the skew past
	// OWED_MAX_CLOCK_SKEW it last found.
	dbClock      *clock.Offset
	clockProblem atomic.Pointer[string]
	owner        string // this process's name on every lease it takes
}

// New opens the database (applying migrations), makes the first admin if there is none, and
// assembles the runners and the HTTP handler. Nothing runs until Start.
func New(ctx context.Context, cfg Config, opts Options) (_ *App, err error) {
	dbClock := databaseClock(opts)
	if dbClock != nil {
		opts.Clock = dbClock
	}
	opts.Log = cmp.Or(opts.Log, slog.Default())
	if err := privateDataDir(cfg.DataDir, opts.Log); err != nil {
		return nil, err
	}
	lockTimeout, statementTimeout := cfg.StoreTimeouts()
	store, err := models.Open(ctx, models.Options{URL: cfg.DatabaseURL, DataDir: cfg.DataDir, Clock: opts.Clock, Logger: opts.Log,
		MaxConns: int(cfg.DatabaseMaxConns), DailyLimit: cfg.DailyBudget, MaxConnLifetime: cfg.DatabaseMaxConnLifetime,
		LockTimeout: lockTimeout, StatementTimeout: statementTimeout, MigrateLockTimeout: cfg.MigrateLockTimeout})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			store.Close()
		}
	}()
	a := &App{Config: cfg, Store: store, Log: opts.Log, Clock: opts.Clock, timeouts: opts.ServerTimeouts.withDefaults(),
		failed: make(chan error, 1), dbClock: dbClock}
	if dbClock != nil {
		a.checkClock(ctx)
	}
	a.owner = models.NewLeaseOwner()
	a.Notify = notify.New(cfg.ListenURL(), opts.Log)
	if a.Notify.Listens() {
		a.Notify.SetHeartbeat(func(ctx context.Context, payload string) error {
			return store.Notify(ctx, notify.Channel, payload)
		}, opts.BeatEvery)
	} else {
		// SQLite: every writer is in this process (PostgreSQL's triggers notify every replica).
		store.SetChanges(a.Notify)
	}
	if err := a.ensureAdmin(ctx, opts.Out); err != nil {
		return nil, err
	}
	a.Metrics = metrics.New(metrics.CacheCounts(a.jobCounts, metrics.CountsFresh, opts.Clock.Now))
	a.Metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "owed_mine_waiters",
		Help: "Long polls and streams of authors' views waiting in this process."},
		func() float64 { return float64(a.Notify.Watchers()) }))
	proxy, err := proxyURL(cfg.ModelProxy)
	if err != nil {
		return nil, fmt.Errorf("OWED_MODEL_PROXY: %w", err)
	}
	a.Metrics.Registry.MustRegister(newReviewCollector(store, opts.Clock.Now)) // dbmetrics.go
	model := modelclient.New(modelclient.Config{URL: cfg.ModelURL, Key: cfg.ModelKey, API: cfg.ModelAPI, Model: cfg.ModelName,
		Timeout: cfg.ModelTimeout, Proxy: proxy, HTTPClient: opts.HTTPClient})
	if err := (modelclient.Config{URL: cfg.ModelURL, API: cfg.ModelAPI}).Validate(); err != nil && cfg.ModelURL != "" {
		return nil, fmt.Errorf("model: %w", err)
	}
	shadow, err := a.candidate(ctx, proxy, opts.HTTPClient)
	if err != nil {
		return nil, err
	}
	a.Content = scheduler.NewContent(store, model, opts.Clock, opts.Log, a.Metrics, scheduler.ContentConfig{
		Lease: cfg.Lease, ModelName: cfg.ModelName, ModelAPI: cfg.ModelAPI, Concurrency: cfg.SweepConcurrency,
		ModelConcurrency: cfg.ModelConcurrency, ModelBreaker: modelBreaker(cfg.ModelBreaker), Owner: a.owner,
		Every: cfg.SweepEvery, ReviewBelow: cfg.ReviewBand(), Shadow: shadow})
	a.Metrics.Registry.MustRegister(newShadowCollector(store, a.Content)) // dbmetrics.go
	a.Drift = scheduler.NewDrift(a.Content, scheduler.DriftConfig{Every: cfg.DriftEvery, Alert: cfg.DriftAlert})
	if a.Webhooks, err = scheduler.NewDeliveries(store, opts.Clock, opts.Log, a.Metrics, a.deliveriesConfig()); err != nil {
		return nil, err
	}
	if err = a.newBackfill(cfg, opts); err != nil {
		return nil, err
	}
	if err = a.newSchedule(); err != nil {
		return nil, err
	}
	a.Echo = a.newEcho()
	return a, nil
}

// candidate makes the candidate's configuration (nil when none is set) and records it in the
// database, whose triggers then owe a shadow call for every live verdict and score.
func (a *App) candidate(ctx context.Context, proxy *url.URL, client *http.Client) (*scheduler.ShadowConfig, error) {
	cfg := a.Config
	if !cfg.HasCandidate() {
		return nil, a.Store.SetCandidate(ctx, nil, false)
	}
	mc, rubric := cfg.Candidate()
	mc.Proxy, mc.HTTPClient = proxy, client
	sh := &scheduler.ShadowConfig{Model: modelclient.New(mc), Name: mc.Model, API: mc.API, Rubric: rubric, Screens: cfg.CandidateModel(),
		DailyLimit: cfg.ShadowDailyLimit}
	name := sh.Candidate()
	return sh, a.Store.SetCandidate(ctx, &name, sh.Screens)
}

// modelBreaker is OWED_MODEL_BREAKER as the runner reads it: off is negative, 0 its default.
func modelBreaker(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// deliveriesConfig leases deliveries for OWED_LEASE like every other claim, an attempt's
// timeout within half the lease so a live worker never loses a delivery it is attempting.
func (a *App) deliveriesConfig() scheduler.DeliveriesConfig {
	cfg := a.Config
	c := scheduler.DeliveriesConfig{AllowPrivate: cfg.WebhooksAllowPrivate, Owner: a.owner}
	if cfg.Lease > 0 {
		c.Lease = cfg.Lease
		c.Timeout = min(scheduler.DefaultDeliveryTimeout, cfg.Lease/2)
	}
	return c
}

// newBackfill makes the media engine and the backfill queue over it.
func (a *App) newBackfill(cfg Config, opts Options) error {
	// The queue renews its lease between fetches after a third of it: a longer fetch would let it lapse.
	engine, err := media.New(media.Config{PreviewDir: filepath.Join(cfg.DataDir, "previews"),
		MinGap: cfg.MediaMinGap, MaxGap: cfg.MediaMaxGap, AllowPrivate: cfg.MediaAllowPrivate, Clock: opts.Clock,
		Timeout: min(media.DefaultTimeout, cfg.Lease/3)})
	if err != nil {
		return err
	}
	// New reads zero gaps as "use the defaults"; the configuration means them literally.
	if err := engine.SetGaps(cfg.MediaMinGap, cfg.MediaMaxGap); err != nil {
		return err
	}
	a.Media = engine
	a.Backfill = scheduler.NewBackfill(a.Store, engine, opts.Clock, opts.Log, a.Metrics, scheduler.BackfillConfig{
		WalkIdle: cfg.WalkIdle, Lease: cfg.Lease, Owner: a.owner, Every: min(scheduler.DefaultBackfillEvery, cfg.SweepEvery),
		RateWindow: opts.BackfillRateWindow})
	return nil
}

// ensureAdmin gives an empty database its first admin: with OWED_ADMIN_TOKEN when set, else a
// fresh token printed once to out.
func (a *App) ensureAdmin(ctx context.Context, out io.Writer) error {
	if a.Config.AdminToken != "" {
		// A known token is left as it is, even a disabled user's.
		if known, err := a.Store.TokenKnown(ctx, a.Config.AdminToken); err != nil || known {
			return err
		}
		// "admin" taken: admin-2, admin-3, …; the token known meanwhile: another replica made it.
		for n := 1; ; n++ {
			name := "admin"
			if n > 1 {
				name += "-" + strconv.Itoa(n)
			}
			_, err := a.Store.CreateUserWithToken(ctx, name, models.RoleAdmin, a.Config.AdminToken)
			if !errors.Is(err, models.ErrNameTaken) {
				if err != nil {
					if known, kerr := a.Store.TokenKnown(ctx, a.Config.AdminToken); kerr == nil && known {
						return nil
					}
				}
				return err
			}
			if known, err := a.Store.TokenKnown(ctx, a.Config.AdminToken); err != nil || known {
				return err
			}
		}
	}
	n, err := a.Store.CountUsers(ctx, models.RoleAdmin)
	if err != nil || n > 0 {
		return err
	}
	_, token, err := a.Store.CreateUser(ctx, "admin", models.RoleAdmin)
	if err != nil {
		return err
	}
	if out != nil {
		fmt.Fprintf(out, "\nowed: the first admin token (shown once, keep it):\n\n    %s\n\n", token)
	}
	return nil
}

func (a *App) jobCounts(ctx context.Context) (metrics.JobCounts, error) {
	oldest, err := a.Store.OldestDue(ctx, a.Clock.Now())
	if err != nil {
		return metrics.JobCounts{}, err
	}
	pairs, err := a.Store.JobsByTaskWhy(ctx)
	if err != nil {
		return metrics.JobCounts{}, err
	}
	out := metrics.JobCounts{ByTaskWhy: pairs}
	if oldest != nil {
		out.OldestDueAge, out.HasOldestDueAge = a.Clock.Now().Sub(*oldest), true
	}
	return out, nil
}

// newEcho builds the HTTP handler: API, SPA, health and metrics.
func (a *App) newEcho() *echo.Echo {
	e := a.baseEcho()
	proxies, _ := a.Config.Proxies() // FromEnv checked them
	e.IPExtractor = ipExtractor(proxies)
	if a.Config.PublicHTTPS() {
		// Whatever the request's scheme: behind a TLS-terminating proxy owed sees plain HTTP.
		e.Pre(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				c.Response().Header().Set(echo.HeaderStrictTransportSecurity, "max-age=31536000")
				return next(c)
			}
		})
	}
	e.Pre(healthOnlyOnReservedSlots)
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{DisableStackAll: true, LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
		a.Log.Error("panic", "path", c.Request().URL.Path, "err", err, "stack", string(stack))
		return err
	}}))
	e.Use(a.measure)
	e.Use(middleware.BodyLimit("2M"))
	a.API = api.New(api.Config{Store: a.Store, Content: a.Content, Clock: a.Clock, Log: a.Log, Metrics: a.Metrics,
		InlineWait: a.Config.InlineWait, PluginsDir: a.Config.PluginsDir, Version: BuildVersion(),
		WriteRate: a.Config.WriteRate, WriteBurst: int(a.Config.WriteBurst), IdempotencyTTL: a.Config.IdempotencyTTL,
		Retention:       models.Retention{Events: a.Config.RetainEvents, Deliveries: a.Config.RetainDelivered, Done: a.Config.RetainDone},
		BackfillSummary: a.backfillSummary, Schedule: a.Schedule, Backfill: a.Backfill, Media: a.Media,
		Webhooks: a.Webhooks, WebhooksAllowPrivate: a.Config.WebhooksAllowPrivate, WebhookSecretOverlap: a.Config.WebhookSecretOverlap,
		SecureCookies: a.Config.PublicHTTPS(), TrustedProxy: trusts(proxies), MediaAllowPrivate: a.Config.MediaAllowPrivate,
		Notify: a.Notify, StreamsPerUser: int(a.Config.StreamsPerUser), MaxStreams: streamsUnder(a.Config.MaxStreams, a.Config.MaxConnections, a.Log),
		CORSOrigins: a.Config.Origins(), ClockProblem: a.ClockProblem,
		Drift: a.Drift})
	a.API.Register(e)
	if a.Config.MetricsAddr == "" {
		e.GET("/metrics", a.metricsHandler()) // else on a listener of its own (serveMetrics)
	}
	spa := echo.WrapHandler(frontend.Handler(a.Config.PluginsDir))
	e.GET("/admin", spa)
	e.GET("/admin/*", spa)
	e.GET("/", func(c echo.Context) error { return c.Redirect(http.StatusFound, "/admin/") })
	return e
}

// baseEcho is an Echo answering in the API's error shape, with the security headers set
// before routing so that every answer has them.
func (a *App) baseEcho() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = api.ErrorHandler(a.Log)
	e.Pre(middleware.SecureWithConfig(middleware.SecureConfig{ContentTypeNosniff: "nosniff", XFrameOptions: "DENY", ReferrerPolicy: "same-origin"}))
	return e
}

// backfillSummary is the backfill queue's summary for the overview, or nil when unreadable.
func (a *App) backfillSummary(ctx context.Context) *scheduler.BackfillSummary {
	s, err := a.Backfill.Summary(ctx)
	if err != nil {
		a.Log.Error("backfill summary", "err", err)
		return nil
	}
	return &s
}

// ipExtractor finds a request's client address: the TCP peer's, or from X-Forwarded-For when
// the peer is a trusted proxy. Unlike Echo's defaults, only OWED_TRUSTED_PROXIES is trusted.
func ipExtractor(proxies []*net.IPNet) echo.IPExtractor {
	if len(proxies) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range proxies {
		opts = append(opts, echo.TrustIPRange(p))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// trusts reports whether a peer address is one of the trusted proxies.
func trusts(proxies []*net.IPNet) func(ip net.IP) bool {
	return func(ip net.IP) bool {
		return slices.ContainsFunc(proxies, func(p *net.IPNet) bool { return p.Contains(ip) })
	}
}

// methodLabel is a request method as a bounded metrics label: a method owed knows, else "other".
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// measure counts requests by route template, method and status: bounded labels only.
func (a *App) measure(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		method := methodLabel(c.Request().Method)
		route := c.Path()
		if route == "" || route == "/*" { // Echo's path for a request no route matched
			route = "unmatched"
		}
		a.Metrics.Requests.WithLabelValues(method, route, strconv.Itoa(c.Response().Status)).Inc()
		a.Metrics.RequestLatency.WithLabelValues(method, route).Observe(time.Since(start).Seconds())
		return nil
	}
}

// newSchedule puts the periodic work on robfig/cron, one entry per period: the runners' wakes,
// the clock check, the retention pruner (on the sweep's period) and the hourly optimize.
func (a *App) newSchedule() error {
	s := scheduler.NewSchedule(a.Log)
	for _, r := range []interface {
		ScheduleOn(*scheduler.Schedule) error
	}{a.Content, a.Backfill, a.Webhooks, a.Drift} {
		if err := r.ScheduleOn(s); err != nil {
			return err
		}
	}
	if a.dbClock != nil {
		if err := s.Every("clock check", clockCheckEvery, a.checkClock); err != nil {
			return err
		}
	}
	if err := s.Every("retention pruner", a.Config.SweepEvery, a.Prune); err != nil {
		return err
	}
	// SQLite's planner statistics follow the tables as they grow (see Store.Optimize).
	if err := s.Every("optimize", time.Hour, func(ctx context.Context) {
		if err := a.Store.Optimize(ctx); err != nil && ctx.Err() == nil {
			a.Log.Warn("optimize", "err", err)
		}
	}); err != nil {
		return err
	}
	a.Schedule = s
	return nil
}

// StartRunners starts the runners, then the schedule, without serving HTTP.
func (a *App) StartRunners(ctx context.Context) error {
	for _, r := range []interface{ Start(context.Context) error }{a.Content, a.Webhooks, a.Backfill} {
		if err := r.Start(ctx); err != nil {
			return err
		}
	}
	a.Schedule.Start()
	return nil
}

const pruneLease = 10 * time.Minute // how long a replica holds the pruning chore

// PruneOnce deletes history past its retention (models.Store.Prune) when this replica holds
// the pruning lease, and records what it did in metrics. It reports whether it pruned.
func (a *App) PruneOnce(ctx context.Context) (bool, error) {
	now := a.Clock.Now()
	mine, err := a.Store.TakeMaintenance(ctx, "prune", a.owner, now, pruneLease)
	if err != nil || !mine {
		return false, err
	}
	p, err := a.Store.Prune(ctx, now, models.Retention{Events: a.Config.RetainEvents, Deliveries: a.Config.RetainDelivered,
		Idempotency: a.Config.IdempotencyTTL}, 0)
	if err == nil {
		var n int64
		n, err = a.Store.PruneAudit(ctx, now, a.Config.RetainAudit, 0)
		a.Metrics.Pruned.WithLabelValues("audit").Add(float64(n))
	}
	for table, n := range map[string]int64{"events": p.Events, "webhook_deliveries": p.Deliveries,
		"webhook_attempts": p.Attempts} {
		a.Metrics.Pruned.WithLabelValues(table).Add(float64(n))
	}
	for table, oldest := range map[string]time.Time{"events": p.OldestEvent, "webhook_deliveries": p.OldestDelivery} {
		age := 0.0
		if !oldest.IsZero() {
			age = now.Sub(oldest).Seconds()
		}
		a.Metrics.OldestKept.WithLabelValues(table).Set(age)
	}
	if p.Events+p.Deliveries > 0 {
		a.Log.Info("pruned", "events", p.Events, "deliveries", p.Deliveries, "attempts", p.Attempts)
	}
	return true, err
}

// Prune forgets past days' budgets and expired sessions, and history past its retention when
// this replica holds the pruning lease (PruneOnce).
func (a *App) Prune(ctx context.Context) {
	now := a.Clock.Now()
	if _, err := a.Store.PruneBudgets(ctx, now); err != nil && ctx.Err() == nil {
		a.Log.Warn("prune budgets", "err", err)
	}
	if _, err := a.Store.PruneSessions(ctx, now); err != nil && ctx.Err() == nil {
		a.Log.Warn("prune sessions", "err", err)
	}
	if _, err := a.PruneOnce(ctx); err != nil && ctx.Err() == nil {
		a.Log.Warn("prune", "err", err)
	}
}

// Start listens on the configured address and starts the runners.
func (a *App) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.Config.Addr)
	if err != nil {
		return err
	}
	return a.Serve(ctx, ln)
}

// Serve serves HTTP on ln and starts the runners.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	// The notifier listens before the first request, so no change after it is missed.
	if err := a.Notify.Start(ctx); err != nil {
		return err
	}
	t := a.timeouts
	conns := maxConnections(a.Config.MaxConnections)
	proxies, _ := a.Config.Proxies() // FromEnv checked them
	s := newSlots(int(conns), connectionsPerIP(a.Config.MaxConnectionsPerIP, conns), trusts(proxies), t)
	ln = slotListener{Listener: ln, s: s}
	a.server = t.server(a.Echo)
	a.server.ErrorLog, a.server.ConnState, a.server.ConnContext = slog.NewLogLogger(a.Log.Handler(), slog.LevelWarn), s.connState, connContext
	// Its graceful shutdown waits for open requests, and a stream never ends by itself.
	a.server.RegisterOnShutdown(a.API.CloseStreams)
	if err := a.serveMetrics(); err != nil {
		return fmt.Errorf("OWED_METRICS_ADDR: %w", err)
	}
	go a.serveOn(a.server, ln, "HTTP")
	a.Log.Info("owed serving", "addr", ln.Addr().String(), "database", a.Store.Dialect(), "version", BuildVersion())
	return a.StartRunners(ctx)
}

// serveOn serves srv on ln until Shutdown; a listener that fails before is sent to Failed.
func (a *App) serveOn(srv *http.Server, ln net.Listener, what string) {
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return
	}
	select {
	case a.failed <- fmt.Errorf("serving %s on %s: %w", what, ln.Addr(), err):
	default: // the first failure is what stops the process; the rest add nothing
	}
}

// Failed receives the error of a listener that stopped serving other than by Shutdown; its
// owner then shuts the process down and exits with it, rather than run unreachable.
func (a *App) Failed() <-chan error { return a.failed }

// Shutdown stops the process in stages, all under ctx's one deadline: HTTP (in-flight requests
// finish, streams end at once), cron, the runners together (running work finishes until the
// deadline, then is cancelled; held leases are released even past it), the notifier, and last
// the database.
func (a *App) Shutdown(ctx context.Context) error {
	return stopInStages(ctx, a.stages()...)
}

type stopper func(ctx context.Context) error

// stage is a step of the stop: its stoppers run at once.
type stage struct {
	name  string
	stops []stopper
}

// stages are the steps of Shutdown, in order.
func (a *App) stages() []stage {
	var serving []stopper
	for _, srv := range []*http.Server{a.server, a.metricsServer} {
		if srv != nil {
			serving = append(serving, srv.Shutdown)
		}
	}
	return []stage{
		{"http", serving},
		{"cron", []stopper{a.Schedule.Stop}},
		{"runners", []stopper{a.Content.Stop, a.Backfill.Stop, a.Webhooks.Stop}},
		{"notifier", []stopper{func(context.Context) error { a.Notify.Stop(); return nil }}},
		{"database", []stopper{func(context.Context) error { return a.Store.Close() }}},
	}
}

// stopInStages runs the stages in order, all under ctx, and joins their errors.
func stopInStages(ctx context.Context, stages ...stage) error {
	var errs []error
	for _, st := range stages {
		stopped := make([]error, len(st.stops))
		var wg sync.WaitGroup
		for i, stop := range st.stops {
			wg.Go(func() { stopped[i] = stop(ctx) })
		}
		wg.Wait()
		errs = append(errs, stopped...)
	}
	return errors.Join(errs...)
}
