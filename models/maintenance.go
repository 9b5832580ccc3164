package models

import (
	"context"
	"errors"
	"fmt"

	"github.com/owed/owed/migrations"
)

// SchemaStatus reports applied and pending migrations, changing nothing (a missing SQLite file is an error).
func SchemaStatus(ctx context.Context, opts Options) (migrations.Report, error) {
	d := dialectOf(opts)
	db, err := d.openPlain(opts)
	if err != nil {
		return migrations.Report{}, fmt.Errorf("schema status: %w", err)
	}
	defer db.Close()
	report, err := migrations.Status(ctx, db, d.name())
	return wrapped(report, err, "schema status")
}

// ErrBackupPostgres is Backup asked of PostgreSQL, whose own tools (pg_dump) do it.
var ErrBackupPostgres = errors.New("owed backup copies SQLite databases; for PostgreSQL use pg_dump " +
	"(pg_dump --format=custom --file=owed.dump \"$OWED_DATABASE_URL\"), and pg_restore to restore")

// Backup writes a consistent copy of a live SQLite database to dest, which must not exist yet.
func Backup(ctx context.Context, opts Options, dest string) error {
	return dialectOf(opts).backup(ctx, opts, dest)
}
