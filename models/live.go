package models

import (
	"context"
	"fmt"
	"time"
)

// Credential is what a request was authenticated with: the kind ("token" or "session") and the
// secret's hash. Held streams and long polls check it again at each wake (CheckCredential).
type Credential struct {
	Kind string // CredToken or CredSession
	Hash string
}

// The kinds of Credential.
const (
	CredToken   = "token"
	CredSession = "session"
)

// CheckCredential reports whether cred still signs userID in, with the user and, for a
// session, when it expires (zero for a token); ErrNotFound when it no longer works.
func (s *Store) CheckCredential(ctx context.Context, userID int64, cred Credential) (User, time.Time, error) {
	switch cred.Kind {
	case CredToken:
		u, err := s.oneUser(ctx, `SELECT `+userColumns+` FROM users WHERE id = ? AND token_hash = ? AND disabled = 0`, userID, cred.Hash)
		return wrapped2(u, time.Time{}, err, "check token of user %d", userID)
	case CredSession:
		exp, err := fetch[int64](ctx, s, s.read, `SELECT x.expires_at FROM sessions x JOIN users u ON u.id = x.user_id
			WHERE x.id_hash = ? AND x.user_id = ? AND x.expires_at > ? AND u.disabled = 0`, cred.Hash, userID, s.nowMs())
		if err != nil {
			return User{}, time.Time{}, fmt.Errorf("check session of user %d: %w", userID, err)
		}
		if exp == 0 {
			return User{}, time.Time{}, missing("session of user", userID)
		}
		u, err := s.UserByID(ctx, userID)
		return wrapped2(u, fromMillis(exp), err, "check session")
	}
	return User{}, time.Time{}, missing(cred.Kind+" credential", nil)
}

// SessionExpiry is when the live session of the hash ends; ErrNotFound when it has ended.
func (s *Store) SessionExpiry(ctx context.Context, idHash string) (time.Time, error) {
	exp, err := fetch[int64](ctx, s, s.read, `SELECT x.expires_at FROM sessions x JOIN users u ON u.id = x.user_id
		WHERE x.id_hash = ? AND x.expires_at > ? AND u.disabled = 0`, idHash, s.nowMs())
	if err != nil {
		return time.Time{}, fmt.Errorf("session expiry: %w", err)
	}
	if exp == 0 {
		return time.Time{}, missing("session", nil)
	}
	return fromMillis(exp), nil
}

// CreateStreamTicket makes a one-use ticket for userID bound to cred for ttl, sweeping expired ones.
func (s *Store) CreateStreamTicket(ctx context.Context, userID int64, cred Credential, ttl time.Duration) (string, time.Time, error) {
	ticket := NewToken()
	now := s.nowMs()
	exp := now + ttl.Milliseconds()
	err := s.WithTx(ctx, func(tx *Store) error {
		if _, err := tx.exec(ctx, `DELETE FROM stream_tickets WHERE expires_at <= ?`, now); err != nil {
			return err
		}
		_, err := tx.exec(ctx, `INSERT INTO stream_tickets (id_hash, user_id, cred_kind, cred_hash, expires_at) VALUES (?, ?, ?, ?, ?)`,
			HashToken(ticket), userID, cred.Kind, cred.Hash, exp)
		return err
	})
	return wrapped2(ticket, fromMillis(exp), err, "create stream ticket")
}

// TakeStreamTicket uses a ticket up and returns its user and credential; ErrNotFound if not valid.
func (s *Store) TakeStreamTicket(ctx context.Context, ticket string) (int64, Credential, error) {
	var row struct {
		UserID    int64  `gorm:"column:user_id"`
		CredKind  string `gorm:"column:cred_kind"`
		CredHash  string `gorm:"column:cred_hash"`
		ExpiresAt int64  `gorm:"column:expires_at"`
	}
	if err := s.scan(ctx, s.db, &row, `DELETE FROM stream_tickets WHERE id_hash = ? RETURNING user_id, cred_kind, cred_hash, expires_at`,
		HashToken(ticket)); err != nil {
		return 0, Credential{}, fmt.Errorf("take stream ticket: %w", err)
	}
	if row.UserID == 0 || row.ExpiresAt <= s.nowMs() {
		return 0, Credential{}, missing("stream ticket", nil)
	}
	return row.UserID, Credential{Kind: row.CredKind, Hash: row.CredHash}, nil
}
