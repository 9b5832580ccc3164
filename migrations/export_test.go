package migrations

import (
	"context"
	"database/sql"
)

// Apply is ApplyWith, waiting for the lock as long as DefaultLockTimeout, silently.
func Apply(ctx context.Context, db *sql.DB, dialect string) ([]int, error) {
	return ApplyWith(ctx, db, dialect, LockWait{})
}
