package models

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// Hot read paths (an author's view, the public song list, the admin's job list) scan their rows
// by hand instead of through GORM's reflective Scan/Find, which cost as much CPU as SQLite's
// own stepping on those paths at a million items.

// query runs a read on the read pool (inside WithTx, on the transaction) straight through the
// pool GORM holds: no callbacks, no reflection, and on SQLite the statement still comes from
// GORM's per-connection cache of prepared statements. q uses ? placeholders on both dialects.
func (s *Store) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return s.read.Statement.ConnPool.QueryContext(ctx, s.bind(q), args...)
}

// queryWriter is query on the writer: for statements that write and return rows (a claim), or
// reads that must see the caller's own writes.
func (s *Store) queryWriter(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return s.db.Statement.ConnPool.QueryContext(ctx, s.bind(q), args...)
}

// bind rewrites q's ? placeholders as PostgreSQL's $1, $2, …, as GORM does for Raw. The
// queries given to it hold no ? of their own (no literal, no jsonb operator).
func (s *Store) bind(q string) string {
	if s.dialect != Postgres {
		return q
	}
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
func (r *row) scan(rows *sql.Rows) error {
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
func scanJobs(rows *sql.Rows, sizeHint int) ([]Job, error) {
	defer rows.Close()
	r := newRow(jobColumnCount)
	jobs := make([]Job, 0, sizeHint)
	for rows.Next() {
		if err := r.scan(rows); err != nil {
			return nil, err
		}
		jobs = append(jobs, r.job(0))
	}
	return jobs, rows.Err()
}
