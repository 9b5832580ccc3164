package models_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
)

// fixture is owedtest's store fixture (a store on a fresh database with a fake clock at
// owedtest.Start, and its helpers), with short names for its parts.
type fixture struct {
	*owedtest.Data
	t     *testing.T
	ctx   context.Context
	store *models.Store
	clk   *clocktest.Fake
}

func newFixture(t *testing.T, databaseURL string, configure ...func(*models.Options)) *fixture {
	t.Helper()
	d := owedtest.NewData(t, databaseURL, configure...)
	return &fixture{Data: d, t: t, ctx: d.Ctx, store: d.Store, clk: d.Clock}
}

// rawSong inserts a song and a revision by raw SQL at the fake now.
func (f *fixture) rawSong(userID int64, title, code string) (songID, revID int64) {
	f.t.Helper()
	songID = f.InsertID(`INSERT INTO songs (user_id, title, created_at) VALUES (?, ?, ?)`, userID, title, f.NowMs())
	revID = f.rawRevision(userID, songID, title, code)
	return songID, revID
}

func (f *fixture) rawRevision(userID, songID int64, title, code string) int64 {
	f.t.Helper()
	return f.InsertID(`INSERT INTO revisions (song_id, user_id, title, code, created_at) VALUES (?, ?, ?, ?, ?)`,
		songID, userID, title, code, f.NowMs())
}

// song reads a song's maintained public flag and art.
func (f *fixture) song(id int64) models.Song {
	f.t.Helper()
	s, err := f.store.SongByID(f.ctx, id)
	if err != nil {
		f.t.Fatalf("song %d: %v", id, err)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func ms(t time.Time) int64 { return t.UnixMilli() }

// postgresStore is a store on a fresh, migrated PostgreSQL schema with a fake clock at
// owedtest.Start, for a test of what only PostgreSQL does; without OWED_TEST_POSTGRES_URL the
// test is skipped.
func postgresStore(t *testing.T, configure ...func(*models.Options)) *models.Store {
	t.Helper()
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		t.Skip("needs PostgreSQL: set " + owedtest.PostgresEnv)
	}
	return owedtest.Store(t, owedtest.MigratedPostgresURL(t, base), clocktest.NewFake(owedtest.Start), configure...)
}

// logEveryStatement configures a store to log every statement (each is slow past a
// nanosecond) at warn, to a file; logged reads the file back whole (the store may log from
// its own goroutines).
func logEveryStatement(t *testing.T) (configure func(*models.Options), logged func() string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "log")
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { file.Close() })
	configure = func(o *models.Options) {
		o.Logger = slog.New(slog.NewTextHandler(file, &slog.HandlerOptions{Level: slog.LevelWarn}))
		o.SlowStatement = time.Nanosecond
	}
	return configure, func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
}
