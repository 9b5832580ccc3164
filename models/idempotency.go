package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Idempotency-Key: a user's key names one write, whose answer is kept and replayed to a repeat.

// IdemState is what a request with a key is to do.
type IdemState int

const (
	// IdemRun: the key is new (or its holder wrote nothing and is gone): run, holding the lease.
	IdemRun IdemState = iota
	// IdemReplay: the first answer is kept; answer it again.
	IdemReplay
	// IdemMismatch: the key was used for another request (method, path or body).
	IdemMismatch
	// IdemInFlight: the first request still runs.
	IdemInFlight
	// IdemNotKept: the first request's write committed, but its answer is not kept.
	IdemNotKept
)

// IdemAnswer is a kept answer: its status, the headers that matter and the body.
type IdemAnswer struct {
	Status  int
	Headers map[string]string
	Body    []byte
}

// IdemLease is how long a request holds its key: longer than the server lets a request run.
const IdemLease = 2 * time.Minute

// ErrIdemLost is the hook's error when the key's row is no longer the request's.
var ErrIdemLost = errors.New("idempotency key taken over")

type idemRow struct {
	Fingerprint string  `gorm:"column:fingerprint"`
	CreatedAt   int64   `gorm:"column:created_at"`
	LockedUntil int64   `gorm:"column:locked_until"`
	Status      *int    `gorm:"column:status"`
	Headers     *string `gorm:"column:headers"`
	Answer      []byte  `gorm:"column:answer"`
}

// IdemBegin looks up userID's key for a request whose fingerprint is fp (keys older than ttl
// are forgotten): for IdemRun the lease of the request's hold, for IdemReplay the answer.
func (s *Store) IdemBegin(ctx context.Context, userID int64, key, fp string, now time.Time, ttl time.Duration) (IdemState, int64, IdemAnswer, error) {
	nowMs := now.UnixMilli()
	lease := now.Add(IdemLease).UnixMilli()
	for range 5 {
		n, err := s.exec(ctx, `INSERT INTO idempotency_keys (user_id, idem_key, fingerprint, created_at, locked_until)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (user_id, idem_key) DO NOTHING`, userID, key, fp, nowMs, lease)
		if err != nil {
			return 0, 0, IdemAnswer{}, s.idemUndo(ctx, userID, key, lease, err)
		}
		if n == 1 {
			return IdemRun, lease, IdemAnswer{}, nil
		}
		rows, err := fetch[[]idemRow](ctx, s, s.db, `SELECT fingerprint, created_at, locked_until, status, headers, answer
			FROM idempotency_keys WHERE user_id = ? AND idem_key = ?`, userID, key)
		if err != nil {
			return 0, 0, IdemAnswer{}, fmt.Errorf("idempotency key: %w", err)
		}
		if len(rows) == 0 {
			continue // pruned meanwhile: insert again
		}
		r := rows[0]
		expired := ttl > 0 && r.CreatedAt < now.Add(-ttl).UnixMilli()
		orphan := r.Status == nil && r.LockedUntil <= nowMs // its request is gone having written nothing
		switch {
		case expired || (orphan && r.Fingerprint == fp):
			n, err := s.exec(ctx, `UPDATE idempotency_keys SET fingerprint = ?, created_at = ?, locked_until = ?,
				status = NULL, headers = NULL, answer = NULL
				WHERE user_id = ? AND idem_key = ? AND created_at = ? AND locked_until = ?`,
				fp, nowMs, lease, userID, key, r.CreatedAt, r.LockedUntil)
			if err != nil {
				return 0, 0, IdemAnswer{}, s.idemUndo(ctx, userID, key, lease, err)
			}
			if n == 1 {
				return IdemRun, lease, IdemAnswer{}, nil
			}
			continue // another request took it first: look again
		case r.Fingerprint != fp:
			return IdemMismatch, 0, IdemAnswer{}, nil
		case r.LockedUntil > nowMs:
			return IdemInFlight, 0, IdemAnswer{}, nil
		case *r.Status == 0:
			return IdemNotKept, 0, IdemAnswer{}, nil
		}
		a := IdemAnswer{Status: *r.Status, Body: r.Answer}
		if r.Headers != nil {
			if err := json.Unmarshal([]byte(*r.Headers), &a.Headers); err != nil {
				return 0, 0, IdemAnswer{}, fmt.Errorf("idempotency key: headers: %w", err)
			}
		}
		return IdemReplay, 0, a, nil
	}
	return IdemInFlight, 0, IdemAnswer{}, nil
}

// IdemKeep stores a's answer (nil: not kept yet) on the key the request holds, which it keeps.
func (s *Store) IdemKeep(ctx context.Context, userID int64, key string, lease int64, a *IdemAnswer) error {
	status, headers, body, err := idemColumns(a)
	if err != nil {
		return err
	}
	n, err := s.exec(ctx, `UPDATE idempotency_keys SET status = ?, headers = ?, answer = ?
		WHERE user_id = ? AND idem_key = ? AND locked_until = ?`, status, headers, body, userID, key, lease)
	if err != nil {
		return fmt.Errorf("keep idempotent answer: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("keep idempotent answer: %w", ErrIdemLost)
	}
	return nil
}

// IdemFinish stores the final answer (nil: the kept one) and ends the request's hold.
func (s *Store) IdemFinish(ctx context.Context, userID int64, key string, lease int64, a *IdemAnswer) error {
	q := `UPDATE idempotency_keys SET locked_until = 0 WHERE user_id = ? AND idem_key = ? AND locked_until = ? AND status IS NOT NULL`
	args := []any{userID, key, lease}
	if a != nil {
		status, headers, body, err := idemColumns(a)
		if err != nil {
			return err
		}
		q = `UPDATE idempotency_keys SET locked_until = 0, status = ?, headers = ?, answer = ?
			WHERE user_id = ? AND idem_key = ? AND locked_until = ?`
		args = append([]any{status, headers, body}, args...)
	}
	_, err := s.exec(ctx, q, args...)
	return wrap(err, "finish idempotent answer")
}

// IdemRelease forgets a key whose request wrote nothing (it failed), so that a repeat runs.
func (s *Store) IdemRelease(ctx context.Context, userID int64, key string, lease int64) error {
	_, err := s.exec(ctx, `DELETE FROM idempotency_keys WHERE user_id = ? AND idem_key = ? AND locked_until = ? AND status IS NULL`,
		userID, key, lease)
	return wrap(err, "release idempotency key")
}

// idemUndo releases a take that failed on a transient fault (it may have committed), by its lease.
func (s *Store) idemUndo(ctx context.Context, userID int64, key string, lease int64, cause error) error {
	if FaultOf(cause) == FaultTransient {
		ctx = context.WithoutCancel(ctx)
		s.IdemSettle(ctx, func() error { return s.IdemRelease(ctx, userID, key, lease) })
	}
	return fmt.Errorf("idempotency key: %w", cause)
}

// IdemSettle runs a statement that ends a request's hold on its key, trying again while the
// database does not answer (about a second on RetryClock): a hold left behind would answer
// every repeat 409 until its lease ran out.
func (s *Store) IdemSettle(ctx context.Context, f func() error) error {
	return settleBackoff.Do(ctx, s.retryClock, func() (bool, error) {
		err := f()
		return transient(err), err
	})
}

func idemColumns(a *IdemAnswer) (status int, headers *string, body []byte, err error) {
	if a == nil {
		return 0, nil, nil, nil
	}
	if len(a.Headers) > 0 {
		b, err := json.Marshal(a.Headers)
		if err != nil {
			return 0, nil, nil, err
		}
		h := string(b)
		headers = &h
	}
	if a.Body == nil {
		a.Body = []byte{}
	}
	return a.Status, headers, a.Body, nil
}

// pruneIdempotency deletes keys older than ttl, in batches.
func (s *Store) pruneIdempotency(ctx context.Context, cutoff int64, batch int) (int64, error) {
	return s.exec(ctx, `DELETE FROM idempotency_keys WHERE (user_id, idem_key) IN
		(SELECT user_id, idem_key FROM idempotency_keys WHERE created_at < ? ORDER BY created_at LIMIT ?)`, cutoff, batch)
}
