// Package migrations holds owed's versioned SQL schema, one folder per dialect, and applies it.
//
// Files are named NNNN_name.sql; each is applied once, in order, inside a transaction, and
// recorded in schema_migrations. On PostgreSQL every pending version is applied in one
// transaction that first takes a transaction-scoped advisory lock, which serialises replicas
// that start together (exactly one of them applies a pending version) and which no pooler can
// leave held: it ends with the transaction.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed sqlite/*.sql postgres/*.sql
var files embed.FS

// dialect is what migrating does differently on each database: where its files are, how its
// statements take parameters, how replicas that start together take turns, and how to ask
// whether a table exists. Every other step is the same on both.
type dialect struct {
	// name is the dialect's folder of migrations ("sqlite" or "postgres").
	name string
	// renumber, insert and exists are the statements migrating runs: move a migration's
	// record to another version (to, from, name); record one (version, name, applied_at);
	// count the schema_migrations tables of the database's current schema.
	renumber, insert, exists string
	// tryLock takes, for the rest of the transaction, the lock that keeps replicas from
	// migrating at the same time, answering whether it got it; waitLock waits for it, up to
	// the lock timeout setLockTimeout sets ($1, milliseconds). "" where the database's one
	// writer already keeps replicas apart (every version then has a transaction of its own).
	tryLock, setLockTimeout, waitLock string
	// renumbered lists migrations that moved to another version after databases had
	// recorded them (see renumber).
	renumbered []renumbering
}

// renumbering is a migration that moved from one version to another.
type renumbering struct {
	name     string
	from, to int
}

// advisoryKey is the PostgreSQL advisory lock owed holds while migrating.
const advisoryKey = 0x6f776564 // "owed"

// dialects are the databases owed migrates, by name.
var dialects = map[string]dialect{
	"sqlite": {
		name:     "sqlite",
		renumber: `UPDATE schema_migrations SET version = ? WHERE version = ? AND name = ?`,
		insert:   `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		exists:   `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`,
		// public_title was version 4 until SQLite gained a twin of PostgreSQL's
		// 0004_claim_room, so that every version names the same step in both dialects.
		renumbered: []renumbering{{name: "public_title", from: 4, to: 5}},
	},
	"postgres": {
		name:           "postgres",
		renumber:       `UPDATE schema_migrations SET version = $1 WHERE version = $2 AND name = $3`,
		insert:         `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
		exists:         `SELECT count(*) FROM pg_tables WHERE tablename = 'schema_migrations' AND schemaname = current_schema()`,
		tryLock:        `SELECT pg_try_advisory_xact_lock(` + strconv.Itoa(advisoryKey) + `)`,
		setLockTimeout: `SELECT set_config('lock_timeout', $1, true)`,
		waitLock:       `SELECT pg_advisory_xact_lock(` + strconv.Itoa(advisoryKey) + `)`,
	},
}

// dialectNamed is the dialect called name.
func dialectNamed(name string) (dialect, error) {
	d, ok := dialects[name]
	if !ok {
		return dialect{}, fmt.Errorf("migrations: unknown dialect %q", name)
	}
	return d, nil
}

// Migration is one versioned schema step.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// List returns the dialect's migrations in version order.
func List(dialect string) ([]Migration, error) {
	d, err := dialectNamed(dialect)
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(files, d.name)
	if err != nil {
		return nil, fmt.Errorf("migrations: %s: %w", d.name, err)
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
		body, err := fs.ReadFile(files, d.name+"/"+name)
		if err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
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

// renumber moves the records of renumbered migrations to their new versions, so that a
// database that applied one under its old version does not apply it again. A migration that
// now takes the old version is then applied as any pending one.
func renumber(ctx context.Context, conn execer, d dialect) error {
	for _, r := range d.renumbered {
		if _, err := conn.ExecContext(ctx, d.renumber, r.to, r.from, r.name); err != nil {
			return fmt.Errorf("migrations: renumber %s from %d to %d: %w", r.name, r.from, r.to, err)
		}
	}
	return nil
}

// DefaultLockTimeout is LockWait.Timeout when none is set.
const DefaultLockTimeout = 2 * time.Minute

// LockWait is how a start waits for another process's migration lock (PostgreSQL): up to
// Timeout (0: DefaultLockTimeout), saying so on Log once when it has to wait.
type LockWait struct {
	Timeout time.Duration
	Log     *slog.Logger
}

// ErrLockTimeout is a start that waited LockWait.Timeout for another process's migration
// lock without getting it.
var ErrLockTimeout = errors.New("migrations: another process held the migration lock past the lock timeout")

// execer runs statements on a connection or in a transaction.
type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// ApplyWith brings db up to the newest version of the dialect ("sqlite" or "postgres") and
// returns the versions it applied. A failing migration rolls back whole and stops the rest
// (on PostgreSQL, with every version of this start: they share its transaction).
func ApplyWith(ctx context.Context, db *sql.DB, dialect string, wait LockWait) ([]int, error) {
	d, err := dialectNamed(dialect)
	if err != nil {
		return nil, err
	}
	list, err := List(dialect)
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: connect: %w", err)
	}
	defer conn.Close()
	if d.tryLock == "" {
		return pending(ctx, conn, d, list, true)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("migrations: begin: %w", err)
	}
	defer tx.Rollback()
	if err := lock(ctx, tx, d, wait); err != nil {
		return nil, err
	}
	applied, err := pending(ctx, tx, d, list, false)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("migrations: commit: %w", err)
	}
	return applied, nil
}

// lock takes the migration lock in tx, waiting up to wait.Timeout with a log line.
func lock(ctx context.Context, tx *sql.Tx, d dialect, wait LockWait) error {
	var got bool
	if err := tx.QueryRowContext(ctx, d.tryLock).Scan(&got); err != nil {
		return fmt.Errorf("migrations: lock: %w", err)
	}
	if got {
		return nil
	}
	timeout := wait.Timeout
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	if wait.Log != nil {
		wait.Log.Warn("migrations: waiting for another process's migration lock", "timeout", timeout)
	}
	if _, err := tx.ExecContext(ctx, d.setLockTimeout, strconv.FormatInt(timeout.Milliseconds(), 10)); err != nil {
		return fmt.Errorf("migrations: lock: %w", err)
	}
	if _, err := tx.ExecContext(ctx, d.waitLock); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55P03" {
			return fmt.Errorf("%w (%s, OWED_MIGRATE_LOCK_TIMEOUT): a process that is migrating, or a session holding "+
				"pg_advisory_lock(%d), keeps it; see pg_locks", ErrLockTimeout, timeout, advisoryKey)
		}
		return fmt.Errorf("migrations: lock: %w", err)
	}
	return nil
}

// pending applies the versions not yet recorded, each in a transaction of its own when own
// is true (run is then a connection), else in run's.
func pending(ctx context.Context, run execer, d dialect, list []Migration, own bool) ([]int, error) {
	if _, err := run.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text    NOT NULL,
		applied_at bigint  NOT NULL)`); err != nil {
		return nil, fmt.Errorf("migrations: version table: %w", err)
	}
	if err := renumber(ctx, run, d); err != nil {
		return nil, err
	}
	recorded, err := appliedOn(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("migrations: applied versions: %w", err)
	}
	done := map[int]bool{}
	for _, a := range recorded {
		done[a.Version] = true
	}
	if newest := list[len(list)-1].Version; len(recorded) > 0 && recorded[len(recorded)-1].Version > newest {
		return nil, &NewerSchemaError{Found: recorded[len(recorded)-1].Version, Known: newest}
	}
	var applied []int
	for _, m := range list {
		if done[m.Version] {
			continue
		}
		if err := step(ctx, run, d, m, own); err != nil {
			return applied, err
		}
		applied = append(applied, m.Version)
	}
	return applied, nil
}

// step applies m and records it: in a transaction of its own when own is true.
func step(ctx context.Context, run execer, d dialect, m Migration, own bool) error {
	var tx *sql.Tx
	if own {
		var err error
		if tx, err = run.(*sql.Conn).BeginTx(ctx, nil); err != nil {
			return fmt.Errorf("migrations: %04d_%s: %w", m.Version, m.Name, err)
		}
		defer tx.Rollback()
		run = tx
	}
	if _, err := run.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("migrations: %04d_%s: %w", m.Version, m.Name, err)
	}
	if _, err := run.ExecContext(ctx, d.insert, m.Version, m.Name, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("migrations: record %04d_%s: %w", m.Version, m.Name, err)
	}
	if tx != nil {
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migrations: %04d_%s: commit: %w", m.Version, m.Name, err)
		}
	}
	return nil
}

// NewerSchemaError is a database migrated by a newer owed than this one: running on it could
// write rows the newer schema forbids, or miss the work its triggers owe, so owed refuses.
type NewerSchemaError struct {
	Found, Known int
}

func (e *NewerSchemaError) Error() string {
	return fmt.Sprintf("migrations: the database's schema is at version %d, newer than this owed knows (%d): "+
		"a newer owed has migrated it; run that version (or newer) here too", e.Found, e.Known)
}

// Applied is a migration recorded in the database.
type Applied struct {
	Version   int
	Name      string
	AppliedAt time.Time
}

// Report is the state of a database's schema against the migrations this owed knows.
type Report struct {
	Applied []Applied   // recorded in the database, in version order
	Pending []Migration // known here and not applied yet
	Unknown []int       // applied by a newer owed: this one refuses to run on the database
}

// appliedOn reads the migrations recorded in schema_migrations, in version order.
func appliedOn(ctx context.Context, q execer) ([]Applied, error) {
	rows, err := q.QueryContext(ctx, `SELECT version, name, applied_at FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Applied
	for rows.Next() {
		var a Applied
		var at int64
		if err := rows.Scan(&a.Version, &a.Name, &at); err != nil {
			return nil, err
		}
		a.AppliedAt = time.UnixMilli(at).UTC()
		out = append(out, a)
	}
	return out, rows.Err()
}

// Status reads which migrations the database has, changing nothing (not even on an empty
// database, where every migration is pending).
func Status(ctx context.Context, db *sql.DB, dialect string) (Report, error) {
	var r Report
	d, err := dialectNamed(dialect)
	if err != nil {
		return r, err
	}
	list, err := List(dialect)
	if err != nil {
		return r, err
	}
	var n int
	if err := db.QueryRowContext(ctx, d.exists).Scan(&n); err != nil {
		return r, fmt.Errorf("migrations: status: %w", err)
	}
	known := map[int]bool{}
	for _, m := range list {
		known[m.Version] = true
	}
	if n > 0 {
		if r.Applied, err = appliedOn(ctx, db); err != nil {
			return r, fmt.Errorf("migrations: status: %w", err)
		}
	}
	done := map[int]bool{}
	for _, a := range r.Applied {
		done[a.Version] = true
		if !known[a.Version] {
			r.Unknown = append(r.Unknown, a.Version)
		}
	}
	for _, m := range list {
		if !done[m.Version] {
			r.Pending = append(r.Pending, m)
		}
	}
	return r, nil
}
