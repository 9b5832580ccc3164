package models

import (
	"context"
	"database/sql"
	"fmt"
)

// RawExec runs a statement on the store's writer (inside WithTx, on the transaction) and says
// how many rows it changed. It is for tests and benchmarks, which set up or break rows in ways
// no method of the store would; owed's own code reads and writes through the store's methods.
// Placeholders are ? on both dialects, each bound to one value as in every statement of the
// store: a list is one JSON parameter, tested with IDIn.
func (s *Store) RawExec(ctx context.Context, q string, args ...any) (int64, error) {
	n, err := s.exec(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("raw exec: %w", err)
	}
	return n, nil
}

// RawScan runs a query on the store's writer, so that it sees every write before it, and
// scans its rows into dest: a struct or a slice of structs by their fields' gorm column tags
// (else their snake_case names), or a value or a slice of values. For tests and benchmarks,
// as RawExec.
func (s *Store) RawScan(ctx context.Context, dest any, q string, args ...any) error {
	return wrap(s.scan(ctx, s.db, dest, q, args...), "raw scan")
}

// IDIn is a condition, for RawExec and RawScan, that col is one of the ids passed as its one
// parameter, a JSON array of integers (the dialect's own, as the store's statements use).
func (s *Store) IDIn(col string) string { return s.dialect.idIn(col) }

// RawPools are the store's writer and reader pools (the same pool on PostgreSQL), for
// benchmarks that measure statements of their own against owed's. Closing the store closes
// them.
func (s *Store) RawPools() (writer, reader *sql.DB, err error) {
	if writer, err = s.db.DB(); err != nil {
		return nil, nil, fmt.Errorf("writer pool: %w", err)
	}
	if reader, err = s.read.DB(); err != nil {
		return nil, nil, fmt.Errorf("reader pool: %w", err)
	}
	return writer, reader, nil
}
