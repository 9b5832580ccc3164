package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// postgresDialect is PostgreSQL (pgx): one pool for writes and reads; conns counts its connections.
type postgresDialect struct{ conns *openConns }

func (postgresDialect) name() string { return Postgres }

// DefaultMaxConns caps PostgreSQL connections when Options.MaxConns does not.
const DefaultMaxConns = 32

func (d postgresDialect) open(_ context.Context, opts Options, config func() *gorm.Config) (*gorm.DB, *gorm.DB, error) {
	sqlDB, err := d.pool(opts)
	if err != nil {
		return nil, nil, err
	}
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), config())
	if err != nil {
		sqlDB.Close()
		return nil, nil, fmt.Errorf("open postgres: %w", err)
	}
	conns := opts.MaxConns
	if conns <= 0 {
		conns = DefaultMaxConns
	}
	sqlDB.SetMaxOpenConns(conns)
	sqlDB.SetMaxIdleConns(conns)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	return db, db, nil
}

// healthPool: one connection of its own, so /readyz never waits behind the main pool.
func (d postgresDialect) healthPool(opts Options, _ *gorm.DB) (*sql.DB, error) {
	db, err := d.pool(opts)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	return db, nil
}

// DefaultExecMode is how statements are sent when the URL does not say: unnamed, parsed and
// run in one round trip with nothing kept on the connection, so a pooler in transaction mode
// never meets a statement prepared elsewhere (docs/scaling.md).
const DefaultExecMode = pgx.QueryExecModeExec

// DefaultMaxConnLifetime is Options.MaxConnLifetime when none is set.
const DefaultMaxConnLifetime = 30 * time.Minute

// pool opens a database/sql pool on opts' PostgreSQL: DefaultExecMode unless the URL names
// one, connections replaced after MaxConnLifetime or at once when not on the primary, and
// counted in d.conns until they close.
func (d postgresDialect) pool(opts Options) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if !strings.Contains(opts.URL, "default_query_exec_mode") {
		cfg.DefaultQueryExecMode = DefaultExecMode
	}
	cfg.DialFunc = d.conns.dial(cfg.DialFunc)
	keep := cfg.OnPgError
	cfg.OnPgError = func(c *pgconn.PgConn, pe *pgconn.PgError) bool {
		if notPrimary(pe) {
			return false
		}
		return keep == nil || keep(c, pe)
	}
	db := stdlib.OpenDB(*cfg)
	life := opts.MaxConnLifetime
	if life <= 0 {
		life = DefaultMaxConnLifetime
	}
	db.SetConnMaxLifetime(life)
	return db, nil
}

func (d postgresDialect) openPlain(opts Options) (*sql.DB, error) { return d.pool(opts) }

func (d postgresDialect) drain() { d.conns.wait(closeWait) }

func (postgresDialect) notify() string {
	return `SELECT pg_notify(?, current_schema() || ':' || ?)`
}

// readOnly: a standby, or a server or database whose transactions default to read-only.
func (postgresDialect) readOnly() string { return `SELECT current_setting('transaction_read_only')` }

// backup: PostgreSQL's own tools (pg_dump) make consistent copies of a live database.
func (postgresDialect) backup(context.Context, Options, string) error { return ErrBackupPostgres }

// optimize: PostgreSQL's autovacuum keeps its own statistics.
func (postgresDialect) optimize(context.Context, *Store) error { return nil }

// bind rewrites ? as $1, $2, …, as GORM does for Raw.
func (postgresDialect) bind(q string) string {
	n := strings.Count(q, "?")
	if n == 0 {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 3*n)
	for i := 1; ; i++ {
		j := strings.IndexByte(q, '?')
		if j < 0 {
			break
		}
		b.WriteString(q[:j])
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(i))
		q = q[j+1:]
	}
	b.WriteString(q)
	return b.String()
}

// fromJSON reads the parameter as json: parsing into jsonb cost twice as much a row.
func (postgresDialect) fromJSON(alias string, cols ...column) string {
	return "json_to_recordset(CAST(? AS json)) AS " + alias + " (" + columnList(cols, func(c column) string {
		return c.name + " " + c.typ
	}) + ")"
}

// idIn looks the ids up one by one in col's index, whatever the planner guesses.
func (postgresDialect) idIn(col string) string {
	return col + " = ANY(ARRAY(SELECT CAST(json_array_elements_text(CAST(? AS json)) AS bigint)))"
}

func (postgresDialect) forUpdate() string { return " FOR UPDATE" }

func (postgresDialect) lockAdmins() string {
	return `SELECT id FROM users WHERE role = 'admin' ORDER BY id FOR UPDATE`
}

func (postgresDialect) artDesc() string { return `art DESC NULLS LAST, id DESC` }

// claimDue: id = ANY(ARRAY(…)) keeps the plan an index lookup per id, and SKIP LOCKED lets
// replicas claim side by side. A claim that is its own transaction commits with
// synchronous_commit off: a claim lost in a crash is a job claimed again, never a job lost.
func (postgresDialect) claimDue(filter string, alone bool) string {
	lazy := ""
	if alone {
		lazy = ` AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'`
	}
	return `UPDATE content_jobs SET lease_until = ?, lease_owner = ?
		WHERE id = ANY(ARRAY(SELECT id FROM content_jobs
		WHERE due_at <= ? AND (lease_until IS NULL OR lease_until <= ?)` + filter + heldTasks + `
		ORDER BY due_at, id LIMIT ? FOR UPDATE SKIP LOCKED))` + lazy + `
		RETURNING ` + jobColumns
}

func (postgresDialect) skipLocked() string { return " FOR UPDATE SKIP LOCKED" }

func (postgresDialect) claimDeliveries(now, until int64, limit int, owner string) (string, []any) {
	return `WITH picked AS (SELECT d.id FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
		WHERE d.status = 'pending' AND d.due_at <= ? AND (d.lease_until IS NULL OR d.lease_until <= ?) AND w.active = 1
		AND NOT ` + deliveriesHeld + `
		ORDER BY d.due_at, d.id LIMIT ? FOR UPDATE OF d SKIP LOCKED)
		UPDATE webhook_deliveries x SET lease_until = ?, lease_owner = ? FROM picked WHERE x.id = picked.id
		RETURNING x.id, x.webhook_id, x.msg_id, x.event, x.payload, x.status, x.due_at, x.attempts, x.failures,
		x.last_status, x.last_error, x.lease_until, x.lease_owner, x.delivered_at, x.created_at`,
		[]any{now, now, limit, until, owner}
}

func (postgresDialect) writableCTEs() bool { return true }

func (postgresDialect) batchReads() bool { return true }

// postgresFault classifies PostgreSQL's errors by SQLSTATE: connection exceptions (08),
// shutdowns (57P01–57P03), serialization failures and deadlocks (40001, 40P01), too many
// connections (53300) and a closed connection are transient; a full disk (53100) is storage;
// a lock or statement timeout (55P03, 57014) is a timeout; notPrimary is its own class.
func postgresFault(err error) Fault {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case notPrimary(pe):
			return FaultNotPrimary
		case strings.HasPrefix(pe.Code, "08"), pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03",
			pe.Code == "40001", pe.Code == "40P01", pe.Code == "53300":
			return FaultTransient
		case pe.Code == "53100":
			return FaultStorage
		case pe.Code == "55P03", pe.Code == "57014":
			return FaultTimeout
		}
		return FaultNone
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || errors.Is(err, pgconn.ErrConnClosed) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return FaultTransient
	}
	if msg := err.Error(); strings.Contains(msg, "conn closed") || strings.Contains(msg, "failed to deallocate cached statement") {
		return FaultTransient
	}
	return FaultNone
}

// postgresUnique reports whether err is a unique_violation (23505) of index.
func postgresUnique(err error, index string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == index
}

// notPrimary reports whether pe says the server is not the primary: a read-only transaction
// (25006) or a standby refusing a transaction id (txid_current's internal error).
func notPrimary(pe *pgconn.PgError) bool {
	return pe.Code == "25006" || (pe.Code == "XX000" && strings.Contains(pe.Message, "during recovery"))
}

// txStart sets the timeouts for the transaction and, when asked, reads its id in the same round trip.
func (postgresDialect) txStart(ctx context.Context, tx *Store, id bool) (int64, error) {
	lock, stmt := tx.timeouts.lock, tx.timeouts.statement
	if !id && lock <= 0 && stmt <= 0 {
		return 0, nil
	}
	what, args := "0", []any{}
	if id {
		what = "txid_current()"
	}
	var set []string
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{"lock_timeout", lock}, {"statement_timeout", stmt}} {
		if t.d > 0 {
			set = append(set, `set_config('`+t.name+`', ?, true) <> ''`)
			args = append(args, strconv.FormatInt(t.d.Milliseconds(), 10))
		}
	}
	q := `SELECT ` + what
	if len(set) > 0 {
		q += ` WHERE ` + strings.Join(set, ` AND `)
	}
	return fetch[int64](ctx, tx, tx.db, q, args...)
}

func (postgresDialect) timeoutsBind() bool { return true }

// txStatus asks after a transaction whose COMMIT's answer was lost (PostgreSQL 10+).
func (postgresDialect) txStatus(ctx context.Context, s *Store, id int64) (outcome, error) {
	st, err := fetch[*string](ctx, s, s.db, `SELECT txid_status(?)`, id)
	if err != nil {
		return outcomeUnknown, err
	}
	switch {
	case st == nil:
		return outcomeUnknown, nil
	case *st == "committed":
		return outcomeCommitted, nil
	case *st == "aborted":
		return outcomeAborted, nil
	}
	return outcomeUnknown, nil // in progress: the server is still ending it
}

// commitMayLand: a COMMIT whose connection was cut may have committed on the server.
func (postgresDialect) commitMayLand() bool { return true }

// clockNow is the server's own clock (clock_timestamp: now, not the transaction's start).
func (postgresDialect) clockNow(ctx context.Context, s *Store) (time.Time, error) {
	ms, err := fetch[int64](ctx, s, s.db, `SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)`)
	return time.UnixMilli(ms).UTC(), err
}
