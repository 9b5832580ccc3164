package models

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// openSQLite opens a store on a new SQLite file, closed when the test ends, for the tests
// inside the package (owedtest, which opens stores for the others, imports it); a nil log
// discards the store's.
func openSQLite(t *testing.T, log *slog.Logger) *Store {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s, err := Open(t.Context(), Options{URL: "sqlite:" + t.TempDir() + "/owed.db", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// statementArgs is the one rule of ? for exec, scan and query: one value each, a list refused.
func TestStatementArgsBindOneValueEach(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(1234)
	in := []any{int64(1), "x", []byte("b"), json.RawMessage(`[1]`), WhyBudget, at, (*time.Time)(nil), nil}
	got, err := statementArgs(in)
	if err != nil {
		t.Fatalf("plain values: %v", err)
	}
	if in[5] != at {
		t.Errorf("the caller's arguments were changed: %v", in)
	}
	if got[5] != int64(1234) || got[6] != nil {
		t.Errorf("times are bound as milliseconds (or NULL): %v, %v", got[5], got[6])
	}
	for _, list := range []any{[]int64{1, 2}, []string{"a"}, [2]int{1, 2}, []any{1}} {
		if _, err := statementArgs([]any{"x", list}); err == nil || !strings.Contains(err.Error(), "argument 2") {
			t.Errorf("%T: err = %v, want the list refused", list, err)
		}
	}
}

// A statement that fails while its rows are read (not when it starts) is logged at error
// when the rows close, with the error the reading met.
func TestQueryLogsAnErrorMetWhileReading(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s := openSQLite(t, log)
	// The second row's value overflows: SQLite fails at that step, after the first row.
	rows, err := s.query(t.Context(), s.read, `SELECT CASE WHEN x = 2 THEN abs(-9223372036854775807 - 1) ELSE x END
		FROM (SELECT 1 AS x UNION ALL SELECT 2)`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
	}
	failed := rows.Err()
	rows.Close()
	if failed == nil {
		t.Fatal("the overflow met no error")
	}
	if out := buf.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "overflow") {
		t.Errorf("the failed read was not logged at error with its cause:\n%s", out)
	}
}

// row converts each value as the drivers hand it (integers, reals, text or bytes) and keeps
// the first column that did not convert, whatever the columns after it hold.
func TestRowConvertsWhatTheDriversHand(t *testing.T) {
	t.Parallel()
	r := newRow(2)
	for _, c := range []struct {
		v    any
		n    int64
		f    float64
		nErr bool
		fErr bool
	}{
		{int64(5), 5, 5, false, false},
		{int32(6), 6, 0, false, true},
		{float64(7), 7, 7, false, false},
		{7.5, 0, 7.5, true, false},
		{float32(1.5), 0, 1.5, true, false},
		{[]byte("8"), 8, 8, false, false},
		{"9", 9, 9, false, false},
		{[]byte("1.25"), 0, 1.25, true, false},
		{"2.5", 0, 2.5, true, false},
		{[]byte("x"), 0, 0, true, true},
		{"x", 0, 0, true, true},
	} {
		r.vals[0], r.err = c.v, nil
		if n := r.int64(0); n != c.n || (r.err != nil) != c.nErr {
			t.Errorf("int64(%T %v) = %d, err %v", c.v, c.v, n, r.err)
		}
		r.err = nil
		if f := r.float(0); f != c.f || (r.err != nil) != c.fErr {
			t.Errorf("float(%T %v) = %v, err %v", c.v, c.v, f, r.err)
		}
	}
	r.vals[0], r.vals[1], r.err = "x", "y", nil
	r.int64(0)
	r.float(1)
	if r.err == nil || !strings.Contains(r.err.Error(), "column 0") {
		t.Errorf("two columns failed: %v, want the first", r.err)
	}
}

// A row read into too few columns is an error, not the last row's values; so is a job whose
// column does not convert.
func TestRowScanFailsOnAColumnCountItWasNotMadeFor(t *testing.T) {
	t.Parallel()
	s := openSQLite(t, nil)
	rows, err := s.query(t.Context(), s.read, `SELECT 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	r := newRow(1)
	if !rows.Next() {
		t.Fatal("no row")
	}
	if err := r.scan(rows); err == nil {
		t.Errorf("two columns read into one: no error (%v)", r.vals)
	}

	// scanJobs: a job whose column does not convert is an error, even in the last row.
	rows, err = s.query(t.Context(), s.read, `SELECT 'not an id', 'screen', 'pitch', 1, 1, 0, 0, NULL, NULL, NULL, NULL, 0`)
	if err != nil {
		t.Fatal(err)
	}
	if jobs, err := scanJobs(rows, 1); err == nil {
		t.Errorf("a job with an id of text: no error (%+v)", jobs)
	}
}
