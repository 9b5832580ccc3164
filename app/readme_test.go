package app_test

import (
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/owed/owed/app"
)

// TestREADMESettingsTable: the README's table of settings is the one app.Settings makes, so
// a setting cannot be added, renamed or given a new default without the README saying so.
// OWED_UPDATE_README=1 rewrites the table.
func TestREADMESettingsTable(t *testing.T) {
	const path = "../README.md"
	const begin, end = "<!-- settings:begin -->\n", "<!-- settings:end -->"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	if i < 0 || j < i {
		t.Fatalf("README has no %q … %q markers", begin, end)
	}
	want := app.SettingsTable()
	if got := readme[i+len(begin) : j]; got != want {
		if os.Getenv("OWED_UPDATE_README") == "1" {
			if err := os.WriteFile(path, []byte(readme[:i+len(begin)]+want+readme[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("the README's settings table differs from app.Settings; run OWED_UPDATE_README=1 go test ./app -run README\ngot:\n%s\nwant:\n%s", got, want)
	}
}

// TestEverySettingIsAFlag: every setting has a flag, and a value given as the flag makes
// the same configuration as the same value in the environment; flags override the variables.
func TestEverySettingIsAFlag(t *testing.T) {
	values := map[string]string{
		"OWED_ADDR": "0.0.0.0:9000", "OWED_DATA_DIR": "/var/lib/owed", "OWED_DATABASE_URL": "postgres://db/owed",
		"OWED_ADMIN_TOKEN": "owed_admin_0123456789abcdef0123456789", "OWED_MODEL_URL": "http://model/v1", "OWED_MODEL_KEY": "sk-1",
		"OWED_MODEL_API": "openai", "OWED_MODEL_NAME": "gpt", "OWED_MODEL_TIMEOUT": "45s", "OWED_SWEEP_EVERY": "30s",
		"OWED_SWEEP_CONCURRENCY": "8", "OWED_MODEL_CONCURRENCY": "5", "OWED_MODEL_BREAKER": "0", "OWED_LEASE": "5m", "OWED_INLINE_WAIT": "0s", "OWED_DAILY_BUDGET": "250",
		"OWED_MEDIA_MIN_GAP_MS": "0", "OWED_MEDIA_MAX_GAP_MS": "100", "OWED_WALK_IDLE": "1h",
		"OWED_PLUGINS_DIR": "/etc/owed/plugins", "OWED_WEBHOOKS_ALLOW_PRIVATE": "yes", "OWED_MEDIA_ALLOW_PRIVATE": "on", "OWED_WRITE_RATE": "2.5",
		"OWED_WRITE_BURST": "7", "OWED_WEBHOOK_SECRET_OVERLAP": "90m", "OWED_DATABASE_MAX_CONNS": "9", "OWED_SHUTDOWN_GRACE": "3s",
		"OWED_RETAIN_EVENTS": "48h", "OWED_RETAIN_DELIVERIES": "96h", "OWED_IDEMPOTENCY_TTL": "2h", "OWED_LOG_LEVEL": "warn", "OWED_LOG_FORMAT": "text",
		"OWED_STREAMS_PER_USER": "3", "OWED_MAX_STREAMS": "500", "OWED_MAX_CONNECTIONS": "900", "OWED_CORS_ORIGINS": "https://site.example,http://localhost:5173",
		"OWED_RETAIN_AUDIT": "240h", "OWED_RETAIN_DONE": "24h", "OWED_MAX_CLOCK_SKEW": "2s", "OWED_MAX_CONNECTIONS_PER_IP": "50",
		"OWED_PUBLIC_URL": "https://owed.example.org", "OWED_TRUSTED_PROXIES": "10.0.0.0/8,fd00::/8",
		// issue 23, faults-edge
		"OWED_MODEL_PROXY": "http://proxy.internal:3128", "OWED_METRICS_TOKEN": "metrics-secret", "OWED_METRICS_ADDR": "127.0.0.1:9090",
		"OWED_REVIEW_BELOW": "0.6", "OWED_REVIEW_BELOW_REVISION": "0.7", "OWED_REVIEW_BELOW_COMMENT": "0", "OWED_REVIEW_BELOW_PITCH": "1",
		"OWED_DATABASE_LISTEN_URL": "host=db1,db2 dbname=owed", "OWED_MIGRATE_LOCK_TIMEOUT": "30s", "OWED_DATABASE_MAX_CONN_LIFETIME": "10m",
		"OWED_DATABASE_LOCK_TIMEOUT": "2s", "OWED_DATABASE_STATEMENT_TIMEOUT": "0s",
		"OWED_DRIFT_EVERY": "6h", "OWED_DRIFT_ALERT": "0.8",
		"OWED_SHADOW_MODEL_URL": "http://candidate/v1", "OWED_SHADOW_MODEL_KEY": "sk-2", "OWED_SHADOW_MODEL_API": "relay",
		"OWED_SHADOW_MODEL_NAME": "critic-2", "OWED_SHADOW_RUBRIC": "art-v2", "OWED_SHADOW_DAILY_LIMIT": "50",
	}
	var args []string
	for _, s := range app.Settings {
		v, ok := values[s.Env]
		if !ok {
			t.Errorf("%s: no sample value in this test", s.Env)
			continue
		}
		args = append(args, "--"+s.FlagName()+"="+v)
	}
	fromEnv, err := app.FromEnv(func(k string) string { return values[k] })
	if err != nil {
		t.Fatal(err)
	}
	if fromEnv == app.Defaults() {
		t.Fatal("the sample values changed nothing")
	}
	// The flags start from a different environment, which they override.
	fromFlags, err := app.FromEnv(func(k string) string {
		if k == "OWED_LEASE" {
			return "1h"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fromFlags.Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if fromFlags != fromEnv {
		t.Errorf("from flags %+v\nfrom env   %+v", fromFlags, fromEnv)
	}
	bad := flag.NewFlagSet("test", flag.ContinueOnError)
	bad.SetOutput(io.Discard)
	c := app.Defaults()
	c.Flags(bad)
	if err := bad.Parse([]string{"--lease=forever"}); err == nil || !strings.Contains(err.Error(), "lease") {
		t.Errorf("--lease=forever: %v, want an error naming the flag", err)
	}
}
