package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/owed/owed/migrations"
)

// openPlain opens the options' database without migrating it, for commands that must change
// nothing (a status report, a backup): SQLite read-only, PostgreSQL through pgx.
func openPlain(opts Options) (*sql.DB, string, error) {
	if opts.isPostgres() {
		db, err := sql.Open("pgx", opts.URL)
		if err != nil {
			return nil, "", fmt.Errorf("open postgres: %w", err)
		}
		return db, Postgres, nil
	}
	path := opts.sqlitePath()
	if _, err := os.Stat(path); err != nil {
		return nil, "", fmt.Errorf("open sqlite: no database at %s: %w", path, err)
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		return nil, "", fmt.Errorf("open sqlite: %w", err)
	}
	db.SetMaxOpenConns(1)
	return db, SQLite, nil
}

// SchemaStatus reports which migrations the database has and which are pending, changing
// nothing. An SQLite database that does not exist yet is an error, not an empty report.
func SchemaStatus(ctx context.Context, opts Options) (migrations.Report, error) {
	db, dialect, err := openPlain(opts)
	if err != nil {
		return migrations.Report{}, err
	}
	defer db.Close()
	return migrations.Status(ctx, db, dialect)
}

// ErrBackupPostgres is Backup asked of PostgreSQL, whose own tools (pg_dump) make consistent
// copies of a live database.
var ErrBackupPostgres = errors.New("owed backup copies SQLite databases; for PostgreSQL use pg_dump " +
	"(pg_dump --format=custom --file=owed.dump \"$OWED_DATABASE_URL\"), and pg_restore to restore")

// Backup writes a consistent copy of a live SQLite database to dest, which must not exist yet.
// It reads one snapshot (VACUUM INTO, inside one read transaction) while owed goes on writing:
// writes committed before it began are in the copy, later ones are not, and none is torn. The
// copy is written beside dest and renamed into place, so a failed backup leaves no partial file.
func Backup(ctx context.Context, opts Options, dest string) error {
	if opts.isPostgres() {
		return ErrBackupPostgres
	}
	if _, err := os.Stat(dest); err == nil {
		return fmt.Errorf("backup: %s already exists; choose a new file", dest)
	}
	db, _, err := openPlain(opts)
	if err != nil {
		return err
	}
	defer db.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".*")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	tmpPath := tmp.Name()
	tmp.Close()
	os.Remove(tmpPath) // VACUUM INTO writes a new file; it refuses a non-empty one
	defer os.Remove(tmpPath)
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, tmpPath); err != nil {
		return fmt.Errorf("backup: copy: %w", err)
	}
	if err := os.Rename(tmpPath, dest); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}
