package models

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ValidRole reports whether r is a role owed knows.
func ValidRole(r Role) bool { return slices.Contains(Roles, r) }

// User is someone with a token. Only the token's hash is kept.
type User struct {
	ID        int64  `gorm:"column:id"`
	Name      string `gorm:"column:name"`
	Role      Role   `gorm:"column:role"`
	TokenHash string `gorm:"column:token_hash"`
	// OwnLimit is the user's own daily limit of model calls; nil: the store's default.
	OwnLimit *int64 `gorm:"column:daily_limit"`
	// DailyLimit is the limit in force: OwnLimit, else the store's default (Options.DailyLimit).
	DailyLimit int64     `gorm:"-"`
	CreatedAt  time.Time `gorm:"column:created_at;serializer:unixms"`
	// Disabled users are locked out (token and sessions); their items and owed work stay.
	Disabled bool `gorm:"column:disabled"`
}

// HashToken is how tokens are stored: a SHA-256, since long random tokens need no slow hash.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// NewToken makes a fresh bearer token.
func NewToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return "owed_" + base64.RawURLEncoding.EncodeToString(b)
}

// CreateUser adds a user and returns it with its token, which is not kept.
func (s *Store) CreateUser(ctx context.Context, name string, role Role) (User, string, error) {
	token := NewToken()
	u, err := s.CreateUserWithToken(ctx, name, role, token)
	return wrapped2(u, token, err, "create user")
}

// ErrNameTaken is returned for a user name another user has, in any case.
var ErrNameTaken = errors.New("the user name is taken")

// CreateUserWithToken adds a user whose token is given (OWED_ADMIN_TOKEN).
func (s *Store) CreateUserWithToken(ctx context.Context, name string, role Role, token string) (User, error) {
	u := User{Name: name, Role: role, TokenHash: HashToken(token), DailyLimit: s.dailyLimit, CreatedAt: fromMillis(s.nowMs())}
	// Asked first so a taken name is an answer, not a failed statement in the log.
	taken, err := fetch[int64](ctx, s, s.db, `SELECT count(*) FROM users WHERE lower(name) = lower(?)`, name)
	if err != nil {
		return User{}, fmt.Errorf("create user %s: %w", name, err)
	}
	if taken > 0 {
		return User{}, fmt.Errorf("create user %s: %w", name, ErrNameTaken)
	}
	if err := s.scan(ctx, s.db, &u.ID, `INSERT INTO users (name, role, token_hash, created_at) VALUES (?, ?, ?, ?) RETURNING id`,
		u.Name, u.Role, u.TokenHash, u.CreatedAt.UnixMilli()); err != nil {
		if uniqueViolation(err, "users_name_folded") {
			return User{}, fmt.Errorf("create user %s: %w", name, ErrNameTaken)
		}
		return User{}, fmt.Errorf("create user %s: %w", name, err)
	}
	return u, nil
}

// UserByToken finds the enabled user a bearer token belongs to.
func (s *Store) UserByToken(ctx context.Context, token string) (User, error) {
	var u User
	err := s.retryRepeatable(ctx, func() (err error) {
		u, err = s.oneUser(ctx, `SELECT `+userColumns+` FROM users WHERE token_hash = ? AND disabled = 0`, HashToken(token))
		return err
	})
	return wrapped(u, err, "user by token")
}

// TokenKnown reports whether a token belongs to any user, disabled or not.
func (s *Store) TokenKnown(ctx context.Context, token string) (bool, error) {
	n, err := fetch[int64](ctx, s, s.read, `SELECT COUNT(*) FROM users WHERE token_hash = ?`, HashToken(token))
	return wrapped(n > 0, err, "token known")
}

// userColumns are a User's columns, in the order oneUser reads them.
const userColumns = `id, name, role, token_hash, daily_limit, created_at`

// oneUser reads the user q selects (userColumns), or ErrNotFound; by hand, as every request does.
func (s *Store) oneUser(ctx context.Context, q string, args ...any) (User, error) {
	rows, err := s.query(ctx, s.read, q, args...)
	if err != nil {
		return User{}, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return User{}, err
		}
		return User{}, missing("user", nil)
	}
	r := newRow(6)
	if err := r.scan(rows); err != nil {
		return User{}, err
	}
	u := User{ID: r.int64(0), Name: r.str(1), Role: Role(r.str(2)), TokenHash: r.str(3), OwnLimit: r.int64p(4), CreatedAt: r.time(5)}
	u.DailyLimit = s.effectiveLimit(u.OwnLimit)
	if r.err != nil {
		return User{}, r.err
	}
	return u, rows.Close()
}

// UserByID finds a user.
func (s *Store) UserByID(ctx context.Context, id int64) (User, error) {
	u, err := fetch[User](ctx, s, s.read, `SELECT * FROM users WHERE id = ?`, id)
	if err != nil {
		return User{}, fmt.Errorf("user %d: %w", id, err)
	}
	if u.ID == 0 {
		return User{}, missing("user", id)
	}
	u.DailyLimit = s.effectiveLimit(u.OwnLimit)
	return u, nil
}

// CountUsers counts users with the role, or all users when role is empty.
func (s *Store) CountUsers(ctx context.Context, role Role) (int64, error) {
	n, err := fetch[int64](ctx, s, s.read, `SELECT COUNT(*) FROM users WHERE ? = '' OR role = ?`, role, role)
	return wrapped(n, err, "count users")
}

// SetDailyLimit sets a user's own daily budget (nil: the default) and returns the user.
func (s *Store) SetDailyLimit(ctx context.Context, userID int64, limit *int64) (User, error) {
	n, err := s.exec(ctx, `UPDATE users SET daily_limit = ? WHERE id = ?`, limit, userID)
	if err != nil {
		return User{}, fmt.Errorf("set the daily limit of user %d: %w", userID, err)
	}
	if n == 0 {
		return User{}, missing("user", userID)
	}
	s.changed(userID)
	u, err := s.UserByID(ctx, userID)
	return wrapped(u, err, "set the daily limit")
}

// MaxSessionsPerUser bounds one user's sessions: signing in once more ends the oldest.
const MaxSessionsPerUser = 20

// CreateSession signs a user in for ttl and returns the session id; the oldest beyond MaxSessionsPerUser end.
func (s *Store) CreateSession(ctx context.Context, userID int64, ttl time.Duration) (string, error) {
	id := NewToken()
	err := s.WithTx(ctx, func(tx *Store) error {
		if _, err := tx.exec(ctx, `INSERT INTO sessions (id_hash, user_id, expires_at) VALUES (?, ?, ?)`,
			HashToken(id), userID, tx.Now().Add(ttl).UnixMilli()); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `DELETE FROM sessions WHERE user_id = ? AND id_hash NOT IN
			(SELECT id_hash FROM sessions WHERE user_id = ? ORDER BY expires_at DESC, id_hash LIMIT ?)`,
			userID, userID, MaxSessionsPerUser); err != nil {
			return fmt.Errorf("end the oldest sessions: %w", err)
		}
		return nil
	})
	return wrapped(id, err, "create session")
}

// UserBySession finds the enabled user of a live session.
func (s *Store) UserBySession(ctx context.Context, id string) (User, error) {
	u, err := s.oneUser(ctx, `SELECT u.id, u.name, u.role, u.token_hash, u.daily_limit, u.created_at
		FROM sessions x JOIN users u ON u.id = x.user_id WHERE x.id_hash = ? AND x.expires_at > ? AND u.disabled = 0`,
		HashToken(id), s.nowMs())
	return wrapped(u, err, "user by session")
}

// PruneSessions deletes the sessions expired by now (the periodic sweep calls it).
func (s *Store) PruneSessions(ctx context.Context, now time.Time) (int64, error) {
	n, err := s.exec(ctx, `DELETE FROM sessions WHERE expires_at <= ?`, now.UnixMilli())
	return wrapped(n, err, "prune sessions")
}

// RotateToken gives a user a new token and returns it: the old one stops working and every
// session but keepSession's (a hash, "" for none) ends. ErrNotFound for an unknown user.
func (s *Store) RotateToken(ctx context.Context, userID int64, keepSession string) (User, string, error) {
	token := NewToken()
	var u User
	err := s.WithTx(ctx, func(tx *Store) error {
		n, err := tx.exec(ctx, `UPDATE users SET token_hash = ? WHERE id = ?`, HashToken(token), userID)
		if err != nil {
			return err
		}
		if n == 0 {
			return missing("user", userID)
		}
		if _, err := tx.exec(ctx, `DELETE FROM sessions WHERE user_id = ? AND id_hash <> ?`, userID, keepSession); err != nil {
			return fmt.Errorf("end sessions: %w", err)
		}
		tx.changed(userID) // held streams and long polls check their credential again
		u, err = tx.UserByID(ctx, userID)
		return err
	})
	return wrapped2(u, token, err, "rotate the token of user %d", userID)
}

// SetDisabled disables (ending their sessions) or enables a user; ErrConflict for the last enabled admin.
func (s *Store) SetDisabled(ctx context.Context, userID int64, disabled bool) (User, error) {
	var u User
	err := s.WithTx(ctx, func(tx *Store) error {
		if lock := tx.dialect.lockAdmins(); disabled && lock != "" {
			// Two admins disabling each other at once must not both pass the check below.
			if _, err := tx.exec(ctx, lock); err != nil {
				return fmt.Errorf("lock admins: %w", err)
			}
		}
		target, err := tx.UserByID(ctx, userID)
		if err != nil {
			return err
		}
		if disabled && target.Role == RoleAdmin && !target.Disabled {
			others, err := fetch[int64](ctx, tx, tx.db, `SELECT COUNT(*) FROM users WHERE role = 'admin' AND disabled = 0 AND id <> ?`,
				userID)
			if err != nil {
				return fmt.Errorf("count admins: %w", err)
			}
			if others == 0 {
				return ErrConflict
			}
		}
		if _, err := tx.exec(ctx, `UPDATE users SET disabled = ? WHERE id = ?`, boolInt(disabled), userID); err != nil {
			return err
		}
		if disabled {
			if _, err := tx.exec(ctx, `DELETE FROM sessions WHERE user_id = ?`, userID); err != nil {
				return fmt.Errorf("end sessions: %w", err)
			}
			tx.changed(userID) // held streams and long polls check their credential again
		}
		u, err = tx.UserByID(ctx, userID)
		return err
	})
	return wrapped(u, err, "set user %d disabled=%t", userID, disabled)
}

// ListUsers pages through users by id after afterID.
func (s *Store) ListUsers(ctx context.Context, afterID int64, limit int) ([]User, error) {
	us, err := fetch[[]User](ctx, s, s.read, `SELECT * FROM users WHERE id > ? ORDER BY id LIMIT ?`, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	for i := range us {
		us[i].DailyLimit = s.effectiveLimit(us[i].OwnLimit)
	}
	return us, nil
}

// DeleteSession signs a session out; expired sessions are swept with it.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	_, err := s.exec(ctx, `DELETE FROM sessions WHERE id_hash = ? OR expires_at <= ?`, HashToken(id), s.nowMs())
	return wrap(err, "delete session")
}
