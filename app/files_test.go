package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
)

// TestFilesArePrivate (issue 23): the data folder is 0700, and the SQLite database, its WAL
// and SHM, and a backup are 0600 — with a permissive umask, and over a folder and database an
// older owed left 0755 and 0644. On PostgreSQL the data folder (previews) is 0700 too.
func TestFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	owedtest.Dialects(t, func(t *testing.T, db string) {
		dir := filepath.Join(t.TempDir(), "data")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		sqlite := strings.HasPrefix(db, "sqlite:")
		dbPath := filepath.Join(dir, "owed.db")
		if sqlite {
			db = "" // the database in the data folder, as by default
			if err := os.WriteFile(dbPath, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cfg := app.Defaults()
		cfg.DataDir, cfg.DatabaseURL, cfg.AdminToken, cfg.DatabaseMaxConns = dir, db, owedtest.AdminToken, 4
		a, err := app.New(context.Background(), cfg, app.Options{Clock: clocktest.NewFake(owedtest.Start), Log: owedtest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			a.Shutdown(ctx)
		}()
		if _, _, err := a.Store.CreateUser(context.Background(), "writer", models.RoleAuthor); err != nil {
			t.Fatal(err)
		}
		want := map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "previews"): 0o700}
		if sqlite {
			backup := filepath.Join(t.TempDir(), "owed-backup.db")
			if err := models.Backup(context.Background(), models.Options{DataDir: dir}, backup); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{dbPath, dbPath + "-wal", dbPath + "-shm", backup} {
				want[p] = 0o600
			}
		}
		for path, mode := range want {
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode().Perm(); got != mode {
				t.Errorf("%s is %04o, want %04o", path, got, mode)
			}
		}
	})
}
