// Package riverside is River's side of each comparison: River v0.51.2 on the same database
// engine, doing owed's screen work (Screen) or its own benchmark's no-op jobs (Noop).
package riverside

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/owed/owed/bench/internal/harness"
)

// PostgreSQL drivers River can use.
const (
	PGX         = "pgxv5"       // riverpgxv5 over a pgxpool (River's recommended driver)
	DatabaseSQL = "databasesql" // riverdatabasesql over database/sql with pgx's stdlib driver, as owed's GORM
)

// Config says where and how River runs.
type Config struct {
	Dialect  string // harness.SQLite or harness.Postgres
	Where    string // a fresh database: SQLite file path or postgres:// URL
	PGDriver string // PGX or DatabaseSQL
	Conns    int    // PostgreSQL pool size
	Workers  int    // MaxWorkers of the default queue
	Timeout  time.Duration
	Log      *slog.Logger
	Profile  string // profile the timed part into this file
}

// pools are one side's connections.
type pools struct {
	write *sql.DB       // SQLite: the one connection River needs; PostgreSQL (databasesql): the pool
	read  *sql.DB       // SQLite: a read-only pool for the worker's item reads; PostgreSQL: write
	pgx   *pgxpool.Pool // PostgreSQL (pgxv5)
}

func (p *pools) close() {
	if p.pgx != nil {
		p.pgx.Close()
	}
	if p.read != nil && p.read != p.write {
		p.read.Close()
	}
	if p.write != nil {
		p.write.Close()
	}
}

// open connects to cfg.Where. setup always gets a database/sql handle (for schema and seeding).
func open(ctx context.Context, cfg Config) (*pools, *sql.DB, error) {
	p := &pools{}
	if cfg.Dialect == harness.SQLite {
		w, err := sql.Open("sqlite3", harness.SQLiteDSN(cfg.Where, false))
		if err != nil {
			return nil, nil, err
		}
		// As River's docs and its own CLI say for SQLite: one connection.
		w.SetMaxOpenConns(1)
		w.SetMaxIdleConns(1)
		w.SetConnMaxLifetime(0)
		p.write = w
		if err := w.PingContext(ctx); err != nil {
			p.close()
			return nil, nil, err
		}
		// Create the file's WAL before opening it read-only.
		r, err := sql.Open("sqlite3", harness.SQLiteDSN(cfg.Where, true))
		if err != nil {
			p.close()
			return nil, nil, err
		}
		r.SetMaxOpenConns(8)
		r.SetMaxIdleConns(8)
		p.read = r
		return p, w, nil
	}
	db, err := sql.Open("pgx", cfg.Where)
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(cfg.Conns)
	db.SetMaxIdleConns(cfg.Conns)
	p.write, p.read = db, db
	if cfg.PGDriver == PGX {
		pc, err := pgxpool.ParseConfig(cfg.Where)
		if err != nil {
			p.close()
			return nil, nil, err
		}
		pc.MaxConns = int32(cfg.Conns)
		if p.pgx, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			p.close()
			return nil, nil, err
		}
	}
	return p, db, nil
}

// migrate applies River's migrations.
func migrate[TTx any](ctx context.Context, driver riverdriver.Driver[TTx]) error {
	m, err := rivermigrate.New(driver, nil)
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

// clientConfig is River's client configuration: its own benchmark's fetch settings ("much
// better than the client's default values"), and workers on the default queue.
func clientConfig(cfg Config, workers *river.Workers) *river.Config {
	return &river.Config{
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Logger:            cfg.Log,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}},
		Workers:           workers,
	}
}

// insertAll inserts the jobs in batches of 5,000 (as River's benchmark does) before the client
// starts.
func insertAll[TTx any](ctx context.Context, client *river.Client[TTx], params []river.InsertManyParams) error {
	for start := 0; start < len(params); start += 5000 {
		if _, err := client.InsertMany(ctx, params[start:min(start+5000, len(params))]); err != nil {
			return fmt.Errorf("river insert: %w", err)
		}
	}
	return nil
}

// withDriver runs the func for with the driver the configuration names.
func withDriver(cfg Config, p *pools, sqlite func(*riversqlite.Driver) error, dbsql func(*riverdatabasesql.Driver) error,
	pgxv5 func(*riverpgxv5.Driver) error) error {
	switch {
	case cfg.Dialect == harness.SQLite:
		return sqlite(riversqlite.New(p.write))
	case cfg.PGDriver == DatabaseSQL:
		return dbsql(riverdatabasesql.New(p.write))
	case cfg.PGDriver == PGX:
		return pgxv5(riverpgxv5.New(p.pgx))
	}
	return fmt.Errorf("unknown River PostgreSQL driver %q", cfg.PGDriver)
}

// analyze gives PostgreSQL's planner statistics of the freshly filled tables, as autovacuum
// would in a running system (owed's side gets the same).
func analyze(ctx context.Context, cfg Config, ex riverdriver.Executor) error {
	if cfg.Dialect != harness.Postgres {
		return nil
	}
	return ex.Exec(ctx, "ANALYZE")
}
