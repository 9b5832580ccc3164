package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/app"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// TestConfigDefaultsAreTheSpecs: with nothing set, owed runs as SPEC §5 says.
func TestConfigDefaultsAreTheSpecs(t *testing.T) {
	c, err := app.FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		name      string
		got, want any
	}{
		{"OWED_ADDR", c.Addr, "127.0.0.1:8080"},
		{"OWED_DATA_DIR", c.DataDir, "./data"},
		{"OWED_DATABASE_URL", c.DatabaseURL, ""}, // SQLite in the data dir
		{"OWED_ADMIN_TOKEN", c.AdminToken, ""},
		{"OWED_MODEL_URL", c.ModelURL, ""},
		{"OWED_MODEL_KEY", c.ModelKey, ""},
		{"OWED_MODEL_API", c.ModelAPI, "relay"},
		{"OWED_SWEEP_EVERY", c.SweepEvery, time.Minute},
		{"OWED_LEASE", c.Lease, 2 * time.Minute},
		{"OWED_MODEL_TIMEOUT", c.ModelTimeout, 2 * time.Minute},
		{"OWED_INLINE_WAIT", c.InlineWait, 10 * time.Second},
		{"OWED_DAILY_BUDGET", c.DailyBudget, int64(100)},
		{"OWED_MEDIA_MIN_GAP_MS", c.MediaMinGap, 250 * time.Millisecond},
		{"OWED_MEDIA_MAX_GAP_MS", c.MediaMaxGap, 750 * time.Millisecond},
		{"OWED_MODEL_NAME", c.ModelName, "critic"},
		{"OWED_WALK_IDLE", c.WalkIdle, 10 * time.Minute},
		{"OWED_PLUGINS_DIR", c.PluginsDir, ""},
		{"OWED_WEBHOOKS_ALLOW_PRIVATE", c.WebhooksAllowPrivate, false},
		{"OWED_MEDIA_ALLOW_PRIVATE", c.MediaAllowPrivate, false},
		{"OWED_MODEL_CONCURRENCY", c.ModelConcurrency, 16},
		{"OWED_MODEL_BREAKER", c.ModelBreaker, 10},
		{"OWED_RETAIN_DONE", c.RetainDone, 168 * time.Hour},
	} {
		if d.got != d.want {
			t.Errorf("%s defaults to %v, want %v", d.name, d.got, d.want)
		}
	}
	if c != app.Defaults() {
		t.Errorf("FromEnv with nothing set = %+v, want Defaults() %+v", c, app.Defaults())
	}
}

// TestConfigFromEnv: every variable is read, with surrounding blanks ignored.
func TestConfigFromEnv(t *testing.T) {
	c, err := app.FromEnv(env(map[string]string{
		"OWED_ADDR":                   "0.0.0.0:9000",
		"OWED_DATA_DIR":               "/var/lib/owed",
		"OWED_DATABASE_URL":           "postgres://owed:pw@db:5432/owed?sslmode=disable",
		"OWED_ADMIN_TOKEN":            "owed_admin_0123456789abcdef0123456789",
		"OWED_MODEL_URL":              "http://model:8000/v1/chat/completions",
		"OWED_MODEL_KEY":              "sk-1",
		"OWED_MODEL_API":              "openai",
		"OWED_MODEL_NAME":             "gpt-critic",
		"OWED_SWEEP_EVERY":            "30s",
		"OWED_LEASE":                  " 5m ",
		"OWED_MODEL_TIMEOUT":          "45s",
		"OWED_INLINE_WAIT":            "0s",
		"OWED_DAILY_BUDGET":           "250",
		"OWED_MEDIA_MIN_GAP_MS":       "0",
		"OWED_MEDIA_MAX_GAP_MS":       "100",
		"OWED_WALK_IDLE":              "1h",
		"OWED_PLUGINS_DIR":            "/etc/owed/plugins",
		"OWED_WEBHOOKS_ALLOW_PRIVATE": "true",
		"OWED_MEDIA_ALLOW_PRIVATE":    " yes ",
		"OWED_MODEL_CONCURRENCY":      "4",
		"OWED_MODEL_BREAKER":          "0",
		"OWED_RETAIN_DONE":            "72h",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := app.Defaults()
	want.Addr, want.DataDir, want.DatabaseURL, want.AdminToken = "0.0.0.0:9000", "/var/lib/owed", "postgres://owed:pw@db:5432/owed?sslmode=disable", "owed_admin_0123456789abcdef0123456789"
	want.ModelURL, want.ModelKey, want.ModelAPI, want.ModelName = "http://model:8000/v1/chat/completions", "sk-1", "openai", "gpt-critic"
	want.SweepEvery, want.Lease, want.ModelTimeout, want.InlineWait = 30*time.Second, 5*time.Minute, 45*time.Second, 0
	want.DailyBudget, want.MediaMinGap, want.MediaMaxGap, want.WalkIdle = 250, 0, 100*time.Millisecond, time.Hour
	want.PluginsDir, want.WebhooksAllowPrivate, want.MediaAllowPrivate = "/etc/owed/plugins", true, true
	want.ModelConcurrency, want.ModelBreaker, want.RetainDone = 4, 0, 72*time.Hour
	if c != want {
		t.Errorf("config = %+v\nwant     %+v", c, want)
	}
	for _, v := range []string{"1", "on", "yes", "TRUE", "true"} {
		if c, err := app.FromEnv(env(map[string]string{"OWED_WEBHOOKS_ALLOW_PRIVATE": v})); err != nil || !c.WebhooksAllowPrivate {
			t.Errorf("OWED_WEBHOOKS_ALLOW_PRIVATE=%s: %v %v", v, c.WebhooksAllowPrivate, err)
		}
		if c, err := app.FromEnv(env(map[string]string{"OWED_MEDIA_ALLOW_PRIVATE": v})); err != nil || !c.MediaAllowPrivate {
			t.Errorf("OWED_MEDIA_ALLOW_PRIVATE=%s: %v %v", v, c.MediaAllowPrivate, err)
		}
	}
	for _, v := range []string{"0", "off", "no", "FALSE", "false"} {
		if c, err := app.FromEnv(env(map[string]string{"OWED_MEDIA_ALLOW_PRIVATE": v, "OWED_WEBHOOKS_ALLOW_PRIVATE": v})); err != nil ||
			c.MediaAllowPrivate || c.WebhooksAllowPrivate {
			t.Errorf("=%s: %v %v %v", v, c.MediaAllowPrivate, c.WebhooksAllowPrivate, err)
		}
	}
	for _, u := range []string{"sqlite:/tmp/x.db", "file:/tmp/x.db", "postgresql://db/owed"} {
		if _, err := app.FromEnv(env(map[string]string{"OWED_DATABASE_URL": u})); err != nil {
			t.Errorf("OWED_DATABASE_URL=%s: %v", u, err)
		}
	}
}

// TestConfigBadValuesNameTheVariable: a bad value is refused with a message that names it,
// and every bad value is reported at once.
func TestConfigBadValuesNameTheVariable(t *testing.T) {
	for _, c := range []struct{ name, value string }{
		{"OWED_SWEEP_EVERY", "often"},
		{"OWED_SWEEP_EVERY", "10ms"}, // a sweep a few milliseconds apart is a typo
		{"OWED_SWEEP_EVERY", "60"},   // no unit
		{"OWED_LEASE", "-1m"},
		{"OWED_LEASE", "0s"},
		{"OWED_MODEL_TIMEOUT", "0"},
		{"OWED_INLINE_WAIT", "-1s"},
		{"OWED_WALK_IDLE", "soon"},
		{"OWED_DAILY_BUDGET", "lots"},
		{"OWED_DAILY_BUDGET", "-5"},
		{"OWED_DAILY_BUDGET", "0"},
		{"OWED_DAILY_BUDGET", "1.5"},
		{"OWED_MEDIA_MIN_GAP_MS", "fast"},
		{"OWED_MEDIA_MAX_GAP_MS", "-1"},
		{"OWED_MEDIA_MIN_GAP_MS", "1000"}, // above the default maximum of 750
		{"OWED_MODEL_API", "grpc"},
		{"OWED_WEBHOOKS_ALLOW_PRIVATE", "maybe"},
		{"OWED_MEDIA_ALLOW_PRIVATE", "maybe"},
		{"OWED_MEDIA_ALLOW_PRIVATE", "2"},
		{"OWED_DATABASE_URL", "postgress://db/owed"},
		{"OWED_DATABASE_URL", "mysql://root:secret@db/owed"},
		{"OWED_MODEL_CONCURRENCY", "2"}, // a score's three runs are asked together
		{"OWED_MODEL_CONCURRENCY", "many"},
		{"OWED_MODEL_BREAKER", "-1"},
		{"OWED_RETAIN_DONE", "a week"},
		{"OWED_RETAIN_DONE", "10m"},  // under an hour: the list would empty between two looks
		{"OWED_RETAIN_DONE", "800h"}, // beyond the events' 720h: they would be gone
	} {
		_, err := app.FromEnv(env(map[string]string{c.name: c.value}))
		if err == nil {
			t.Errorf("%s=%q was accepted", c.name, c.value)
			continue
		}
		if !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s=%q: error %q does not name the variable", c.name, c.value, err)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error %q shows the password", c.name, err)
		}
	}
	_, err := app.FromEnv(env(map[string]string{"OWED_LEASE": "x", "OWED_DAILY_BUDGET": "y"}))
	if err == nil || !strings.Contains(err.Error(), "OWED_LEASE") || !strings.Contains(err.Error(), "OWED_DAILY_BUDGET") {
		t.Errorf("two bad values: %v, want both named", err)
	}
}

// TestShortAdminTokenRefused: an OWED_ADMIN_TOKEN under 32 characters stops owed at start with
// a message that says what is wrong and how to fix it, without showing the token.
func TestShortAdminTokenRefused(t *testing.T) {
	for _, tok := range []string{"abc", strings.Repeat("x", app.MinAdminToken-1)} {
		_, err := app.FromEnv(env(map[string]string{"OWED_ADMIN_TOKEN": tok}))
		if err == nil {
			t.Fatalf("a %d-character admin token was accepted", len(tok))
		}
		if msg := err.Error(); !strings.Contains(msg, "OWED_ADMIN_TOKEN must be at least 32 characters") || strings.Contains(msg, tok) {
			t.Errorf("error %q: want it to name the rule and not show the token", msg)
		}
	}
	c, err := app.FromEnv(env(map[string]string{"OWED_ADMIN_TOKEN": strings.Repeat("x", app.MinAdminToken)}))
	if err != nil || len(c.AdminToken) != app.MinAdminToken {
		t.Fatalf("a 32-character admin token: %v", err)
	}
}

// TestDatabaseURLForms: PostgreSQL is named by a URL or a key/value string, each with one
// host or several (a failover's list, with target_session_attrs); anything else that is not
// an SQLite name is refused, and so is a listen URL beside SQLite.
func TestDatabaseURLForms(t *testing.T) {
	for _, v := range []string{
		"postgres://db/owed",
		"postgres://db1,db2/owed?target_session_attrs=read-write",
		"postgresql://owed:pw@db1:5432,db2:5433/owed?target_session_attrs=read-write&sslmode=disable",
		"host=db1,db2 dbname=owed target_session_attrs=read-write",
		"host=db1,db2 port=5432,5433 user=owed dbname=owed",
		"sqlite:/var/lib/owed/owed.db",
	} {
		c, err := app.FromEnv(env(map[string]string{"OWED_DATABASE_URL": v}))
		if err != nil || c.DatabaseURL != v {
			t.Errorf("OWED_DATABASE_URL=%q: %q, %v", v, c.DatabaseURL, err)
		}
	}
	for _, v := range []string{"owed.db", "mysql://db/owed", "postgres://db/owed?sslmode=sometimes", "host=db dbname=owed sslmode=sometimes"} {
		if _, err := app.FromEnv(env(map[string]string{"OWED_DATABASE_URL": v})); err == nil {
			t.Errorf("OWED_DATABASE_URL=%q was accepted", v)
		}
	}
	c, err := app.FromEnv(env(map[string]string{"OWED_DATABASE_URL": "postgres://pooler:6432/owed",
		"OWED_DATABASE_LISTEN_URL": "host=db1,db2 dbname=owed target_session_attrs=read-write"}))
	if err != nil || c.ListenURL() != "host=db1,db2 dbname=owed target_session_attrs=read-write" {
		t.Errorf("listen URL = %q, %v", c.ListenURL(), err)
	}
	if c, _ := app.FromEnv(env(map[string]string{"OWED_DATABASE_URL": "postgres://db/owed"})); c.ListenURL() != "postgres://db/owed" {
		t.Errorf("listen URL by default = %q, want the database URL", c.ListenURL())
	}
	if _, err := app.FromEnv(env(map[string]string{"OWED_DATABASE_LISTEN_URL": "postgres://db/owed"})); err == nil {
		t.Error("a listen URL beside SQLite was accepted")
	}
}

// TestShadowSettings: a candidate is a model (its URL, or another name on the live URL) or a
// rubric owed knows; its parts fall back to the live model's, and a candidate that is the live
// model and rubric, a key without a URL, an unknown rubric or a bad limit are refused.
func TestShadowSettings(t *testing.T) {
	c, err := app.FromEnv(env(nil))
	if err != nil || c.HasCandidate() || c.ShadowDailyLimit != 1000 {
		t.Fatalf("defaults: candidate %v, limit %d, %v; want none and 1000", c.HasCandidate(), c.ShadowDailyLimit, err)
	}
	c, err = app.FromEnv(env(map[string]string{"OWED_MODEL_URL": "http://live/v1", "OWED_MODEL_KEY": "sk-1",
		"OWED_SHADOW_RUBRIC": "art-v2", "OWED_SHADOW_DAILY_LIMIT": "20"}))
	if err != nil {
		t.Fatal(err)
	}
	mc, rubric := c.Candidate()
	if !c.HasCandidate() || c.CandidateModel() || mc.URL != "http://live/v1" || mc.Key != "sk-1" || mc.Model != "critic" ||
		rubric != "art-v2" || c.ShadowDailyLimit != 20 {
		t.Errorf("a rubric alone: %+v %q model %v; want the live model asked with art-v2", mc, rubric, c.CandidateModel())
	}
	c, err = app.FromEnv(env(map[string]string{"OWED_MODEL_URL": "http://live/v1", "OWED_MODEL_KEY": "sk-1",
		"OWED_SHADOW_MODEL_URL": "http://candidate/v1", "OWED_SHADOW_MODEL_API": "openai", "OWED_SHADOW_MODEL_NAME": "critic-2"}))
	if err != nil {
		t.Fatal(err)
	}
	if mc, rubric = c.Candidate(); !c.CandidateModel() || mc.URL != "http://candidate/v1" || mc.Key != "" || mc.API != "openai" ||
		mc.Model != "critic-2" || rubric != "art-v1" {
		t.Errorf("a model: %+v %q; want its own URL, no key, openai, critic-2 under the live rubric", mc, rubric)
	}
	for _, bad := range []map[string]string{
		{"OWED_SHADOW_RUBRIC": "art-v1"},
		{"OWED_SHADOW_RUBRIC": "art-v9"},
		{"OWED_SHADOW_MODEL_KEY": "sk-2"},
		{"OWED_SHADOW_MODEL_NAME": "critic"},
		{"OWED_SHADOW_MODEL_URL": "http://candidate/v1", "OWED_SHADOW_MODEL_API": "grpc"},
		{"OWED_SHADOW_MODEL_URL": "http://candidate/v1", "OWED_SHADOW_DAILY_LIMIT": "0"},
	} {
		if _, err := app.FromEnv(env(bad)); err == nil || !strings.Contains(err.Error(), "OWED_SHADOW") && !strings.Contains(err.Error(), "candidate") {
			t.Errorf("%v: %v, want an error naming the setting", bad, err)
		}
	}
}
