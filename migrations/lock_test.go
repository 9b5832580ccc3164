package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/migrations"
	"github.com/owed/owed/owedtest"
)

// TestMigrationLockWaitEnds: a start that finds the migration lock held says so in its log and,
// past its timeout, ends with ErrLockTimeout instead of waiting for ever; once the holder's
// transaction ends (the lock is transaction-scoped: no idle pooled session can keep it) the
// next start migrates.
func TestMigrationLockWaitEnds(t *testing.T) {
	t.Parallel()
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		t.Skip("PostgreSQL only: set " + owedtest.PostgresEnv)
	}
	db := fresh(t, "postgres").db
	holder, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	tx, err := holder.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`SELECT pg_advisory_xact_lock(x'6f776564'::int)`); err != nil {
		t.Fatal(err)
	}

	var log owedtest.LogBuffer
	began := time.Now()
	_, err = migrations.ApplyWith(context.Background(), db, "postgres",
		migrations.LockWait{Timeout: time.Second, Log: slog.New(slog.NewTextHandler(&log, nil))})
	took := time.Since(began)
	if !errors.Is(err, migrations.ErrLockTimeout) {
		t.Fatalf("err = %v, want ErrLockTimeout", err)
	}
	if took < time.Second || took > 10*time.Second {
		t.Errorf("gave up after %v, want about its 1 s timeout", took)
	}
	if !strings.Contains(log.String(), "waiting for another process's migration lock") {
		t.Errorf("no log line while waiting: %q", log.String())
	}

	tx.Rollback()
	// Other test processes on the server migrate under the same lock: a longer wait.
	applied, err := migrations.ApplyWith(context.Background(), db, "postgres", migrations.LockWait{Timeout: time.Minute})
	if err != nil || len(applied) == 0 {
		t.Fatalf("after the holder's end: %v applied, %v", applied, err)
	}
}
