package app

import (
	"fmt"
	"os"
)

// privateDataDir makes the data folder the owner's alone (0700), made or found: it holds the
// SQLite database, its WAL and every preview, and the database holds webhook secrets and
// token hashes. A folder an older owed left 0755 is tightened.
func privateDataDir(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	return nil
}
