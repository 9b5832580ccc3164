// Package models is owed's storage: the rows it keeps (users, listener items, verdicts, scores,
// owed jobs, budgets, events, scrapes) and the queries that read and change them, on SQLite or
// PostgreSQL through GORM.
package models

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/owed/owed/clock"
	"github.com/owed/owed/migrations"
)

// Dialects.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// ErrNotFound is returned when a row asked for does not exist (or is not visible to the asker).
var ErrNotFound = errors.New("not found")

// ErrForbidden is returned when a row exists but belongs to someone else.
var ErrForbidden = errors.New("forbidden")

// Options say where the database is.
type Options struct {
	// URL is a postgres:// URL, or empty for SQLite in DataDir. A "sqlite:" or "file:" URL names
	// an SQLite file elsewhere.
	URL     string
	DataDir string
	Clock   clock.Clock
	Logger  *slog.Logger
	// MaxConns caps PostgreSQL connections (default 32).
	MaxConns int
	// DailyLimit is the model calls an author may spend per UTC day unless they have a limit
	// of their own (0: DefaultDailyLimit). The store is its one owner: charges are judged
	// against it, and users and budget rows come back with it as their effective limit.
	DailyLimit int64
}

// DefaultDailyLimit is Options.DailyLimit when none is set.
const DefaultDailyLimit = 100

// isPostgres says whether the options name a PostgreSQL database (else SQLite).
func (o Options) isPostgres() bool {
	return strings.HasPrefix(o.URL, "postgres://") || strings.HasPrefix(o.URL, "postgresql://")
}

// sqlitePath is the SQLite file the options name: the URL's path, else owed.db in the data
// directory.
func (o Options) sqlitePath() string {
	if path := strings.TrimPrefix(strings.TrimPrefix(o.URL, "sqlite:"), "file:"); path != "" {
		return path
	}
	dir := o.DataDir
	if dir == "" {
		dir = "data"
	}
	return filepath.Join(dir, "owed.db")
}

// Store is owed's database. The zero value is not usable; call Open.
type Store struct {
	db      *gorm.DB // writes, and reads that must see them (SQLite: one connection)
	read    *gorm.DB // reads (SQLite: a pool of read-only connections)
	dialect string
	clock   clock.Clock
	inTx    bool
	// dailyLimit is the limit of users without their own (Options.DailyLimit).
	dailyLimit int64

	// changes hears, after commit, which authors' own views a write changed (see Changes);
	// a transaction's store collects them in pending until its commit.
	changes Changes
	pending *pendingChanges

	// Concurrent charges and verdicts are written in batches; nil in a transaction's store,
	// whose writes belong to that transaction.
	charges  *batcher[chargeCall, chargeOutcome, struct{}]
	screens  *batcher[screenCall, bool, itemKey]
	subjects *batcher[itemKey, subjectOutcome, itemKey]
}

// SlowStatement is how long a statement may take before it is logged at warn.
const SlowStatement = 200 * time.Millisecond

// readConns is the size of SQLite's read pool.
const readConns = 4

// Open connects, applies pending migrations and returns the store.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	// A config for each gorm.DB: gorm.Open keeps state in the one it is given.
	// GORM's own messages go to the store's logger: failed statements at error, and statements
	// slower than 200 ms at warn, without their parameters (they can hold content and token
	// hashes).
	gormLog := logger.Discard
	if opts.Logger != nil {
		gormLog = logger.NewSlogLogger(opts.Logger, logger.Config{SlowThreshold: SlowStatement, LogLevel: logger.Warn,
			IgnoreRecordNotFoundError: true, ParameterizedQueries: true})
	}
	config := func() *gorm.Config { return &gorm.Config{Logger: gormLog, SkipDefaultTransaction: true} }
	if opts.DailyLimit <= 0 {
		opts.DailyLimit = DefaultDailyLimit
	}
	s := &Store{clock: opts.Clock, dailyLimit: opts.DailyLimit}
	url := opts.URL
	switch {
	case opts.isPostgres():
		s.dialect = Postgres
		db, err := gorm.Open(postgres.Open(url), config())
		if err != nil {
			return nil, fmt.Errorf("open postgres: %w", err)
		}
		sqlDB, err := db.DB()
		if err != nil {
			return nil, err
		}
		max := opts.MaxConns
		if max <= 0 {
			max = 32
		}
		sqlDB.SetMaxOpenConns(max)
		sqlDB.SetMaxIdleConns(max)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
		s.db, s.read = db, db
	default:
		s.dialect = SQLite
		path := opts.sqlitePath()
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
		// Page caches: 16 MiB for the writer, 8 MiB for each reader; the OS keeps the file's
		// pages too, so more would buy little and cost resident memory on every connection.
		common := "_busy_timeout=10000&_foreign_keys=on&_synchronous=NORMAL"
		w, err := gorm.Open(sqlite.Open("file:"+path+"?_journal_mode=WAL&_txlock=immediate&_cache_size=-16000&"+common), config())
		if err != nil {
			return nil, fmt.Errorf("open sqlite: %w", err)
		}
		wdb, err := w.DB()
		if err != nil {
			return nil, err
		}
		// One writer: SQLite serialises writes anyway, and one connection makes that explicit
		// instead of a storm of SQLITE_BUSY retries.
		wdb.SetMaxOpenConns(1)
		wdb.SetMaxIdleConns(1)
		wdb.SetConnMaxLifetime(0)
		if err := wdb.PingContext(ctx); err != nil {
			return nil, fmt.Errorf("open sqlite: %w", err)
		}
		// Reads are prepared once per connection (SQLite otherwise recompiles every statement on
		// every call; pgx already caches statements on PostgreSQL). Not the writer's: GORM
		// prepares a new statement under a lock that waits for a connection, and with the one
		// writer connection held by a transaction that itself waits for that lock, neither
		// moves (seen in the fault soak). The writer's hot statements are batched instead, so
		// compiling them is paid once per batch.
		rcfg := config()
		rcfg.PrepareStmt = true
		r, err := gorm.Open(sqlite.Open("file:"+path+"?mode=ro&_txlock=deferred&_cache_size=-8000&"+common), rcfg)
		if err != nil {
			return nil, fmt.Errorf("open sqlite reader: %w", err)
		}
		rdb, err := r.DB()
		if err != nil {
			return nil, err
		}
		rdb.SetMaxOpenConns(readConns)
		rdb.SetMaxIdleConns(readConns)
		s.db, s.read = w, r
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return nil, err
	}
	applied, err := migrations.Apply(ctx, sqlDB, s.dialect)
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := s.Optimize(ctx); err != nil {
		s.Close()
		return nil, err
	}
	lanes := batchLanes
	s.charges = &batcher[chargeCall, chargeOutcome, struct{}]{max: maxBatch, lanes: lanes, write: s.chargeRows}
	s.screens = &batcher[screenCall, bool, itemKey]{max: maxBatch, lanes: lanes, write: s.recordScreens,
		key: screenCall.key}
	if s.dialect == Postgres {
		// SQLite reads in-process: there a batch would cost more than the reads it saves.
		s.subjects = &batcher[itemKey, subjectOutcome, itemKey]{max: maxBatch, lanes: lanes, write: s.screenSubjects,
			key: func(k itemKey) itemKey { return k }}
	}
	if len(applied) > 0 && opts.Logger != nil {
		opts.Logger.Info("migrations applied", "dialect", s.dialect, "versions", applied)
	}
	return s, nil
}

// Optimize keeps SQLite's query planner informed: without table statistics it can plan the
// public song list or the verdict trigger as scans over hundreds of thousands of rows (seconds
// instead of a millisecond at a million items). PRAGMA optimize analyzes only what changed
// enough to matter, so it is cheap to run at start and then periodically (app's cron, hourly).
// PostgreSQL's autovacuum keeps its own statistics, so there it does nothing.
func (s *Store) Optimize(ctx context.Context) error {
	if s.dialect != SQLite {
		return nil
	}
	// analysis_limit bounds each table's ANALYZE to a sample of about a thousand rows per index,
	// so the first optimize on a large database that was never analysed takes milliseconds, not
	// a scan of every index (start-up is promised under a second).
	if err := s.db.WithContext(ctx).Exec(`PRAGMA analysis_limit=1000`).Error; err != nil {
		return err
	}
	return s.db.WithContext(ctx).Exec(`PRAGMA optimize=0x10002`).Error
}

// Dialect is "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.dialect }

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.clock.Now() }

// nowMs is the store's clock in epoch milliseconds, the unit of every time column.
func (s *Store) nowMs() int64 { return s.clock.Now().UnixMilli() }

// DB is the writer handle, for packages that keep their own tables in this database.
func (s *Store) DB(ctx context.Context) *gorm.DB { return s.db.WithContext(ctx) }

// Reader is the read handle. Inside a transaction it is the transaction, so reads see its writes.
func (s *Store) Reader(ctx context.Context) *gorm.DB { return s.read.WithContext(ctx) }

// WithTx runs fn in one transaction on a store bound to it: everything fn writes commits
// together, or not at all if fn returns an error (or panics). Nested calls join the outer
// transaction.
func (s *Store) WithTx(ctx context.Context, fn func(tx *Store) error) error {
	if s.inTx {
		return fn(s)
	}
	pending := &pendingChanges{}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return fn(&Store{db: tx, read: tx, dialect: s.dialect, clock: s.clock, inTx: true, pending: pending,
			dailyLimit: s.dailyLimit})
	})
	if err == nil {
		if pending.all {
			s.changedAll()
		} else {
			s.changed(pending.ids...)
		}
	}
	return err
}

// Changes hears which authors' own views (Mine and their budget) a write changed, after the
// write committed. Every method of the store that changes a view tells it: new and deleted
// items (a song's deletion tells its commenters too), verdicts, scores, reschedules, retries,
// charges and daily limits. Claims and leases are not in the view and tell nothing.
type Changes interface {
	Changed(userIDs ...int64)
	// WakeAll is told of a change whose authors are not known (a bulk retry).
	WakeAll()
}

// SetChanges makes c hear the store's changes (nil: nobody). Set it before the store is used.
func (s *Store) SetChanges(c Changes) { s.changes = c }

type pendingChanges struct {
	ids []int64
	all bool
}

// changed tells Changes that the views of userIDs changed: now, or in a transaction at its
// commit (not at all if it rolls back).
func (s *Store) changed(userIDs ...int64) {
	if len(userIDs) == 0 {
		return
	}
	if s.pending != nil {
		s.pending.ids = append(s.pending.ids, userIDs...)
		return
	}
	if s.changes != nil {
		s.changes.Changed(userIDs...)
	}
}

// changedAll is changed for a write whose authors are not known.
func (s *Store) changedAll() {
	if s.pending != nil {
		s.pending.all = true
		return
	}
	if s.changes != nil {
		s.changes.WakeAll()
	}
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	return s.db.WithContext(ctx).Raw("SELECT 1").Scan(&one).Error
}

// Close closes both pools.
func (s *Store) Close() error {
	var errs []error
	for _, g := range []*gorm.DB{s.read, s.db} {
		if g == nil {
			continue
		}
		if d, err := g.DB(); err == nil {
			errs = append(errs, d.Close())
		}
	}
	return errors.Join(errs...)
}
