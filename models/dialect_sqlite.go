package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
)

// sqliteDialect is SQLite (mattn/go-sqlite3): one file, one writer, a pool of readers.
type sqliteDialect struct{}

func (sqliteDialect) name() string { return SQLite }

// sqlitePath is the SQLite file the options name: the URL's path, else owed.db in DataDir.
func sqlitePath(o Options) string {
	if path := strings.TrimPrefix(strings.TrimPrefix(o.URL, "sqlite:"), "file:"); path != "" {
		return path
	}
	dir := o.DataDir
	if dir == "" {
		dir = "data"
	}
	return filepath.Join(dir, "owed.db")
}

// readConns is the size of SQLite's read pool.
const readConns = 4

func (sqliteDialect) open(ctx context.Context, opts Options, config func() *gorm.Config) (*gorm.DB, *gorm.DB, error) {
	path := sqlitePath(opts)
	if err := privateFiles(path); err != nil {
		return nil, nil, err
	}
	// Page caches: 16 MiB for the writer, 8 MiB per reader (the OS caches the file too).
	// _stmt_cache_size: the writer keeps its 64 last statements prepared, as GORM keeps the
	// readers' (below); parsing a claim each time cost more CPU than running it.
	// recursive_triggers: a row INSERT OR REPLACE replaces goes through the delete triggers.
	// _mutex=no: database/sql gives a connection to one goroutine at a time, and the
	// serialized default cost the author's view 15 %.
	common := "_busy_timeout=10000&_foreign_keys=on&_synchronous=NORMAL&_recursive_triggers=on&_mutex=no"
	// One writer: SQLite serialises writes anyway, without a storm of SQLITE_BUSY.
	w, wdb, err := sqlitePool(path+"?_journal_mode=WAL&_txlock=immediate&_cache_size=-16000&_stmt_cache_size=64&"+common, config(), 1)
	if err != nil {
		return nil, nil, fmt.Errorf("open sqlite: %w", err)
	}
	if err := wdb.PingContext(ctx); err != nil {
		wdb.Close()
		return nil, nil, fmt.Errorf("open sqlite: %w", err)
	}
	// Reads are prepared once per connection. Not the writer's: GORM prepares under a lock
	// that waits for a connection, which deadlocks with a transaction holding the one writer.
	rcfg := config()
	rcfg.PrepareStmt = true
	r, _, err := sqlitePool(path+"?mode=ro&_txlock=deferred&_cache_size=-8000&"+common, rcfg, readConns)
	if err != nil {
		wdb.Close()
		return nil, nil, fmt.Errorf("open sqlite reader: %w", err)
	}
	return w, r, nil
}

// sqlitePool opens a pool of at most conns connections to the file and options of dsn.
func sqlitePool(dsn string, cfg *gorm.Config, conns int) (*gorm.DB, *sql.DB, error) {
	g, err := gorm.Open(sqlite.Open("file:"+dsn), cfg)
	if err != nil {
		return nil, nil, err
	}
	db, err := g.DB()
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return g, db, nil
}

// healthPool: the writer, so that readiness learns the file still takes its connection.
func (sqliteDialect) healthPool(_ Options, writer *gorm.DB) (*sql.DB, error) { return writer.DB() }

// notify: one process holds SQLite, and the store tells its notifier itself.
func (sqliteDialect) notify() string { return "" }

func (sqliteDialect) readOnly() string { return `SELECT 'off'` }

func (sqliteDialect) openPlain(opts Options) (*sql.DB, error) {
	path := sqlitePath(opts)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open sqlite: no database at %s: %w", path, err)
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// drain: SQLite's connections are files, closed with their pools.
func (sqliteDialect) drain() {}

// backup copies one snapshot (VACUUM INTO in one read transaction) while owed goes on
// writing, beside dest and renamed into place, so a failed backup leaves no partial file.
func (d sqliteDialect) backup(ctx context.Context, opts Options, dest string) error {
	if _, err := os.Stat(dest); err == nil {
		return fmt.Errorf("backup: %s already exists; choose a new file", dest)
	}
	db, err := d.openPlain(opts)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer db.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".*")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	tmpPath := tmp.Name()
	tmp.Close()
	// The copy holds secrets, so it is the owner's alone (0600), even if SQLite made it anew.
	defer os.Remove(tmpPath)
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, tmpPath); err != nil {
		return fmt.Errorf("backup: copy: %w", err)
	}
	if err := os.Chmod(tmpPath, 0o600); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return wrap(os.Rename(tmpPath, dest), "backup")
}

// optimize runs PRAGMA optimize, so SQLite plans hot statements with statistics.
func (sqliteDialect) optimize(ctx context.Context, s *Store) error {
	// analysis_limit samples each index, so a first optimize takes milliseconds.
	if _, err := s.exec(ctx, `PRAGMA analysis_limit=1000`); err != nil {
		return fmt.Errorf("optimize: %w", err)
	}
	_, err := s.exec(ctx, `PRAGMA optimize=0x10002`)
	return wrap(err, "optimize")
}

func (sqliteDialect) bind(q string) string { return q }

func (sqliteDialect) fromJSON(alias string, cols ...column) string {
	return "(SELECT " + columnList(cols, func(c column) string {
		return "json_extract(value, '$." + c.name + "') AS " + c.name
	}) + " FROM json_each(?)) AS " + alias
}

func (sqliteDialect) idIn(col string) string { return col + " IN (SELECT value FROM json_each(?))" }

// forUpdate: SQLite's immediate transactions already hold the database's one write lock.
func (sqliteDialect) forUpdate() string { return "" }

func (sqliteDialect) lockAdmins() string { return "" }

// artDesc: SQLite sorts NULL lowest, so last when descending.
func (sqliteDialect) artDesc() string { return `art DESC, id DESC` }

// claimDue: in WAL mode with synchronous=NORMAL no commit waits for the disk already.
func (sqliteDialect) claimDue(filter string, _ bool) string {
	return `UPDATE content_jobs SET lease_until = ?, lease_owner = ? WHERE id IN (SELECT id FROM content_jobs
		WHERE due_at <= ? AND (lease_until IS NULL OR lease_until <= ?)` + filter + heldTasks + `
		ORDER BY due_at, id LIMIT ?) RETURNING ` + jobColumns
}

func (sqliteDialect) skipLocked() string { return "" }

func (sqliteDialect) claimDeliveries(now, until int64, limit int, owner string) (string, []any) {
	return `UPDATE webhook_deliveries SET lease_until = ?, lease_owner = ? WHERE id IN (
		SELECT d.id FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
		WHERE d.status = 'pending' AND d.due_at <= ? AND (d.lease_until IS NULL OR d.lease_until <= ?) AND w.active = 1
		AND NOT ` + deliveriesHeld + `
		ORDER BY d.due_at, d.id LIMIT ?) RETURNING ` + deliveryColumns, []any{until, owner, now, now, limit}
}

func (sqliteDialect) writableCTEs() bool { return false }

// batchReads: SQLite reads in-process; there a batch would cost more than the reads it saves.
func (sqliteDialect) batchReads() bool { return false }

// sqliteFault classifies SQLite's errors: BUSY and LOCKED (still locked when busy_timeout ran
// out) are transient; FULL (the disk, or max_page_count), READONLY and IOERR are storage.
func sqliteFault(err error) Fault {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return FaultNone
	}
	switch se.Code {
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		return FaultTransient
	case sqlite3.ErrFull, sqlite3.ErrReadonly, sqlite3.ErrIoErr, sqlite3.ErrCantOpen:
		return FaultStorage
	}
	return FaultNone
}

// sqliteUnique reports whether err is SQLite refusing a row for the unique index named index.
func sqliteUnique(err error, index string) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.ExtendedCode == sqlite3.ErrConstraintUnique &&
		strings.HasSuffix(se.Error(), "index '"+index+"'")
}

// txStart: SQLite is a local file with one writer; a COMMIT that failed did not commit.
func (sqliteDialect) txStart(context.Context, *Store, bool) (int64, error) { return 0, nil }

// timeoutsBind: SQLite has no lock or statement timeout to set (its writers wait busy_timeout).
func (sqliteDialect) timeoutsBind() bool { return false }

func (sqliteDialect) txStatus(context.Context, *Store, int64) (outcome, error) {
	return outcomeAborted, nil
}

func (sqliteDialect) commitMayLand() bool { return false }

// clockNow: SQLite is a file on this host, so its clock is the host's.
func (sqliteDialect) clockNow(context.Context, *Store) (time.Time, error) {
	return time.Now().UTC(), nil
}

// privateFiles makes the database's folder (0700 when made here) and file the owner's alone
// before SQLite opens it, so its WAL and SHM files, which take the file's mode, are 0600 too.
func privateFiles(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open sqlite: %w", err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("open sqlite: %w", err)
		}
	}
	return nil
}
