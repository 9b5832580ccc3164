package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
)

// migrateStatus prints the applied and pending migrations and changes nothing; it fails when
// the database was migrated by a newer owed, as serve would.
func migrateStatus(ctx context.Context, cfg app.Config, stdout io.Writer) error {
	r, err := models.SchemaStatus(ctx, models.Options{URL: cfg.DatabaseURL, DataDir: cfg.DataDir})
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "version\tname\tstate")
	for _, a := range r.Applied {
		fmt.Fprintf(w, "%04d\t%s\tapplied %s\n", a.Version, a.Name, a.AppliedAt.Format("2006-01-02 15:04:05Z"))
	}
	for _, m := range r.Pending {
		fmt.Fprintf(w, "%04d\t%s\tpending\n", m.Version, m.Name)
	}
	w.Flush()
	switch {
	case len(r.Unknown) > 0:
		return fmt.Errorf("the database has migrations this owed does not know (%v): a newer owed migrated it", r.Unknown)
	case len(r.Pending) > 0:
		fmt.Fprintf(stdout, "%d pending: `owed migrate` (or `owed serve`) applies them\n", len(r.Pending))
	default:
		fmt.Fprintln(stdout, "up to date")
	}
	return nil
}

// backup copies a live SQLite database to file; on PostgreSQL it says to use pg_dump and fails.
func backup(ctx context.Context, cfg app.Config, file string, stdout io.Writer) error {
	if err := models.Backup(ctx, models.Options{URL: cfg.DatabaseURL, DataDir: cfg.DataDir}, file); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "owed: backed up to %s\n", file)
	return nil
}
