// Package app assembles owed: configuration, the store, the runners and the HTTP server, and
// starts and stops them in order.
package app

import (
	"fmt"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is owed's configuration, read from OWED_* environment variables (SPEC §5).
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
	// SweepConcurrency is how many jobs the cron sweep runs at once (OWED_SWEEP_CONCURRENCY).
	SweepConcurrency int
	// DatabaseMaxConns caps each process's PostgreSQL connections (OWED_DATABASE_MAX_CONNS).
	DatabaseMaxConns int64
	// WriteRate and WriteBurst limit each token's writes (OWED_WRITE_RATE per second, 0 for
	// no limit; OWED_WRITE_BURST).
	WriteRate  float64
	WriteBurst int64
	// ShutdownGrace is how long a stopping process lets running jobs finish (OWED_SHUTDOWN_GRACE).
	ShutdownGrace time.Duration
}

// Defaults is the configuration with nothing set.
func Defaults() Config {
	return Config{
		Addr: "127.0.0.1:8080", DataDir: "./data", ModelAPI: "relay", ModelName: "critic",
		ModelTimeout: 2 * time.Minute, SweepEvery: time.Minute, Lease: 2 * time.Minute, InlineWait: 10 * time.Second,
		DailyBudget: 100, MediaMinGap: 250 * time.Millisecond, MediaMaxGap: 750 * time.Millisecond,
		WalkIdle: 10 * time.Minute, SweepConcurrency: 64, ShutdownGrace: 20 * time.Second,
		WriteRate: 20, WriteBurst: 100, DatabaseMaxConns: 32,
	}
}

// FromEnv reads the configuration from getenv (os.Getenv in production), over the defaults.
// Its errors name the variable at fault.
func FromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Defaults()
	var errs []string
	str := func(name string, dst *string) {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			*dst = v
		}
	}
	dur := func(name string, dst *time.Duration, min time.Duration) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < min {
			errs = append(errs, fmt.Sprintf("%s=%q: want a duration of at least %s, like 1m or 30s", name, v, min))
			return
		}
		*dst = d
	}
	ms := func(name string, dst *time.Duration) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Sprintf("%s=%q: want milliseconds, 0 or more", name, v))
			return
		}
		*dst = time.Duration(n) * time.Millisecond
	}
	num := func(name string, dst *int64, min int64) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < min {
			errs = append(errs, fmt.Sprintf("%s=%q: want a whole number of at least %d", name, v, min))
			return
		}
		*dst = n
	}
	str("OWED_ADDR", &c.Addr)
	str("OWED_DATA_DIR", &c.DataDir)
	str("OWED_DATABASE_URL", &c.DatabaseURL)
	str("OWED_ADMIN_TOKEN", &c.AdminToken)
	str("OWED_MODEL_URL", &c.ModelURL)
	str("OWED_MODEL_KEY", &c.ModelKey)
	str("OWED_MODEL_API", &c.ModelAPI)
	str("OWED_MODEL_NAME", &c.ModelName)
	str("OWED_PLUGINS_DIR", &c.PluginsDir)
	dur("OWED_MODEL_TIMEOUT", &c.ModelTimeout, time.Millisecond)
	dur("OWED_SWEEP_EVERY", &c.SweepEvery, time.Second)
	dur("OWED_LEASE", &c.Lease, time.Second)
	dur("OWED_INLINE_WAIT", &c.InlineWait, 0)
	dur("OWED_WALK_IDLE", &c.WalkIdle, time.Second)
	dur("OWED_SHUTDOWN_GRACE", &c.ShutdownGrace, 0)
	// At least 1: the runner reads a budget of 0 as "the default", so 0 would show authors a
	// limit of 0 while charging them up to 100.
	num("OWED_DAILY_BUDGET", &c.DailyBudget, 1)
	ms("OWED_MEDIA_MIN_GAP_MS", &c.MediaMinGap)
	ms("OWED_MEDIA_MAX_GAP_MS", &c.MediaMaxGap)
	if v := strings.TrimSpace(getenv("OWED_WRITE_RATE")); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			errs = append(errs, fmt.Sprintf("OWED_WRITE_RATE=%q: want writes per second, 0 for no limit", v))
		} else {
			c.WriteRate = f
		}
	}
	num("OWED_WRITE_BURST", &c.WriteBurst, 1)
	num("OWED_DATABASE_MAX_CONNS", &c.DatabaseMaxConns, 2)
	var conc int64 = int64(c.SweepConcurrency)
	num("OWED_SWEEP_CONCURRENCY", &conc, 1)
	c.SweepConcurrency = int(conc)
	switch v := strings.ToLower(strings.TrimSpace(getenv("OWED_WEBHOOKS_ALLOW_PRIVATE"))); v {
	case "", "0", "false", "off", "no":
	case "1", "true", "on", "yes":
		c.WebhooksAllowPrivate = true
	default:
		errs = append(errs, fmt.Sprintf("OWED_WEBHOOKS_ALLOW_PRIVATE=%q: want true or false", v))
	}
	if u := c.DatabaseURL; u != "" && !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") &&
		!strings.HasPrefix(u, "sqlite:") && !strings.HasPrefix(u, "file:") {
		// Anything else would be taken for an SQLite file path, a typo silently making a new
		// empty database.
		errs = append(errs, fmt.Sprintf("OWED_DATABASE_URL=%q: want postgres://…, or sqlite:PATH for an SQLite file", redactURL(u)))
	}
	if c.ModelAPI != "relay" && c.ModelAPI != "openai" {
		errs = append(errs, fmt.Sprintf("OWED_MODEL_API=%q: want relay or openai", c.ModelAPI))
	}
	if c.MediaMinGap > c.MediaMaxGap {
		errs = append(errs, "OWED_MEDIA_MIN_GAP_MS must not exceed OWED_MEDIA_MAX_GAP_MS")
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("configuration: %s", strings.Join(errs, "; "))
	}
	return c, nil
}

// redactURL hides a URL's password, for messages.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}
