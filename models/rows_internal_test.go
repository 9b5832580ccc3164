package models

import (
	"encoding/json"
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
