package models

import "testing"

// PostgreSQL's bind numbers every ?, wherever it stands: first, last, or next to another.
func TestPostgresBindNumbersEveryPlaceholder(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]string{
		"SELECT 1":             "SELECT 1",
		"? = 1":                "$1 = 1",
		"a = ? AND b IN (?,?)": "a = $1 AND b IN ($2,$3)",
		"??":                   "$1$2",
		"x = ?":                "x = $1",
	} {
		if got := (postgresDialect{conns: &openConns{}}).bind(q); got != want {
			t.Errorf("bind(%q) = %q, want %q", q, got, want)
		}
	}
}
