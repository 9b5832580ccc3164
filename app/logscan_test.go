package app_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
)

// TestLogsNeverCarryStatementValues: an author's text goes into statements as a parameter, and
// the log — at debug, the most it ever says — never shows it: not when the write succeeds, not
// when the statement fails (the table gone: GORM's error trace and the API's 500 line), not for
// a read that fails with the text as its argument.
func TestLogsNeverCarryStatementValues(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		var sink owedtest.LogBuffer
		log := slog.New(slog.NewJSONHandler(&sink, &slog.HandlerOptions{Level: slog.LevelDebug}))
		model := modeltest.New(t)
		cfg := app.Defaults()
		cfg.DataDir = t.TempDir()
		cfg.DatabaseURL = db
		cfg.AdminToken = owedtest.AdminToken
		cfg.ModelURL = model.URL()
		cfg.InlineWait = 5 * time.Second
		cfg.DatabaseMaxConns = 4
		cfg.WriteRate = 0
		a, err := app.New(context.Background(), cfg, app.Options{Clock: clocktest.NewFake(owedtest.Start), Log: log})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(a.Echo)
		defer func() {
			srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			a.Shutdown(ctx)
		}()
		env := &owedtest.Env{T: t, App: a, Server: srv, Model: model, AdminToken: owedtest.AdminToken}
		_, token := env.User("writer", models.RoleAuthor)

		const marker = "ZEBRA-QUINCE-4417-SECRET-BODY"
		if r := env.Do(http.MethodPost, "/api/listeners/pitches", token, map[string]string{"body": "a pitch " + marker}); r.Status != http.StatusCreated {
			t.Fatalf("pitch: %d %s", r.Status, r.Body)
		}

		// The error paths: the pitches table gone, every statement that names it fails.
		ctx := context.Background()
		if _, err := a.Store.RawExec(ctx, `ALTER TABLE pitches RENAME TO pitches_gone`); err != nil {
			t.Fatal(err)
		}
		if r := env.Do(http.MethodPost, "/api/listeners/pitches", token, map[string]string{"body": "another " + marker}); r.Status < 500 {
			t.Fatalf("a pitch with its table gone: %d %s, want a server error", r.Status, r.Body)
		}
		var n int64
		if err := a.Store.RawScan(ctx, &n, `SELECT COUNT(*) FROM pitches WHERE body = ?`, marker); err == nil {
			t.Fatal("a read of a table that is gone did not fail")
		}
		if _, err := a.Store.RawExec(ctx, `INSERT INTO pitches (body) VALUES (?)`, marker); err == nil {
			t.Fatal("a write to a table that is gone did not fail")
		}

		out := sink.String()
		if !strings.Contains(out, "SQL executed") || !strings.Contains(out, `"level":"ERROR"`) {
			t.Fatalf("the failed statements were not logged at error; the scan would prove nothing:\n%s", out)
		}
		if strings.Contains(out, marker) {
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, marker) {
					t.Errorf("the log carries a statement's value: %s", line)
				}
			}
		}
	})
}
