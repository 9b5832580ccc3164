package models

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"
)

// Fault is the class of a store error: what a client is told and whether WithTx tries again.
type Fault int

const (
	// FaultNone is any other error: a bug, or a sentinel such as ErrNotFound.
	FaultNone Fault = iota
	// FaultTransient is a database that did not answer this time: trying again can succeed.
	FaultTransient
	// FaultStorage is a database that cannot take writes: full, read-only, or failing its I/O.
	FaultStorage
	// FaultNotPrimary is a PostgreSQL server that answers but is not the primary; the
	// connection is dropped, so the pool connects again and finds the primary.
	FaultNotPrimary
	// FaultTimeout is a statement past the lock or statement timeout (or cancelled by the server).
	FaultTimeout
)

// ErrCommitUnknown wraps the error of a COMMIT whose outcome could not be learnt: a transient
// fault, which a retry with the same Idempotency-Key resolves.
var ErrCommitUnknown = errors.New("the commit's outcome is unknown")

// errReadOnlyServer is Ping's answer from a server whose transactions are read-only.
var errReadOnlyServer = errors.New("the database server is read-only (not the primary)")

// FaultOf classifies err by the dialects' codes; a cut connection is transient on either.
func FaultOf(err error) Fault {
	if err == nil || errors.Is(err, context.Canceled) {
		return FaultNone
	}
	if errors.Is(err, errReadOnlyServer) {
		return FaultNotPrimary
	}
	if f := sqliteFault(err); f != FaultNone {
		return f
	}
	if f := postgresFault(err); f != FaultNone {
		return f
	}
	if errors.Is(err, ErrCommitUnknown) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) {
		return FaultTransient
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return FaultTransient
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return FaultTransient
	}
	return FaultNone
}

// uniqueViolation reports whether err refuses a row for the unique index (or constraint) index.
func uniqueViolation(err error, index string) bool {
	return sqliteUnique(err, index) || postgresUnique(err, index)
}
