package harness

import (
	"context"
	"io"
	"log/slog"
	"os"
)

// OwedLogger is the logger owed's side runs with: every line owed writes in production is made
// (so its cost is measured) and dropped, except warnings and errors, which go to stderr.
func OwedLogger() *slog.Logger {
	return slog.New(splitHandler{
		info: slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}),
		warn: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}),
	})
}

// QuietLogger shows warnings and errors only (River's side: River logs nothing per job).
func QuietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type splitHandler struct{ info, warn slog.Handler }

func (h splitHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h splitHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		return h.warn.Handle(ctx, r)
	}
	return h.info.Handle(ctx, r)
}

func (h splitHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return splitHandler{h.info.WithAttrs(as), h.warn.WithAttrs(as)}
}

func (h splitHandler) WithGroup(g string) slog.Handler {
	return splitHandler{h.info.WithGroup(g), h.warn.WithGroup(g)}
}
