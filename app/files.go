package app

import (
	"fmt"
	"log/slog"
	"os"
)

// privateDataDir makes the data folder the owner's alone (0700), made or found: it holds the
// database's secrets and hashes. A shared (sticky) folder or one owed may not change is left as
// it is, with a warning: its files are 0600 anyway.
func privateDataDir(dir string, log *slog.Logger) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if st.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if st.Mode()&os.ModeSticky != 0 {
		log.Warn("the data folder is shared (sticky); its files are private, but give owed a folder of its own", "dir", dir, "mode", st.Mode().Perm().String())
		return nil
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		log.Warn("the data folder could not be made private (0700)", "dir", dir, "err", err)
	}
	return nil
}
