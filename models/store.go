// Package models is owed's storage: the rows it keeps and the SQL that reads and changes them,
// on SQLite or PostgreSQL through GORM. Every statement runs through exec, scan or query
// (rows.go); what differs between the dialects is in one file per dialect.
package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/owed/owed/clock"
	"github.com/owed/owed/migrations"
)

// ErrNotFound is returned when a row asked for does not exist (or is not visible to the asker);
// missing makes it, naming what was asked for (NotFoundWhat) for the API's 404.
var ErrNotFound = errors.New("not found")

// notFoundError is missing's error.
type notFoundError struct {
	what string
	id   any
}

func (e *notFoundError) Error() string {
	if e.id == nil {
		return e.what + ": not found"
	}
	return fmt.Sprintf("%s %v: not found", e.what, e.id)
}

func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }

// missing says what (a "song", a "job" …) of id is not there, or not for the asker (id nil: none given).
func missing(what string, id any) error { return &notFoundError{what: what, id: id} }

// wrap says what failed: err prefixed by the formatted words, or nil when err is nil.
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// fetch is what q selects, scanned into a T (a slice of rows, one row, or one column's value);
// on an error it answers T's zero value.
func fetch[T any](ctx context.Context, s *Store, pool *gorm.DB, q string, args ...any) (T, error) {
	var out T
	if err := s.scan(ctx, pool, &out, q, args...); err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// maybe is the first row q selects; ok is false (and the row T's zero value) when it selects none.
func maybe[T any](ctx context.Context, s *Store, pool *gorm.DB, q string, args ...any) (row T, ok bool, err error) {
	rows, err := fetch[[]T](ctx, s, pool, q, args...)
	if err != nil || len(rows) == 0 {
		return row, false, err
	}
	return rows[0], true, nil
}

// first is maybe's row; missing(what, id) when q selects none.
func first[T any](ctx context.Context, s *Store, pool *gorm.DB, what string, id any, q string, args ...any) (T, error) {
	row, ok, err := maybe[T](ctx, s, pool, q, args...)
	if err != nil {
		return row, fmt.Errorf("%s %v: %w", what, id, err)
	}
	if !ok {
		return row, missing(what, id)
	}
	return row, nil
}

// wrapped is v, or on an error T's zero value and err prefixed as wrap does.
func wrapped[T any](v T, err error, format string, args ...any) (T, error) {
	if err != nil {
		var zero T
		return zero, fmt.Errorf(format+": %w", append(args, err)...)
	}
	return v, nil
}

// wrapped2 is wrapped for two values.
func wrapped2[A, B any](a A, b B, err error, format string, args ...any) (A, B, error) {
	if err != nil {
		var za A
		var zb B
		return za, zb, fmt.Errorf(format+": %w", append(args, err)...)
	}
	return a, b, nil
}

// NotFoundWhat names what err says is not found ("song"), or "" when it says no such thing.
func NotFoundWhat(err error) string {
	var nf *notFoundError
	if errors.As(err, &nf) {
		return nf.what
	}
	return ""
}

// ErrForbidden is returned when a row exists but belongs to someone else.
var ErrForbidden = errors.New("forbidden")

// Options say where the database is.
type Options struct {
	// URL is a postgres:// URL, an SQLite "sqlite:" or "file:" URL, or empty for SQLite in DataDir.
	URL     string
	DataDir string
	Clock   clock.Clock
	// RetryClock is what retries pause on; the wall clock when nil (a fake one never moves).
	RetryClock clock.Clock
	Logger     *slog.Logger
	// MaxConns caps PostgreSQL connections (default DefaultMaxConns).
	MaxConns int
	// DailyLimit is an author's model calls per UTC day without a limit of their own (0: default).
	DailyLimit int64
	// SlowStatement is how long a statement may take before it is logged at warn (0: the default).
	SlowStatement time.Duration
	// MaxConnLifetime is how long a PostgreSQL connection lives (0: DefaultMaxConnLifetime).
	MaxConnLifetime time.Duration
	// LockTimeout and StatementTimeout bound every statement on PostgreSQL (0: the defaults;
	// below 0: the server's own setting); each transaction sets them for itself (txStart).
	LockTimeout, StatementTimeout time.Duration
	// MigrateLockTimeout is how long Open waits for another's migration lock (0: the default).
	MigrateLockTimeout time.Duration
}

// The timeouts' defaults (Options.LockTimeout, Options.StatementTimeout).
const (
	DefaultLockTimeout      = 5 * time.Second
	DefaultStatementTimeout = 30 * time.Second
)

// timeouts are a store's lock and statement timeouts (0: the server's).
type timeouts struct{ lock, statement time.Duration }

func timeoutsOf(opts Options) timeouts {
	pick := func(d, def time.Duration) time.Duration {
		switch {
		case d == 0:
			return def
		case d < 0:
			return 0
		}
		return d
	}
	return timeouts{lock: pick(opts.LockTimeout, DefaultLockTimeout), statement: pick(opts.StatementTimeout, DefaultStatementTimeout)}
}

// DefaultDailyLimit is Options.DailyLimit when none is set.
const DefaultDailyLimit = 100

// Store is owed's database. The zero value is not usable; call Open.
type Store struct {
	db      *gorm.DB // writes, and reads that must see them (SQLite: one connection)
	read    *gorm.DB // reads (SQLite: a pool of read-only connections)
	dialect dialect  // chosen once, in Open
	clock   clock.Clock
	// retryClock is what the store's retries pause on (Options.RetryClock).
	retryClock clock.Clock
	inTx       bool
	// health is whether the database takes writes (StorageProblem), shared with transactions.
	health *storeHealth
	// dailyLimit is the limit of users without their own (Options.DailyLimit).
	dailyLimit int64
	// timeouts bind each transaction; ownTx runs a statement outside one in one of its own.
	timeouts timeouts
	ownTx    bool
	// ping is the pool readiness asks (dialect.healthPool).
	ping *sql.DB

	// changes hears which authors' views a write changed; a transaction collects them in pending.
	changes Changes
	pending *pendingChanges

	// Concurrent charges and verdicts are written in batches; nil in a transaction's store.
	charges  *batcher[chargeCall, chargeOutcome, struct{}]
	screens  *batcher[screenCall, bool, itemKey]
	subjects *batcher[itemKey, subjectOutcome, itemKey]
}

// DefaultSlowStatement is Options.SlowStatement when none is set.
const DefaultSlowStatement = 200 * time.Millisecond

// Open connects, applies pending migrations and returns the store.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.RetryClock == nil {
		opts.RetryClock = clock.Real{}
	}
	// GORM logs failed statements at error and slow ones at warn, without their parameters
	// (they can hold content and token hashes); query logs through the same logger.
	if opts.SlowStatement <= 0 {
		opts.SlowStatement = DefaultSlowStatement
	}
	gormLog := logger.Discard
	if opts.Logger != nil {
		gormLog = quietLogger{logger.NewSlogLogger(opts.Logger, logger.Config{SlowThreshold: opts.SlowStatement, LogLevel: logger.Warn,
			IgnoreRecordNotFoundError: true, ParameterizedQueries: true}), opts.SlowStatement}
	}
	config := func() *gorm.Config { return &gorm.Config{Logger: gormLog, SkipDefaultTransaction: true} }
	if opts.DailyLimit <= 0 {
		opts.DailyLimit = DefaultDailyLimit
	}
	s := &Store{clock: opts.Clock, retryClock: opts.RetryClock, dialect: dialectOf(opts), dailyLimit: opts.DailyLimit, health: &storeHealth{}}
	var err error
	if s.db, s.read, err = s.dialect.open(ctx, opts, config); err != nil {
		return nil, err
	}
	s.timeouts = timeoutsOf(opts)
	s.ownTx = s.dialect.timeoutsBind() && s.timeouts != timeouts{}
	if s.ping, err = s.dialect.healthPool(opts, s.db); err != nil {
		s.Close()
		return nil, err
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("open: %w", err)
	}
	applied, err := migrations.ApplyWith(ctx, sqlDB, s.dialect.name(), migrations.LockWait{Timeout: opts.MigrateLockTimeout, Log: opts.Logger})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	if err := s.Optimize(ctx); err != nil {
		s.Close()
		return nil, err
	}
	lanes := batchLanes
	s.charges = &batcher[chargeCall, chargeOutcome, struct{}]{max: maxBatch, lanes: lanes, write: s.chargeRows}
	s.screens = &batcher[screenCall, bool, itemKey]{max: maxBatch, lanes: lanes, write: s.recordScreens,
		key: screenCall.key}
	if s.dialect.batchReads() {
		s.subjects = &batcher[itemKey, subjectOutcome, itemKey]{max: maxBatch, lanes: lanes, write: s.screenSubjects,
			key: func(k itemKey) itemKey { return k }}
	}
	if len(applied) > 0 && opts.Logger != nil {
		opts.Logger.Info("migrations applied", "dialect", s.dialect.name(), "versions", applied)
	}
	s.logRenames(ctx, applied, opts.Logger)
	return s, nil
}

// Optimize keeps SQLite's planner's statistics fresh (start and hourly); PostgreSQL's autovacuum does.
func (s *Store) Optimize(ctx context.Context) error {
	return s.dialect.optimize(ctx, s)
}

// Dialect is SQLite or Postgres.
func (s *Store) Dialect() string { return s.dialect.name() }

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.clock.Now() }

// DatabaseTime is the database server's clock now, which replicas set their clocks by.
func (s *Store) DatabaseTime(ctx context.Context) (time.Time, error) {
	t, err := s.dialect.clockNow(ctx, s)
	return wrapped(t, err, "read the database's clock")
}

// nowMs is the store's clock in epoch milliseconds, the unit of every time column.
func (s *Store) nowMs() int64 { return s.clock.Now().UnixMilli() }

// WithTx runs fn in one transaction on a store bound to it: all of fn's writes commit, or none
// if fn fails (or panics). Nested calls join the outer transaction. A transaction that did not
// commit and failed on a transient fault is run again (at most MaxTxTries), so fn must be safe
// to run again (see tx.go).
func (s *Store) WithTx(ctx context.Context, fn func(tx *Store) error) error {
	if s.inTx {
		return fn(s)
	}
	return s.withTx(ctx, fn)
}

// Changes hears, after commit, which authors' own views (Mine and their budget) a write changed.
type Changes interface {
	Changed(userIDs ...int64)
	// WakeAll is told of a change whose authors are not known (a bulk retry).
	WakeAll()
}

// SetChanges makes c hear the store's changes (nil: nobody). Set it before the store is used.
func (s *Store) SetChanges(c Changes) { s.changes = c }

type pendingChanges struct {
	ids  []int64
	all  bool
	made []any // what the transaction made, for its request's hook (tx.go)
}

// changed tells Changes that the views of userIDs changed: now, or at a transaction's commit.
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

// Ping checks, on a pool of its own, that the database answers and takes writes.
func (s *Store) Ping(ctx context.Context) error {
	var ro string
	err := s.retryRepeatable(ctx, func() error { return s.ping.QueryRowContext(ctx, s.dialect.readOnly()).Scan(&ro) })
	switch {
	case err != nil:
		return fmt.Errorf("ping: %w", err)
	case ro == "on":
		// A connection left on a standby would keep saying so: the next ping connects again.
		s.ping.SetMaxIdleConns(0)
		s.ping.SetMaxIdleConns(1)
		return fmt.Errorf("ping: %w", errReadOnlyServer)
	}
	return nil
}

// Notify sends a notification on channel, its payload prefixed by the store's schema as the
// triggers' are (PostgreSQL; nothing on SQLite): the notifier's heartbeat.
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	q := s.dialect.notify()
	if q == "" {
		return nil
	}
	var empty string
	return s.scan(ctx, s.db, &empty, q, channel, payload)
}

// Close closes the pools and waits (at most closeWait) for their connections to end.
func (s *Store) Close() error {
	var errs []error
	pools := []*sql.DB{s.ping}
	for _, g := range []*gorm.DB{s.read, s.db} {
		if g == nil {
			continue
		}
		if d, err := g.DB(); err == nil {
			pools = append(pools, d)
		}
	}
	for _, d := range pools {
		if d != nil {
			errs = append(errs, d.Close())
		}
	}
	s.dialect.drain()
	return errors.Join(errs...)
}

// quietLogger passes GORM's logger only the statements it logs: failed or slower than slow.
type quietLogger struct {
	logger.Interface
	slow time.Duration
}

// Trace hands the statement on when it failed or was slow.
func (l quietLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	if err == nil && time.Since(begin) <= l.slow {
		return
	}
	l.Interface.Trace(ctx, begin, fc, err)
}

// ParamsFilter is the wrapped logger's, which leaves the parameters out (ParameterizedQueries).
func (l quietLogger) ParamsFilter(ctx context.Context, sql string, params ...any) (string, []any) {
	if f, ok := l.Interface.(gorm.ParamsFilter); ok {
		return f.ParamsFilter(ctx, sql, params...)
	}
	return sql, params
}

// LogMode is the logger at level; only at warn or quieter does it leave out the rest.
func (l quietLogger) LogMode(level logger.LogLevel) logger.Interface {
	inner := l.Interface.LogMode(level)
	if level > logger.Warn {
		return inner
	}
	return quietLogger{inner, l.slow}
}
