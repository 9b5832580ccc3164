// Package app assembles owed: configuration, the store, the runners and the HTTP server, and
// starts and stops them in order.
package app

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/owed/owed/api"
	"github.com/owed/owed/media"
	"github.com/owed/owed/migrations"
	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
	"github.com/owed/owed/scheduler"
	"github.com/owed/owed/webhooks"
)

// Config is owed's configuration. Every field is one Setting below: an OWED_* environment
// variable, a command-line flag of the same name, and a row of the README's table.
type Config struct {
	Addr                 string
	DataDir              string
	DatabaseURL          string
	AdminToken           string
	ModelURL             string
	ModelKey             string
	ModelAPI             string
	ModelName            string
	ModelTimeout         time.Duration
	SweepEvery           time.Duration
	Lease                time.Duration
	InlineWait           time.Duration
	DailyBudget          int64
	MediaMinGap          time.Duration
	MediaMaxGap          time.Duration
	WalkIdle             time.Duration
	PluginsDir           string
	WebhooksAllowPrivate bool
	MediaAllowPrivate    bool
	SweepConcurrency     int
	DatabaseMaxConns     int64
	WriteRate            float64
	WriteBurst           int64
	ShutdownGrace        time.Duration
	LogLevel             slog.Level
	LogFormat            string // "json" or "text"; empty: text on a terminal, JSON otherwise
	RetainEvents         time.Duration
	RetainDelivered      time.Duration
	RetainDone           time.Duration // at most RetainEvents: read from the settling events
	IdempotencyTTL       time.Duration
	RetainAudit          time.Duration
	PublicURL            string
	TrustedProxies       string
	ModelConcurrency     int
	ModelBreaker         int // 0: no breaker
	ModelProxy           string
	StreamsPerUser       int64
	MaxStreams           int64
	MaxConnections       int64 // 0: the open-file limit less a tenth
	CORSOrigins          string
	WebhookSecretOverlap time.Duration
	MetricsToken         string
	MetricsAddr          string
	// ReviewBelow is the review band (0: off); a per-kind value overrides it when not negative.
	ReviewBelow         float64
	ReviewBelowRevision float64
	ReviewBelowComment  float64
	ReviewBelowPitch    float64

	MaxClockSkew             time.Duration
	MaxConnectionsPerIP      int64 // 0: a quarter of MaxConnections
	DatabaseListenURL        string
	MigrateLockTimeout       time.Duration
	DatabaseMaxConnLifetime  time.Duration
	DatabaseLockTimeout      time.Duration // 0: the server's own
	DatabaseStatementTimeout time.Duration // 0: the server's own

	DriftEvery time.Duration
	DriftAlert float64

	// The candidate (docs/shadow.md): each unset part of its model is the live model's.
	ShadowModelURL   string
	ShadowModelKey   string
	ShadowModelAPI   string
	ShadowModelName  string
	ShadowRubric     string
	ShadowDailyLimit int64
}

// HasCandidate reports whether a candidate is set (OWED_SHADOW_MODEL_URL, _NAME or _RUBRIC).
func (c Config) HasCandidate() bool {
	return c.ShadowModelURL != "" || c.ShadowModelName != "" || c.ShadowRubric != ""
}

// CandidateModel reports whether the candidate is a model other than the live one (its own URL
// or name), whose verdicts are then shadowed too; a rubric alone changes scores only.
func (c Config) CandidateModel() bool {
	return c.ShadowModelURL != "" || (c.ShadowModelName != "" && c.ShadowModelName != c.ModelName)
}

// Candidate is the candidate's model client configuration, each part unset falling back to the
// live model's, its model name and its rubric.
func (c Config) Candidate() (cfg modelclient.Config, rubric string) {
	cfg = modelclient.Config{URL: c.ModelURL, Key: c.ModelKey, API: c.ModelAPI, Model: c.ModelName, Timeout: c.ModelTimeout}
	if c.ShadowModelURL != "" {
		cfg.URL, cfg.Key = c.ShadowModelURL, c.ShadowModelKey
	}
	if c.ShadowModelAPI != "" {
		cfg.API = c.ShadowModelAPI
	}
	if c.ShadowModelName != "" {
		cfg.Model = c.ShadowModelName
	}
	return cfg, cmp.Or(c.ShadowRubric, scheduler.RubricID)
}

// ListenURL is the database URL the notifier LISTENs on (PostgreSQL), or "" on SQLite.
func (c Config) ListenURL() string {
	switch {
	case !models.IsPostgres(c.DatabaseURL):
		return ""
	case c.DatabaseListenURL != "":
		return c.DatabaseListenURL
	}
	return c.DatabaseURL
}

// StoreTimeouts are the lock and statement timeouts as models.Options takes them (<0: off).
func (c Config) StoreTimeouts() (lock, statement time.Duration) {
	off := func(d time.Duration) time.Duration {
		if d == 0 {
			return -1
		}
		return d
	}
	return off(c.DatabaseLockTimeout), off(c.DatabaseStatementTimeout)
}

// ReviewBand is the review band per kind of item: each kind's own value, else ReviewBelow.
func (c Config) ReviewBand() map[models.Kind]float64 {
	out := make(map[models.Kind]float64, len(models.Kinds))
	for k, v := range map[models.Kind]float64{models.KindRevision: c.ReviewBelowRevision,
		models.KindComment: c.ReviewBelowComment, models.KindPitch: c.ReviewBelowPitch} {
		out[k] = c.ReviewBelow
		if v >= 0 {
			out[k] = v
		}
	}
	return out
}

// reviewBelow parses a review band: a confidence from 0 (off) to 1.
func reviewBelow(field func(c *Config) *float64) func(c *Config, v string) error {
	return decimal(field, func(f float64) bool { return f >= 0 && f <= 1 }, "want a confidence from 0 (off) to 1")
}

// decimal parses a number that within accepts (never NaN: within's comparisons are false).
func decimal(field func(c *Config) *float64, within func(float64) bool, want string) func(c *Config, v string) error {
	return func(c *Config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !within(f) {
			return errors.New(want)
		}
		*field(c) = f
		return nil
	}
}

// PublicHTTPS reports whether owed is reached over https (OWED_PUBLIC_URL).
func (c Config) PublicHTTPS() bool {
	return strings.HasPrefix(strings.ToLower(c.PublicURL), "https://")
}

// Proxies parses TrustedProxies: each entry a CIDR, or a bare address.
func (c Config) Proxies() ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, f := range strings.Split(c.TrustedProxies, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			ip := net.ParseIP(f)
			if ip == nil {
				return nil, fmt.Errorf("%q is neither a CIDR nor an address", f)
			}
			bits := 128
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			out = append(out, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// Defaults is the configuration with nothing set, components' own defaults included; the
// README's column of defaults is made from it.
func Defaults() Config {
	return Config{
		Addr: "127.0.0.1:8080", DataDir: "./data", ModelAPI: modelclient.APIRelay, ModelName: scheduler.DefaultModelName,
		ModelTimeout: modelclient.DefaultTimeout, SweepEvery: scheduler.DefaultSweepEvery, Lease: scheduler.DefaultLease, InlineWait: 10 * time.Second,
		DailyBudget: models.DefaultDailyLimit, MediaMinGap: media.DefaultMinGap, MediaMaxGap: media.DefaultMaxGap,
		WalkIdle: scheduler.DefaultWalkIdle, SweepConcurrency: scheduler.DefaultConcurrency, ShutdownGrace: 20 * time.Second,
		WriteRate: 20, WriteBurst: 100, DatabaseMaxConns: models.DefaultMaxConns, LogLevel: slog.LevelInfo,
		RetainEvents: 720 * time.Hour, RetainDelivered: 720 * time.Hour, RetainDone: 168 * time.Hour, ModelConcurrency: scheduler.DefaultModelConcurrency,
		ModelBreaker:   scheduler.DefaultModelBreaker,
		IdempotencyTTL: api.DefaultIdempotencyTTL,
		StreamsPerUser: api.DefaultStreamsPerUser, MaxStreams: api.DefaultMaxStreams,
		WebhookSecretOverlap: webhooks.DefaultSecretOverlap,
		ReviewBelowRevision:  -1, ReviewBelowComment: -1, ReviewBelowPitch: -1,
		RetainAudit:        8760 * time.Hour,
		MaxClockSkew:       DefaultMaxClockSkew,
		MigrateLockTimeout: migrations.DefaultLockTimeout, DatabaseMaxConnLifetime: models.DefaultMaxConnLifetime,
		DatabaseLockTimeout: models.DefaultLockTimeout, DatabaseStatementTimeout: models.DefaultStatementTimeout,
		DriftEvery: scheduler.DefaultDriftEvery, DriftAlert: scheduler.DefaultDriftAlert,
		ShadowDailyLimit: scheduler.DefaultShadowDailyLimit,
	}
}

// defaults is Defaults, for the README's column.
var defaults = Defaults()

// shown is a default value as the README shows it: as its variable would be written, quoted as
// code (durations in their shortest form, 2m rather than 2m0s; a log level in lower case).
func shown(v any) string {
	var s string
	switch v := v.(type) {
	case time.Duration:
		s = v.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
	case slog.Level:
		s = strings.ToLower(v.String())
	default:
		s = fmt.Sprint(v)
	}
	return "`" + s + "`"
}

// Setting is one configuration value: where it is read from, its default, and its parser.
type Setting struct {
	Env     string // the environment variable, OWED_…
	Flag    string // the command-line flag, without dashes
	Default string // the default, as documented
	Usage   string // what it means, one line
	set     func(c *Config, v string) error
}

// Settings lists every setting once, in the order the README shows them.
var Settings = []Setting{
	{Env: "OWED_ADDR", Default: shown(defaults.Addr), Usage: "listen address", set: text(func(c *Config) *string { return &c.Addr })},
	{Env: "OWED_DATA_DIR", Flag: "data", Default: shown(defaults.DataDir), Usage: "database file and preview cache", set: text(func(c *Config) *string { return &c.DataDir })},
	{Env: "OWED_DATABASE_URL", Flag: "database", Default: "SQLite file in the data dir", Usage: "or `postgres://…` (or `host=… dbname=…`; several hosts as `a,b`) for several replicas", set: databaseURL},
	{Env: "OWED_ADMIN_TOKEN", Default: "none (a first admin token is printed once on an empty database)", Usage: "admin bearer token, at least 32 characters", set: text(func(c *Config) *string { return &c.AdminToken })},
	{Env: "OWED_MODEL_URL", Default: "none", Usage: "the model's URL; without one jobs wait as `unreachable`", set: text(func(c *Config) *string { return &c.ModelURL })},
	{Env: "OWED_MODEL_KEY", Default: "none", Usage: "the model's bearer key (never logged)", set: text(func(c *Config) *string { return &c.ModelKey })},
	{Env: "OWED_MODEL_API", Default: shown(defaults.ModelAPI), Usage: "the model's dialect: `relay` or `openai`", set: oneOf(func(c *Config) *string { return &c.ModelAPI }, modelclient.APIRelay, modelclient.APIOpenAI)},
	{Env: "OWED_MODEL_NAME", Default: shown(defaults.ModelName), Usage: "the model named in requests and recorded with each score", set: text(func(c *Config) *string { return &c.ModelName })},
	{Env: "OWED_MODEL_PROXY", Default: "none", Usage: "an `http://` or `https://` proxy for model calls; `HTTP_PROXY` and the like are never read", set: func(c *Config, v string) error {
		if _, err := proxyURL(v); err != nil {
			return err
		}
		c.ModelProxy = v
		return nil
	}},
	{Env: "OWED_MODEL_TIMEOUT", Default: shown(defaults.ModelTimeout), Usage: "one model call's deadline (a timeout is `unreachable`)", set: duration(func(c *Config) *time.Duration { return &c.ModelTimeout }, time.Millisecond)},
	{Env: "OWED_SWEEP_EVERY", Default: shown(defaults.SweepEvery), Usage: "the period of the sweep of everyone's due jobs (its robfig/cron entry; the retention pruner's too)", set: duration(func(c *Config) *time.Duration { return &c.SweepEvery }, time.Second)},
	{Env: "OWED_SWEEP_CONCURRENCY", Default: shown(defaults.SweepConcurrency), Usage: "jobs a sweep runs at once, at most the model's free slots (`OWED_MODEL_CONCURRENCY`)", set: number(func(c *Config) *int { return &c.SweepConcurrency }, 1)},
	// At least 3: a score's three runs are asked together and hold three slots.
	{Env: "OWED_MODEL_CONCURRENCY", Default: shown(defaults.ModelConcurrency), Usage: "model calls in flight per process, shared by every claimer (writes first, then authors' views, then the sweep); a score counts as its three calls; at least 3", set: number(func(c *Config) *int { return &c.ModelConcurrency }, scheduler.ScoreRuns)},
	{Env: "OWED_MODEL_BREAKER", Default: shown(defaults.ModelBreaker), Usage: "consecutive model failures (unreachable, 5xx, 429) that open the breaker: owed stops asking, and charging, until a probe succeeds (`0`: no breaker)", set: number(func(c *Config) *int { return &c.ModelBreaker }, 0)},
	{Env: "OWED_LEASE", Default: shown(defaults.Lease), Usage: "how long a claim holds a job", set: duration(func(c *Config) *time.Duration { return &c.Lease }, time.Second)},
	{Env: "OWED_INLINE_WAIT", Default: shown(defaults.InlineWait), Usage: "how long a write waits for its inline screen before answering `pending`", set: duration(func(c *Config) *time.Duration { return &c.InlineWait }, 0)},
	// At least 1: the store reads 0 as "the default".
	{Env: "OWED_DAILY_BUDGET", Default: shown(defaults.DailyBudget), Usage: "model calls per author per UTC day", set: number(func(c *Config) *int64 { return &c.DailyBudget }, 1)},
	{Env: "OWED_MEDIA_MIN_GAP_MS", Default: shown(defaults.MediaMinGap.Milliseconds()), Usage: "least gap between media requests, in milliseconds", set: millis(func(c *Config) *time.Duration { return &c.MediaMinGap })},
	{Env: "OWED_MEDIA_MAX_GAP_MS", Default: shown(defaults.MediaMaxGap.Milliseconds()), Usage: "greatest gap between media requests, in milliseconds", set: millis(func(c *Config) *time.Duration { return &c.MediaMaxGap })},
	{Env: "OWED_WALK_IDLE", Default: shown(defaults.WalkIdle), Usage: "how long an active scrape that pushes nothing still holds the walk lock", set: duration(func(c *Config) *time.Duration { return &c.WalkIdle }, time.Second)},
	{Env: "OWED_PLUGINS_DIR", Default: "none", Usage: "a folder of extra SPA plugin modules", set: text(func(c *Config) *string { return &c.PluginsDir })},
	{Env: "OWED_WEBHOOK_SECRET_OVERLAP", Default: shown(defaults.WebhookSecretOverlap), Usage: "after `POST /api/admin/webhooks/{id}/secret`, how long deliveries carry the previous secret's signature too", set: duration(func(c *Config) *time.Duration { return &c.WebhookSecretOverlap }, 0)},
	{Env: "OWED_WEBHOOKS_ALLOW_PRIVATE", Default: "off", Usage: "allow webhook URLs on loopback, private or otherwise non-public addresses", set: boolean(func(c *Config) *bool { return &c.WebhooksAllowPrivate })},
	{Env: "OWED_MEDIA_ALLOW_PRIVATE", Default: "off", Usage: "allow media URLs on loopback, private or otherwise non-public addresses (tests with a local CDN set it)", set: boolean(func(c *Config) *bool { return &c.MediaAllowPrivate })},
	{Env: "OWED_PUBLIC_URL", Default: "none", Usage: "the URL people reach owed at; when `https://…`, session cookies are `Secure` and HSTS is sent", set: publicURL},
	{Env: "OWED_TRUSTED_PROXIES", Default: "none", Usage: "comma-separated CIDRs of reverse proxies whose `X-Forwarded-For` / `X-Forwarded-Proto` are believed; without, the client address is the TCP peer's", set: func(c *Config, v string) error {
		if _, err := (Config{TrustedProxies: v}).Proxies(); err != nil {
			return fmt.Errorf("%v; want CIDRs like 10.0.0.0/8,fd00::/8", err)
		}
		c.TrustedProxies = v
		return nil
	}},
	{Env: "OWED_WRITE_RATE", Default: shown(defaults.WriteRate), Usage: "each token's writes per second (0: no limit); past it and the burst, 429 with `Retry-After`", set: decimal(func(c *Config) *float64 { return &c.WriteRate }, func(f float64) bool { return f >= 0 && !math.IsInf(f, 0) }, "want writes per second, 0 for no limit")},
	{Env: "OWED_WRITE_BURST", Default: shown(defaults.WriteBurst), Usage: "each token's burst of writes", set: number(func(c *Config) *int64 { return &c.WriteBurst }, 1)},
	{Env: "OWED_DATABASE_MAX_CONNS", Default: shown(defaults.DatabaseMaxConns), Usage: "PostgreSQL connections per process", set: number(func(c *Config) *int64 { return &c.DatabaseMaxConns }, 2)},
	{Env: "OWED_DATABASE_LISTEN_URL", Default: "`OWED_DATABASE_URL`", Usage: "a direct (session) PostgreSQL connection for `LISTEN` when `OWED_DATABASE_URL` goes through a pooler in transaction mode (docs/scaling.md)", set: func(c *Config, v string) error {
		if !models.IsPostgres(v) {
			return fmt.Errorf("want a PostgreSQL URL (postgres://… or host=… dbname=…)")
		}
		return postgresURL(&c.DatabaseListenURL, v)
	}},
	{Env: "OWED_MIGRATE_LOCK_TIMEOUT", Default: shown(defaults.MigrateLockTimeout), Usage: "how long a start waits for another process's migration lock (PostgreSQL) before it exits with an error", set: duration(func(c *Config) *time.Duration { return &c.MigrateLockTimeout }, time.Second)},
	{Env: "OWED_DATABASE_MAX_CONN_LIFETIME", Default: shown(defaults.DatabaseMaxConnLifetime), Usage: "a pooled PostgreSQL connection is replaced after this long, so a pool that reached a standby finds the primary again", set: duration(func(c *Config) *time.Duration { return &c.DatabaseMaxConnLifetime }, time.Second)},
	{Env: "OWED_DATABASE_LOCK_TIMEOUT", Default: shown(defaults.DatabaseLockTimeout), Usage: "a PostgreSQL statement waiting this long for a lock fails: 503 `unavailable` (`0`: the server's setting)", set: duration(func(c *Config) *time.Duration { return &c.DatabaseLockTimeout }, 0)},
	{Env: "OWED_DATABASE_STATEMENT_TIMEOUT", Default: shown(defaults.DatabaseStatementTimeout), Usage: "a PostgreSQL statement running this long fails: 503 `unavailable` (`0`: the server's setting)", set: duration(func(c *Config) *time.Duration { return &c.DatabaseStatementTimeout }, 0)},
	{Env: "OWED_STREAMS_PER_USER", Default: shown(defaults.StreamsPerUser), Usage: "streams and held long polls of `mine` one user may have open together; past it 429 with `Retry-After`", set: number(func(c *Config) *int64 { return &c.StreamsPerUser }, 1)},
	{Env: "OWED_MAX_STREAMS", Default: shown(defaults.MaxStreams), Usage: "streams and held long polls of the process; past it 503 with `Retry-After`", set: number(func(c *Config) *int64 { return &c.MaxStreams }, 1)},
	{Env: "OWED_MAX_CONNECTIONS", Default: "the open-file limit less a tenth", Usage: "connections the listener holds at once; more wait to be accepted, so the file limit is never reached and `/healthz` keeps answering", set: number(func(c *Config) *int64 { return &c.MaxConnections }, 16)},
	{Env: "OWED_MAX_CONNECTIONS_PER_IP", Default: "a quarter of `OWED_MAX_CONNECTIONS`", Usage: "connections one client address may hold (a trusted proxy's address has no share of its own); near the cap idle keep-alive connections are closed first, and a few slots above it are kept for `/healthz` and `/readyz`", set: number(func(c *Config) *int64 { return &c.MaxConnectionsPerIP }, 1)},
	{Env: "OWED_MAX_CLOCK_SKEW", Default: shown(defaults.MaxClockSkew), Usage: "how far this process's clock may be from the database's before it says so in the log and `/readyz` (`clock`); owed keeps time by the database's clock either way", set: duration(func(c *Config) *time.Duration { return &c.MaxClockSkew }, 0)},
	{Env: "OWED_CORS_ORIGINS", Default: "none", Usage: "comma-separated exact origins (`https://site.example`) whose browsers may call the listener and public routes (never `/api/admin/*`); see docs/live.md", set: corsOrigins},
	{Env: "OWED_SHUTDOWN_GRACE", Default: shown(defaults.ShutdownGrace), Usage: "how long a stop takes at most, in all: requests, then running jobs, finish within it", set: duration(func(c *Config) *time.Duration { return &c.ShutdownGrace }, 0)},
	{Env: "OWED_RETAIN_EVENTS", Default: shown(defaults.RetainEvents), Usage: "how long attempt events are kept", set: duration(func(c *Config) *time.Duration { return &c.RetainEvents }, time.Hour)},
	{Env: "OWED_RETAIN_DONE", Default: shown(defaults.RetainDone), Usage: "how long settled jobs stay listed (state `done`) in the admin's jobs; read from their attempts' events, so at most OWED_RETAIN_EVENTS", set: duration(func(c *Config) *time.Duration { return &c.RetainDone }, time.Hour)},
	{Env: "OWED_RETAIN_DELIVERIES", Default: shown(defaults.RetainDelivered), Usage: "how long delivered or cancelled webhook deliveries and their attempts are kept", set: duration(func(c *Config) *time.Duration { return &c.RetainDelivered }, time.Hour)},
	{Env: "OWED_IDEMPOTENCY_TTL", Default: shown(defaults.IdempotencyTTL), Usage: "how long an `Idempotency-Key`'s answer is kept for replay", set: duration(func(c *Config) *time.Duration { return &c.IdempotencyTTL }, time.Minute)},
	{Env: "OWED_METRICS_TOKEN", Default: "none (`/metrics` is open)", Usage: "a bearer token `/metrics` requires (`Authorization: Bearer …`); 401 without it", set: text(func(c *Config) *string { return &c.MetricsToken })},
	{Env: "OWED_METRICS_ADDR", Default: "none (`/metrics` on `OWED_ADDR`)", Usage: "a listen address of its own for `/metrics`, which `OWED_ADDR` then does not serve", set: text(func(c *Config) *string { return &c.MetricsAddr })},
	{Env: "OWED_RETAIN_AUDIT", Default: shown(defaults.RetainAudit), Usage: "how long the audit trail of operator actions is kept", set: duration(func(c *Config) *time.Duration { return &c.RetainAudit }, time.Hour)},
	{Env: "OWED_LOG_LEVEL", Default: shown(defaults.LogLevel), Usage: "`debug`, `info`, `warn` or `error`", set: func(c *Config, v string) error {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			return fmt.Errorf("want debug, info, warn or error")
		}
		return nil
	}},
	{Env: "OWED_LOG_FORMAT", Default: "`json` (`text` on a terminal)", Usage: "`json` or `text`", set: oneOf(func(c *Config) *string { return &c.LogFormat }, "json", "text")},
	{Env: "OWED_REVIEW_BELOW", Default: "`0` (off)", Usage: "model verdicts less confident than this (0–1) wait for a moderator in the review queue (why `review`), asking and charging nothing more", set: reviewBelow(func(c *Config) *float64 { return &c.ReviewBelow })},
	{Env: "OWED_REVIEW_BELOW_REVISION", Default: "`OWED_REVIEW_BELOW`", Usage: "the review band for revisions", set: reviewBelow(func(c *Config) *float64 { return &c.ReviewBelowRevision })},
	{Env: "OWED_REVIEW_BELOW_COMMENT", Default: "`OWED_REVIEW_BELOW`", Usage: "the review band for comments", set: reviewBelow(func(c *Config) *float64 { return &c.ReviewBelowComment })},
	{Env: "OWED_REVIEW_BELOW_PITCH", Default: "`OWED_REVIEW_BELOW`", Usage: "the review band for pitches", set: reviewBelow(func(c *Config) *float64 { return &c.ReviewBelowPitch })},

	// Drift on the anchor set (docs/shadow.md).
	{Env: "OWED_DRIFT_EVERY", Default: shown(defaults.DriftEvery), Usage: "how often the anchor set is re-run against the live model (at least 1m); a run that cannot complete is tried again within the hour", set: duration(func(c *Config) *time.Duration { return &c.DriftEvery }, time.Minute)},
	{Env: "OWED_DRIFT_ALERT", Default: shown(defaults.DriftAlert), Usage: "agreement on the anchor set's verdicts below this (0–1, above 0) raises `model.drift`, as does mean art moving by more than 0.06", set: decimal(func(c *Config) *float64 { return &c.DriftAlert }, func(f float64) bool { return f > 0 && f <= 1 }, "want an agreement above 0, at most 1, like 0.9")},

	// The candidate (docs/shadow.md).
	{Env: "OWED_SHADOW_MODEL_URL", Default: "none", Usage: "a candidate model's URL, asked beside the live one and never acted on (docs/shadow.md)", set: text(func(c *Config) *string { return &c.ShadowModelURL })},
	{Env: "OWED_SHADOW_MODEL_KEY", Default: "none", Usage: "the candidate model's bearer key (never logged); needs `OWED_SHADOW_MODEL_URL`", set: text(func(c *Config) *string { return &c.ShadowModelKey })},
	{Env: "OWED_SHADOW_MODEL_API", Default: "`OWED_MODEL_API`", Usage: "the candidate model's dialect: `relay` or `openai`", set: oneOf(func(c *Config) *string { return &c.ShadowModelAPI }, modelclient.APIRelay, modelclient.APIOpenAI)},
	{Env: "OWED_SHADOW_MODEL_NAME", Default: "`OWED_MODEL_NAME`", Usage: "the candidate model named in its requests and recorded with its answers (a name alone: the live URL asked for another model)", set: text(func(c *Config) *string { return &c.ShadowModelName })},
	{Env: "OWED_SHADOW_RUBRIC", Default: "the live rubric", Usage: "the candidate's rubric for scores: " + rubricNames() + "; set alone, the live model is asked with it", set: func(c *Config, v string) error {
		if _, ok := scheduler.Rubrics[v]; !ok {
			return fmt.Errorf("want a rubric owed knows: %s", rubricNames())
		}
		c.ShadowRubric = v
		return nil
	}},
	{Env: "OWED_SHADOW_DAILY_LIMIT", Default: shown(defaults.ShadowDailyLimit), Usage: "the candidate's model calls per UTC day (a score counts as its three), charged to no author", set: number(func(c *Config) *int64 { return &c.ShadowDailyLimit }, 1)},
}

// rubricNames lists the rubrics owed knows, for messages and the README.
func rubricNames() string {
	names := make([]string, 0, len(scheduler.Rubrics))
	for id := range scheduler.Rubrics {
		names = append(names, "`"+id+"`")
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// FlagName is the setting's flag: its own, or the variable's (OWED_MODEL_URL is --model-url).
func (s Setting) FlagName() string {
	if s.Flag != "" {
		return s.Flag
	}
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s.Env, "OWED_")), "_", "-")
}

// FromEnv reads the configuration from getenv (os.Getenv in production), over the defaults.
// Its errors name the variable at fault, every one of them at once.
func FromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Defaults()
	var errs []string
	for _, s := range Settings {
		v := strings.TrimSpace(getenv(s.Env))
		if v == "" {
			continue
		}
		if err := s.set(&c, v); err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q: %v", s.Env, redactURL(v), err))
		}
	}
	if err := c.Validate(); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("configuration: %s", strings.Join(errs, "; "))
	}
	return c, nil
}

// Flags registers every setting on fs as a flag that overrides the environment; call
// Validate after parsing. A bad value fails the parse with a message naming the flag.
func (c *Config) Flags(fs *flag.FlagSet) {
	for _, s := range Settings {
		// No backquotes: the flag package would take the quoted word for the value's name.
		fs.Func(s.FlagName(), strings.ReplaceAll(s.Usage, "`", "")+" ("+s.Env+")", func(v string) error { return s.set(c, strings.TrimSpace(v)) })
	}
}

// MinAdminToken is the shortest OWED_ADMIN_TOKEN owed starts with: a token an admin typed
// (`abc`) is guessed long before the write limit notices.
const MinAdminToken = 32

// Validate checks what no single setting can: how settings relate, and OWED_ADMIN_TOKEN's
// length (checked here rather than where it is read so that its value never reaches an error).
func (c Config) Validate() error {
	var errs []string
	if c.MediaMinGap > c.MediaMaxGap {
		errs = append(errs, "OWED_MEDIA_MIN_GAP_MS must not exceed OWED_MEDIA_MAX_GAP_MS")
	}
	if c.RetainDone > c.RetainEvents {
		errs = append(errs, "OWED_RETAIN_DONE must not exceed OWED_RETAIN_EVENTS: settled jobs are listed from their attempts' events, which go after OWED_RETAIN_EVENTS")
	}
	if c.DatabaseListenURL != "" && !models.IsPostgres(c.DatabaseURL) {
		errs = append(errs, "OWED_DATABASE_LISTEN_URL needs a PostgreSQL OWED_DATABASE_URL")
	}
	if n := len(c.AdminToken); n > 0 && n < MinAdminToken {
		// The token itself is never shown: it is a credential.
		errs = append(errs, fmt.Sprintf("OWED_ADMIN_TOKEN must be at least %d characters (this one has %d); make one with `openssl rand -hex 24`", MinAdminToken, n))
	}
	errs = append(errs, c.validateCandidate()...)
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// validateCandidate checks the candidate's settings together: parts of a model need its URL,
// and a candidate must differ from the live model and rubric.
func (c Config) validateCandidate() []string {
	var errs []string
	if c.ShadowModelURL == "" && c.ShadowModelKey != "" {
		errs = append(errs, "OWED_SHADOW_MODEL_KEY needs OWED_SHADOW_MODEL_URL")
	}
	if c.HasCandidate() && !c.CandidateModel() && (c.ShadowRubric == "" || c.ShadowRubric == scheduler.RubricID) {
		errs = append(errs, "the candidate (OWED_SHADOW_*) must differ from the live model or rubric")
	}
	if c.ShadowModelURL != "" {
		cfg, _ := c.Candidate()
		if err := cfg.Validate(); err != nil {
			errs = append(errs, "OWED_SHADOW_MODEL_URL: "+err.Error())
		}
	}
	return errs
}

func text(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *field(c) = v; return nil }
}

func oneOf(field func(*Config) *string, allowed ...string) func(*Config, string) error {
	return func(c *Config, v string) error {
		for _, a := range allowed {
			if v == a {
				*field(c) = v
				return nil
			}
		}
		return fmt.Errorf("want %s", strings.Join(allowed, " or "))
	}
}

func duration(field func(*Config) *time.Duration, least time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < least {
			return fmt.Errorf("want a duration of at least %s, like 1m or 30s", least)
		}
		*field(c) = d
		return nil
	}
}

func millis(field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > math.MaxInt64/int64(time.Millisecond) {
			return fmt.Errorf("want milliseconds, 0 or more")
		}
		*field(c) = time.Duration(n) * time.Millisecond
		return nil
	}
}

// corsOrigins reads OWED_CORS_ORIGINS: exact origins, scheme and host (and port), nothing more.
func corsOrigins(c *Config, v string) error {
	var out []string
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		u, err := url.Parse(f)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("%q is not an origin (scheme://host[:port], no path, no wildcard)", f)
		}
		out = append(out, u.Scheme+"://"+strings.ToLower(u.Host))
	}
	c.CORSOrigins = strings.Join(out, ",")
	return nil
}

// Origins is CORSOrigins as a list.
func (c Config) Origins() []string {
	if c.CORSOrigins == "" {
		return nil
	}
	return strings.Split(c.CORSOrigins, ",")
}

// number parses a whole number of at least least; an int field takes at most MaxInt32.
func number[T int | int64](field func(*Config) *T, least int64) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < least {
			return fmt.Errorf("want a whole number of at least %d", least)
		}
		if _, isInt := any(T(0)).(int); isInt {
			n = min(n, math.MaxInt32)
		}
		*field(c) = T(n)
		return nil
	}
}

// boolean reads the SPEC's words for on and off; anything else is an error.
func boolean(field func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		switch strings.ToLower(v) {
		case "1", "true", "on", "yes":
			*field(c) = true
		case "0", "false", "off", "no":
			*field(c) = false
		default:
			return fmt.Errorf("want true or false (1/0, yes/no, on/off)")
		}
		return nil
	}
}

func databaseURL(c *Config, v string) error {
	if strings.HasPrefix(v, "sqlite:") || strings.HasPrefix(v, "file:") {
		c.DatabaseURL = v
		return nil
	}
	if !models.IsPostgres(v) {
		// Else a typo would be taken for an SQLite path, silently making a new database.
		return fmt.Errorf("want postgres://… (or host=… dbname=…), or sqlite:PATH for an SQLite file")
	}
	return postgresURL(&c.DatabaseURL, v)
}

// postgresURL keeps v in dst if the driver can read it: a URL or key/value string, with one
// host or several (postgres://a,b/owed, host=a,b).
func postgresURL(dst *string, v string) error {
	if _, err := pgconn.ParseConfig(v); err != nil {
		return fmt.Errorf("not a PostgreSQL connection string the driver reads (postgres://host1,host2/db?target_session_attrs=read-write, or host=host1,host2 dbname=db)")
	}
	*dst = v
	return nil
}

func publicURL(c *Config, v string) error {
	if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("want an http:// or https:// URL, like https://owed.example.org")
	}
	c.PublicURL = v
	return nil
}

// redactURL hides a URL's password, for messages.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}

// proxyURL parses OWED_MODEL_PROXY: nil when empty, else an absolute http or https URL.
func proxyURL(v string) (*url.URL, error) {
	if v == "" {
		return nil, nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("want an absolute http:// or https:// URL")
	}
	return u, nil
}
