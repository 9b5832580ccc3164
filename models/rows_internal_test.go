package models

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// statementArgs is the one rule of ? for exec, scan and query: one value each, a list refused.
func TestStatementArgsBindOneValueEach(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(1234)
	got, err := statementArgs([]any{int64(1), "x", []byte("b"), json.RawMessage(`[1]`), WhyBudget, at, (*time.Time)(nil), nil})
	if err != nil {
		t.Fatalf("plain values: %v", err)
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
	s, err := Open(t.Context(), Options{URL: "sqlite:" + t.TempDir() + "/owed.db", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
