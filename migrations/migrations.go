// Package migrations holds owed's versioned SQL schema, one folder per dialect, and applies it.
//
// Files are named NNNN_name.sql; each is applied once, in order, inside a transaction, and
// recorded in schema_migrations. On PostgreSQL an advisory lock serialises replicas that start
// together, so exactly one of them applies a pending version.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed sqlite/*.sql postgres/*.sql
var files embed.FS

// Migration is one versioned schema step.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// List returns the dialect's migrations in version order.
func List(dialect string) ([]Migration, error) {
	entries, err := fs.ReadDir(files, dialect)
	if err != nil {
		return nil, fmt.Errorf("migrations: unknown dialect %q", dialect)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		num, rest, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("migrations: badly named file %s", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migrations: badly numbered file %s", name)
		}
		body, err := fs.ReadFile(files, dialect+"/"+name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: strings.TrimSuffix(rest, ".sql"), SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations: version %d appears twice", out[i].Version)
		}
	}
	return out, nil
}

// advisoryKey is the PostgreSQL advisory lock owed holds while migrating.
const advisoryKey = 0x6f776564 // "owed"

// Apply brings db up to the newest version of the dialect ("sqlite" or "postgres") and
// returns the versions it applied. A failing migration rolls back whole and stops the rest.
func Apply(ctx context.Context, db *sql.DB, dialect string) ([]int, error) {
	list, err := List(dialect)
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dialect == "postgres" {
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, advisoryKey); err != nil {
			return nil, fmt.Errorf("migrations: lock: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, advisoryKey)
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text    NOT NULL,
		applied_at bigint  NOT NULL)`); err != nil {
		return nil, fmt.Errorf("migrations: version table: %w", err)
	}
	done := map[int]bool{}
	rows, err := conn.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		done[v] = true
	}
	rows.Close()

	var applied []int
	insert := `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`
	if dialect == "postgres" {
		insert = `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`
	}
	for _, m := range list {
		if done[m.Version] {
			continue
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return applied, err
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			tx.Rollback()
			return applied, fmt.Errorf("migrations: %04d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, insert, m.Version, m.Name, time.Now().UnixMilli()); err != nil {
			tx.Rollback()
			return applied, err
		}
		if err := tx.Commit(); err != nil {
			return applied, err
		}
		applied = append(applied, m.Version)
	}
	return applied, nil
}
