package models_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/clock"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// syncBuffer is a log's output, written from the store's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Every way a statement runs (exec, scan, and query's hand-read rows) logs a slow statement
// at warn through the store's logger, with its placeholders and never its arguments.
func TestEveryStatementPathLogsSlowStatements(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, url string) {
		var out syncBuffer
		log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}))
		store := owedtest.Store(t, url, clock.NewFake(owedtest.Start), func(o *models.Options) {
			o.Logger = log
			o.SlowStatement = time.Nanosecond // every statement is slow
		})
		f := &fixture{t: t, ctx: t.Context(), store: store}
		const secret = "an-argument-that-must-not-be-logged"
		for _, path := range []struct {
			name string
			run  func() error
			want string // in the logged statement
		}{
			{"exec", func() error {
				_, err := store.RawExec(f.ctx, `UPDATE users SET name = name WHERE name = ?`, secret)
				return err
			}, "UPDATE users SET name = name"},
			{"scan", func() error {
				var n int64
				return store.RawScan(f.ctx, &n, `SELECT COUNT(*) FROM users WHERE name <> ?`, secret)
			}, "SELECT COUNT(*) FROM users"},
			{"query", func() error {
				_, err := store.PublicSongs(f.ctx, false, nil, 10)
				return err
			}, "FROM songs"},
		} {
			before := len(out.String())
			if err := path.run(); err != nil {
				t.Fatalf("%s: %v", path.name, err)
			}
			logged := out.String()[before:]
			if !strings.Contains(logged, "level=WARN") || !strings.Contains(logged, path.want) {
				t.Errorf("%s: the slow statement was not logged at warn; log:\n%s", path.name, logged)
			}
			if strings.Contains(logged, secret) {
				t.Errorf("%s: an argument was logged:\n%s", path.name, logged)
			}
		}
	})
}

// A ? binds one value in every statement: a list given for one is refused, not spread over
// the statement (GORM would spread it in exec and scan, and could not in query).
func TestQuestionMarkBindsOneValue(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, url string) {
		f := newFixture(t, url)
		ids := []int64{1, 2}
		if _, err := f.store.RawExec(f.ctx, `DELETE FROM users WHERE id IN ?`, ids); err == nil || !strings.Contains(err.Error(), "binds one value") {
			t.Errorf("exec with a list: err = %v, want the one-value rule", err)
		}
		var n int64
		if err := f.store.RawScan(f.ctx, &n, `SELECT COUNT(*) FROM users WHERE id IN ?`, ids); err == nil || !strings.Contains(err.Error(), "binds one value") {
			t.Errorf("scan with a list: err = %v, want the one-value rule", err)
		}
		// A list travels as one JSON parameter.
		a, b := f.user("ann"), f.user("bob")
		f.user("cy")
		if err := f.store.RawScan(f.ctx, &n, `SELECT COUNT(*) FROM users WHERE `+f.store.IDIn("id"), fmt.Sprintf("[%d,%d]", a, b)); err != nil || n != 2 {
			t.Errorf("scan with a JSON list: n = %d, err = %v; want 2", n, err)
		}
	})
}
