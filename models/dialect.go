package models

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Dialects, as Store.Dialect names them.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// dialect is everything that differs between SQLite and PostgreSQL in the store: how a
// database is opened and the statements each writes its own way. dialect_sqlite.go and
// dialect_postgres.go keep their variants in this interface's order.
type dialect interface {
	// name is the dialect as Store.Dialect and the migrations name it.
	name() string

	// open opens the writer and reader pools (one pool where writes are not serialised).
	open(ctx context.Context, opts Options, config func() *gorm.Config) (writer, reader *gorm.DB, err error)
	// healthPool is the pool readiness asks (Store.Ping), which the store's work cannot hold.
	healthPool(opts Options, writer *gorm.DB) (*sql.DB, error)
	// notify sends a notification on channel ($1) with payload schema:$2 ("" where none listens).
	notify() string
	// readOnly is a statement whose one value is "on" when the server takes no writes.
	readOnly() string
	// openPlain opens opts' database without migrating it (status, backup).
	openPlain(opts Options) (*sql.DB, error)
	// drain waits, bounded, until the closed pools' connections have ended (closeWait).
	drain()
	// backup writes a consistent copy of the live database to dest (Backup).
	backup(ctx context.Context, opts Options, dest string) error
	// optimize keeps the query planner's statistics current (see Store.Optimize).
	optimize(ctx context.Context, s *Store) error

	// bind rewrites q's ? placeholders as the driver takes them (q holds no ? of its own).
	bind(q string) string
	// fromJSON is a FROM item named alias reading rows from one JSON parameter (jsonParam).
	fromJSON(alias string, cols ...column) string
	// idIn is a condition that col is one of the ids passed as one parameter, a JSON array.
	idIn(col string) string
	// forUpdate locks the rows a SELECT reads until the transaction ends ("" where not needed).
	forUpdate() string
	// lockAdmins locks the admins' rows for the transaction ("" under the one write lock).
	lockAdmins() string
	// artDesc orders songs by art, best first and unscored last, then newest first.
	artDesc() string
	// claimDue leases due content jobs (arguments: lease end, owner, now twice, filter's,
	// limit); alone says the statement is its own transaction.
	claimDue(filter string, alone bool) string
	// skipLocked ends a claim's subquery, passing over rows another claim locked ("" on one lock).
	skipLocked() string
	// claimDeliveries leases due webhook deliveries, and the statement's arguments.
	claimDeliveries(now, until int64, limit int, owner string) (string, []any)

	// writableCTEs reports whether a WITH clause may hold INSERTs.
	writableCTEs() bool
	// txStart is each transaction's first statement: it sets the timeouts for the transaction
	// alone and, when id is true, reads its id so a COMMIT whose answer was lost can be asked
	// after (txStatus); 0 where a failed COMMIT always means it did not commit.
	txStart(ctx context.Context, tx *Store, id bool) (int64, error)
	// timeoutsBind reports whether the timeouts bind statements (then see Store.alone).
	timeoutsBind() bool
	// txStatus says whether transaction id committed, on one of s's connections.
	txStatus(ctx context.Context, s *Store, id int64) (outcome, error)
	// commitMayLand reports whether a failed COMMIT without a txID may still have committed.
	commitMayLand() bool
	// clockNow is the database server's time (Store.DatabaseTime).
	clockNow(ctx context.Context, s *Store) (time.Time, error)

	// batchReads reports whether the items to screen are read in batches (Store.ScreenSubject).
	batchReads() bool
}

// dialectOf is PostgreSQL for a postgres:// URL or a key/value connection string, else SQLite.
func dialectOf(opts Options) dialect {
	if IsPostgres(opts.URL) {
		return postgresDialect{conns: &openConns{}}
	}
	return sqliteDialect{}
}

// IsPostgres reports whether url is a postgres:// URL or a key/value connection string.
func IsPostgres(url string) bool {
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		return true
	}
	return !strings.HasPrefix(url, "sqlite:") && !strings.HasPrefix(url, "file:") && strings.Contains(url, "=")
}

// column is one column of rows passed as JSON: its name and SQL type.
type column struct{ name, typ string }

// columnList is cols, each written by f, separated by commas.
func columnList(cols []column, f func(column) string) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = f(c)
	}
	return strings.Join(parts, ", ")
}
