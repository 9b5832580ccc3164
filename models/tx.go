package models

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"gorm.io/gorm"
)

// MaxTxTries is how many times WithTx runs a transaction that failed on a transient fault
// before it gives up and returns the fault.
const MaxTxTries = 3

// withTx is WithTx's outermost transaction: begin, fn, the request's commit hook, commit, and
// what a failure means. Begin and fn failing, or a COMMIT SQLite refused, certainly wrote
// nothing, so a transient one is tried again. A COMMIT whose connection was lost on
// PostgreSQL may or may not have committed: when the request asked for it (Request), the
// transaction's id was read first, and the database is asked what became of it
// (txid_status); committed is success, aborted is tried again, unknown is ErrCommitUnknown.
func (s *Store) withTx(ctx context.Context, fn func(tx *Store) error) error {
	req := requestOf(ctx)
	return txBackoff.Do(ctx, s.retryClock, func() (bool, error) {
		sure, err := s.txOnce(ctx, req, fn) // sure: the transaction certainly did not commit
		s.noteWrite(err)
		return sure && transient(err), err
	})
}

// within is the store that runs every statement on db, a transaction begun on s's pool, and
// keeps what a commit publishes in pending (nil: nothing to publish).
func (s *Store) within(db *gorm.DB, pending *pendingChanges) *Store {
	return &Store{db: db, read: db, dialect: s.dialect, clock: s.clock, retryClock: s.retryClock, inTx: true, pending: pending,
		dailyLimit: s.dailyLimit, health: s.health, timeouts: s.timeouts}
}

// txOnce runs one try; sure reports that a failed try certainly did not commit.
func (s *Store) txOnce(ctx context.Context, req *Request, fn func(tx *Store) error) (sure bool, err error) {
	pending := &pendingChanges{}
	db := s.db.WithContext(ctx).Begin()
	if db.Error != nil {
		return true, db.Error
	}
	tx := s.within(db, pending)
	committed := false
	defer func() {
		if !committed {
			db.Rollback()
		}
	}()
	txid, err := s.dialect.txStart(ctx, tx, req != nil)
	if err != nil {
		return true, err
	}
	if err = fn(tx); err != nil {
		return true, err
	}
	hook := req.hook()
	if hook != nil {
		if err = hook(ctx, tx, pending.made); err != nil {
			return true, err
		}
	}
	err = db.Commit().Error
	committed = true // a failed COMMIT is not rolled back again: the driver has ended it
	if err != nil {
		if txid == 0 {
			return !s.dialect.commitMayLand(), err
		}
		switch s.commitOutcome(ctx, txid) {
		case outcomeAborted:
			return true, err
		case outcomeUnknown:
			return false, fmt.Errorf("%w: %w", ErrCommitUnknown, err)
		}
		// It committed: the connection was lost after the server made it durable.
	}
	if hook != nil {
		req.hooked()
	}
	if pending.all {
		s.changedAll()
	} else {
		s.changed(pending.ids...)
	}
	return false, nil
}

type outcome int

const (
	outcomeUnknown outcome = iota
	outcomeCommitted
	outcomeAborted
)

// commitOutcome asks the database, on a fresh connection, what became of transaction txid,
// waiting up to a few seconds while the server still finishes it.
func (s *Store) commitOutcome(ctx context.Context, txid int64) outcome {
	ctx = context.WithoutCancel(ctx)
	o := outcomeUnknown
	askBackoff.Do(ctx, s.retryClock, func() (bool, error) {
		var err error
		if o, err = s.dialect.txStatus(ctx, s, txid); err == nil && o != outcomeUnknown {
			return false, nil
		}
		return true, errCommitPending
	})
	return o
}

// errCommitPending is a transaction whose outcome commitOutcome could not learn yet.
var errCommitPending = errors.New("the commit's outcome is not known yet")

// Request is what a client's request asks of the transactions it runs: that a COMMIT whose
// outcome was lost is resolved (PostgreSQL reads each transaction's id to ask after it), and
// optionally a hook run once inside the first transaction that commits, after its work and
// before its commit, with what it made (Idempotency-Key answers are stored this way).
type Request struct {
	// Hook, when set, writes in the transaction; an error rolls it back.
	Hook func(ctx context.Context, tx *Store, made []any) error
	mu   sync.Mutex
	done bool
}

type requestKey struct{}

// WithRequest marks ctx as a client's write request (r's Hook may be nil).
func WithRequest(ctx context.Context, r *Request) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}

func requestOf(ctx context.Context) *Request {
	r, _ := ctx.Value(requestKey{}).(*Request)
	return r
}

func (r *Request) hook() func(context.Context, *Store, []any) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return nil
	}
	return r.Hook
}

func (r *Request) hooked() {
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
}

// made records, in a transaction, what it made, for the request's hook.
func (s *Store) made(v any) {
	if s.pending != nil {
		s.pending.made = append(s.pending.made, v)
	}
}

// storeHealth is whether the database takes writes: the reason of the last storage fault a
// write met, until a write succeeds again.
type storeHealth struct {
	problem atomic.Pointer[string]
}

// noteWrite records the outcome of a write outside any transaction, or of a transaction.
func (s *Store) noteWrite(err error) {
	if s.health == nil || s.inTx {
		return
	}
	if err == nil {
		if s.health.problem.Load() != nil {
			s.health.problem.Store(nil)
		}
		return
	}
	if FaultOf(err) == FaultStorage {
		why := "the database takes no writes: " + storageReason(err)
		s.health.problem.Store(&why)
	}
}

// storageReason names a storage fault without the statement or its values.
func storageReason(err error) string {
	var base error = err
	for {
		u := errors.Unwrap(base)
		if u == nil {
			break
		}
		base = u
	}
	msg := base.Error()
	if len(msg) > 120 {
		msg = msg[:120]
	}
	return msg
}

// StorageProblem is why the database takes no writes (full, read-only, failing its I/O), or
// "" while its writes succeed. It is set by the last write that failed so, and cleared by the
// next write that succeeds.
func (s *Store) StorageProblem() string {
	if s.health == nil {
		return ""
	}
	if p := s.health.problem.Load(); p != nil {
		return *p
	}
	return ""
}

// ProbeWrite writes and removes a row of a few pages, so that a database that was full is
// found to take writes again without waiting for a client's write (readiness asks it while
// StorageProblem is set).
func (s *Store) ProbeWrite(ctx context.Context) error {
	return s.withTx(ctx, func(tx *Store) error {
		now := tx.nowMs()
		if _, err := tx.exec(ctx, `INSERT INTO idempotency_keys (user_id, idem_key, fingerprint, created_at, locked_until, answer)
			VALUES (0, 'readyz-probe', '', ?, 0, ?)`, now, make([]byte, 16<<10)); err != nil {
			return err
		}
		_, err := tx.exec(ctx, `DELETE FROM idempotency_keys WHERE user_id = 0 AND idem_key = 'readyz-probe'`)
		return err
	})
}

// retryRepeatable runs f (outside any transaction) again after a transient fault, up to
// MaxTxTries in all. f must be safe to repeat whatever became of the failed try: a read, or a
// single write statement whose repeat changes nothing the first one did (its ON CONFLICT DO
// NOTHING). A pool whose connections were cut drops each dead one as it meets it, and a
// statement PostgreSQL chose as a deadlock's victim was rolled back whole.
// Every request reads its caller, so this spares clients a 503 for a connection that died
// idle.
func (s *Store) retryRepeatable(ctx context.Context, f func() error) error {
	return repeatBackoff.Do(ctx, s.retryClock, func() (bool, error) {
		err := f()
		return !s.inTx && transient(err), err
	})
}
