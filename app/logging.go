package app

import (
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"golang.org/x/term"
)

// Version is set at build time (-ldflags "-X github.com/owed/owed/app.Version=...").
var Version = "dev"

// BuildVersion is the build's version: the one set with -ldflags, else the module's from the
// build information (a tagged `go install`), else the VCS revision the binary was built from.
func BuildVersion() string {
	if Version != "dev" {
		return Version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Version
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return Version
	}
	return "dev-" + rev[:min(len(rev), 12)] + dirty
}

// NewLogger is owed's logger in OWED_LOG_FORMAT (unset: text on a terminal, else JSON) at
// OWED_LOG_LEVEL.
func NewLogger(cfg Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	format := cfg.LogFormat
	if format == "" {
		format = "json"
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
