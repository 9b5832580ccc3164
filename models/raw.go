package models

import (
	"context"
	"database/sql"
	"fmt"
)

// RawExec runs a statement on the store's writer (in WithTx, on the transaction) and says how
// many rows it changed: for tests and benchmarks only. A list is one JSON parameter (IDIn).
func (s *Store) RawExec(ctx context.Context, q string, args ...any) (int64, error) {
	n, err := s.exec(ctx, q, args...)
	return wrapped(n, err, "raw exec")
}

// RawScan runs a query on the store's writer and scans its rows into dest as scan does: for
// tests and benchmarks, as RawExec.
func (s *Store) RawScan(ctx context.Context, dest any, q string, args ...any) error {
	return wrap(s.scan(ctx, s.db, dest, q, args...), "raw scan")
}

// IDIn is a condition, for RawExec and RawScan, that col is one of the ids passed as its one
// parameter, a JSON array of integers (the dialect's own, as the store's statements use).
func (s *Store) IDIn(col string) string { return s.dialect.idIn(col) }

// RawPools are the store's writer and reader pools, for benchmarks; closing the store closes them.
func (s *Store) RawPools() (writer, reader *sql.DB, err error) {
	if writer, err = s.db.DB(); err != nil {
		return nil, nil, fmt.Errorf("writer pool: %w", err)
	}
	if reader, err = s.read.DB(); err != nil {
		return nil, nil, fmt.Errorf("reader pool: %w", err)
	}
	return writer, reader, nil
}
