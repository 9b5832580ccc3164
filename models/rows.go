package models

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// The store runs every statement through three helpers: exec for writes, scan for reads and
// RETURNING into GORM-tagged rows or plain values, and query for the hot reads (an author's
// view, the public song list, the admin's job list, the claims), whose rows are read by hand
// (row) instead of through GORM's reflective Scan, which cost as much CPU as SQLite's own
// stepping on those paths at a million items. Inside WithTx all three run on the transaction;
// outside it, on PostgreSQL with timeouts, each statement is a transaction of its own (alone).
//
// One rule binds their arguments (statementArgs): a ? is one value on both dialects, in all
// three. A list is never spread over an IN ? (GORM's exec and scan would, query could not);
// it travels as one JSON parameter (jsonParam, read by the dialect's idIn or fromJSON), so a
// statement's text is the same for any length of list. And all three log a failed statement
// at error and one slower than SlowStatement at warn, with its placeholders and never its
// arguments (GORM's logger for exec and scan, the same logger by hand for query's rows).

// exec runs a write on the writer and says how many rows it changed.
func (s *Store) exec(ctx context.Context, q string, args ...any) (int64, error) {
	args, err := statementArgs(args)
	if err != nil {
		return 0, err
	}
	db, end, err := s.alone(ctx, s.db)
	if err != nil {
		s.noteWrite(err)
		return 0, err
	}
	res := db.Exec(q, args...)
	err = res.Error
	if cerr := end(err != nil); err == nil {
		err = cerr
	}
	s.noteWrite(err)
	return res.RowsAffected, err
}

// alone is where one statement runs on pool, and end, called once its rows are closed with
// whether it failed, ends it: rolled back if it failed, else committed, returning the
// commit's error. Outside a transaction, where the timeouts bind (ownTx), the statement runs
// in a transaction of its own whose first statement sets them (txStart): a pooler in
// transaction mode keeps no session state, so a statement left to autocommit would wait for
// a lock, or run, for as long as it takes.
func (s *Store) alone(ctx context.Context, pool *gorm.DB) (db *gorm.DB, end func(failed bool) error, err error) {
	if s.inTx || !s.ownTx {
		return pool.WithContext(ctx), func(bool) error { return nil }, nil
	}
	tx := pool.WithContext(ctx).Begin()
	if tx.Error != nil {
		return nil, nil, tx.Error
	}
	if _, err := s.dialect.txStart(ctx, s.within(tx, nil), false); err != nil {
		tx.Rollback()
		return nil, nil, err
	}
	return tx, func(failed bool) error {
		if failed {
			return tx.Rollback().Error
		}
		return tx.Commit().Error
	}, nil
}

// scan runs q on pool (s.read, or s.db for a write with RETURNING or a read that must see
// the caller's own writes) and scans its rows into dest as GORM does: a struct or a slice of
// structs by their columns' names, or a value or a slice of values from the first column. A
// struct or value is left as it was when there is no row.
//
// It is GORM's Scan without its trace recorder: Scan traces the statement through a recorder
// that writes the arguments into the statement's text (GORM's ParameterizedQueries does not
// reach it), so a failed or slow INSERT … RETURNING would log a pitch's whole body. Rows goes
// through the store's logger, which logs the statement with its placeholders only.
func (s *Store) scan(ctx context.Context, pool *gorm.DB, dest any, q string, args ...any) (err error) {
	args, err = statementArgs(args)
	if err != nil {
		return err
	}
	db, end, err := s.alone(ctx, pool)
	if err != nil {
		return err
	}
	tx := db.Raw(q, args...)
	rows, err := tx.Rows()
	if err != nil {
		_ = end(true)
		return err
	}
	defer func() {
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		if cerr := end(err != nil); err == nil {
			err = cerr
		}
	}()
	if rows.Next() {
		if err := tx.ScanRows(rows, dest); err != nil {
			return err
		}
	}
	return rows.Err()
}

// query runs q on pool (as scan) straight through the connections GORM holds: no callbacks,
// no reflection, and on SQLite's reader the statement still comes from GORM's per-connection
// cache of prepared statements. The caller reads the rows (row) and closes them; closing
// them logs the statement if it failed or was slow, timed from the start to the close, so
// the time spent stepping through the rows counts.
func (s *Store) query(ctx context.Context, pool *gorm.DB, q string, args ...any) (*queryRows, error) {
	args, err := statementArgs(args)
	if err != nil {
		return nil, err
	}
	q = s.dialect.bind(q)
	db, end, err := s.alone(ctx, pool)
	if err != nil {
		return nil, err
	}
	begin := time.Now() // wall time, as GORM's logger times exec and scan
	rows, err := db.Statement.ConnPool.QueryContext(ctx, q, args...)
	if err != nil {
		pool.Logger.Trace(ctx, begin, func() (string, int64) { return q, -1 }, err)
		_ = end(true)
		return nil, err
	}
	return &queryRows{Rows: rows, ctx: ctx, log: pool.Logger, q: q, begin: begin, end: end}, nil
}

// queryRows are query's rows: database/sql's, counted, and finished once (finish) when the
// last is read or they are closed.
type queryRows struct {
	*sql.Rows
	ctx      context.Context
	log      logger.Interface
	q        string
	begin    time.Time
	n        int64
	end      func(failed bool) error // ends the statement's own transaction (alone)
	finished bool
	failed   error // the rows' error when they finished
	closeErr error // closing the rows failed
	endErr   error // ending the statement's own transaction failed: its COMMIT
}

// Next advances as sql.Rows.Next does, counting the rows read; after the last row it finishes
// the statement, so Err reports a COMMIT of its own transaction that failed.
func (r *queryRows) Next() bool {
	if r.Rows.Next() {
		r.n++
		return true
	}
	r.finish()
	return false
}

// Err is the rows' error, or the failed COMMIT of the statement's own transaction. Once the
// rows are finished it is the error they had then: ending the transaction cancels its context,
// which database/sql would report as the error of rows not read to their end.
func (r *queryRows) Err() error {
	if !r.finished {
		return r.Rows.Err()
	}
	if r.endErr != nil {
		return r.endErr
	}
	return r.failed
}

// Close finishes the statement if the last row was not read, and says whether closing the
// rows or committing its own transaction failed.
func (r *queryRows) Close() error {
	r.finish()
	if r.endErr != nil {
		return r.endErr
	}
	return r.closeErr
}

// finish, the first time, closes the rows, hands the statement to the store's logger (which
// keeps it when it failed or was slow) and ends the statement's own transaction.
func (r *queryRows) finish() {
	if r.finished {
		return
	}
	r.finished = true
	r.closeErr = r.Rows.Close()
	r.failed = r.Rows.Err()
	failed := r.failed
	if failed == nil {
		failed = r.closeErr
	}
	r.log.Trace(r.ctx, r.begin, func() (string, int64) { return r.q, r.n }, failed)
	r.endErr = r.end(failed != nil)
}

// statementArgs are args as the three helpers bind them: one value for each ?, with times
// as the columns keep them (columnArgs). A slice or array (other than bytes) is refused
// rather than spread over the statement: see the rule above.
func statementArgs(args []any) ([]any, error) {
	for i, a := range args {
		switch a.(type) {
		case nil, string, int64, int, bool, float64, []byte, time.Time, *time.Time:
			continue // the common cases, without reflection
		}
		t := reflect.TypeOf(a)
		if (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t.Elem().Kind() != reflect.Uint8 {
			return nil, fmt.Errorf("statement argument %d is a %T: a ? binds one value; pass a list as one JSON parameter (jsonParam)", i+1, a)
		}
	}
	return columnArgs(args), nil
}

// columnArgs are a statement's arguments as the columns keep them: a time (time.Time or
// *time.Time) as epoch milliseconds, or NULL for nil. Every time column is an integer, and a
// time passed as it is would be text to SQLite (never equal to the column, silently) and an
// error to PostgreSQL. The arguments are copied only when one is converted.
func columnArgs(args []any) []any {
	out := args
	for i, a := range args {
		var v any
		switch t := a.(type) {
		case time.Time:
			v = millisOrNil(&t)
		case *time.Time:
			v = millisOrNil(t)
		default:
			continue
		}
		if &out[0] == &args[0] {
			out = slices.Clone(args)
		}
		out[i] = v
	}
	return out
}

// row reads one row's columns as the drivers hand them (SQLite and pgx alike: integers as
// int64, reals as float64, text as string or []byte, NULL as nil) and converts them by type, so
// that scanning costs no reflection: database/sql copies a value into an *any as it is.
type row struct {
	vals []any
	ptrs []any
	err  error // the first conversion that failed
}

func newRow(columns int) *row {
	r := &row{vals: make([]any, columns), ptrs: make([]any, columns)}
	for i := range r.vals {
		r.ptrs[i] = &r.vals[i]
	}
	return r
}

// scan reads the current row of rows.
func (r *row) scan(rows *queryRows) error {
	if err := rows.Scan(r.ptrs...); err != nil {
		return err
	}
	return r.err
}

func (r *row) fail(i int, want string) {
	if r.err == nil {
		r.err = fmt.Errorf("column %d: %T is not %s", i, r.vals[i], want)
	}
}

func (r *row) int64(i int) int64 {
	switch v := r.vals[i].(type) {
	case int64:
		return v
	case int32:
		return int64(v)
	case float64:
		if v == float64(int64(v)) {
			return int64(v)
		}
	case []byte:
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return n
		}
	case string:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	r.fail(i, "an integer")
	return 0
}

func (r *row) int64p(i int) *int64 {
	if r.vals[i] == nil {
		return nil
	}
	n := r.int64(i)
	return &n
}

func (r *row) intp(i int) *int {
	if r.vals[i] == nil {
		return nil
	}
	n := int(r.int64(i))
	return &n
}

func (r *row) float(i int) float64 {
	switch v := r.vals[i].(type) {
	case float64:
		return v
	case float32:
		return float64(v)
	case int64:
		return float64(v)
	case []byte:
		if f, err := strconv.ParseFloat(string(v), 64); err == nil {
			return f
		}
	case string:
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	}
	r.fail(i, "a number")
	return 0
}

func (r *row) floatp(i int) *float64 {
	if r.vals[i] == nil {
		return nil
	}
	f := r.float(i)
	return &f
}

func (r *row) str(i int) string {
	switch v := r.vals[i].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	r.fail(i, "text")
	return ""
}

func (r *row) strp(i int) *string { return textp[string](r, i) }

// textp is strp for a string type of the domain (a Why).
func textp[T ~string](r *row, i int) *T {
	if r.vals[i] == nil {
		return nil
	}
	s := T(r.str(i))
	return &s
}

// jobColumnCount is how many columns jobColumns names; (*row).job reads them in that order.
const jobColumnCount = 12

// job converts a row of jobColumns, from column at on.
func (r *row) job(at int) Job {
	return Job{ID: r.int64(at), Task: Task(r.str(at + 1)), Kind: Kind(r.str(at + 2)), ItemID: r.int64(at + 3), UserID: r.int64(at + 4),
		DueAt: r.time(at + 5), Attempts: int(r.int64(at + 6)), Why: textp[Why](r, at+7), Status: r.intp(at + 8),
		LeaseUntil: r.timep(at + 9), LeaseOwner: r.strp(at + 10), CreatedAt: r.time(at + 11)}
}

// scanJobs reads rows of jobColumns and closes rows.
func scanJobs(rows *queryRows, sizeHint int) ([]Job, error) {
	return scanJobsBy(rows, jobColumnCount, sizeHint, func(r *row) Job { return r.job(0) })
}

// scanJobsBy reads rows of columns columns, a job each as job makes it, and closes rows.
func scanJobsBy(rows *queryRows, columns, sizeHint int, job func(r *row) Job) ([]Job, error) {
	defer rows.Close()
	r := newRow(columns)
	jobs := make([]Job, 0, sizeHint)
	for rows.Next() {
		if err := r.scan(rows); err != nil {
			return nil, err
		}
		jobs = append(jobs, job(r))
		if r.err != nil { // a column that did not convert: the row's job would be wrong
			return nil, r.err
		}
	}
	return jobs, rows.Err()
}
