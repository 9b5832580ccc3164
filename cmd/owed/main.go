// Command owed serves owed's API, admin SPA, cron sweep and backfill queue, and runs its
// administrative commands.
//
//	owed serve                              run everything (configured by OWED_* variables)
//	owed migrate                            apply pending database migrations and exit
//	owed users add NAME --role ROLE         add a user and print its token once
//	owed health                             exit 0 when the local server is ready (container health checks)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "owed:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  owed serve [--addr ADDR] [--data DIR] [--database URL]
  owed migrate [--data DIR] [--database URL]
  owed users add NAME --role author|bot|admin [--data DIR] [--database URL]
  owed health
Configuration comes from the OWED_* environment variables; flags override them.`

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return errors.New("no command")
	}
	cfg, err := app.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: logLevel()}))
	slog.SetDefault(log)
	ctx := context.Background()
	switch args[0] {
	case "serve":
		fs := flagSet("serve", &cfg, stderr)
		fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "listen address (OWED_ADDR)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return serve(ctx, cfg, log, stdout)
	case "migrate":
		fs := flagSet("migrate", &cfg, stderr)
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		store, err := models.Open(ctx, models.Options{URL: cfg.DatabaseURL, DataDir: cfg.DataDir, Logger: log})
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, "owed: the database is up to date")
		return store.Close()
	case "users":
		const usersUsage = "usage: owed users add NAME --role author|bot|admin"
		if len(args) < 2 || args[1] != "add" {
			return errors.New(usersUsage)
		}
		fs := flagSet("users add", &cfg, stderr)
		role := fs.String("role", models.RoleAuthor, "author, bot or admin")
		// Flags may come before or after the name: the flag package stops at the first
		// argument that is not one, so parse around it.
		var names []string
		for rest := args[2:]; ; {
			if err := fs.Parse(rest); err != nil {
				return err
			}
			if fs.NArg() == 0 {
				break
			}
			names = append(names, fs.Arg(0))
			rest = fs.Args()[1:]
		}
		if len(names) != 1 || strings.TrimSpace(names[0]) == "" {
			return errors.New(usersUsage)
		}
		name := strings.TrimSpace(names[0])
		if !utf8.ValidString(name) || utf8.RuneCountInString(name) > 100 {
			return errors.New("NAME must be UTF-8 text of at most 100 characters")
		}
		if !models.ValidRole(*role) {
			return fmt.Errorf("--role %q: want author, bot or admin", *role)
		}
		store, err := models.Open(ctx, models.Options{URL: cfg.DatabaseURL, DataDir: cfg.DataDir, Logger: log})
		if err != nil {
			return err
		}
		defer store.Close()
		u, token, err := store.CreateUser(ctx, name, *role)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "user %d %q (%s); token, shown once:\n%s\n", u.ID, u.Name, u.Role, token)
		return nil
	case "health":
		return health(cfg.Addr, stdout)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	fmt.Fprintln(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// health asks the server at addr whether it is ready, for container health checks (the image
// has no curl).
func health(addr string, stdout io.Writer) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("OWED_ADDR %q: %w", addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	client := &http.Client{Timeout: 3 * time.Second}
	res, err := client.Get("http://" + net.JoinHostPort(host, port) + "/readyz")
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("not ready: %s", res.Status)
	}
	fmt.Fprintln(stdout, "ready")
	return nil
}

func flagSet(name string, cfg *app.Config, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.DataDir, "data", cfg.DataDir, "data directory (OWED_DATA_DIR)")
	fs.StringVar(&cfg.DatabaseURL, "database", cfg.DatabaseURL, "database URL (OWED_DATABASE_URL)")
	return fs
}

func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("OWED_LOG_LEVEL"))); err != nil {
		return slog.LevelInfo
	}
	return l
}

// serve runs until SIGINT or SIGTERM, then shuts down in order within the grace period.
func serve(ctx context.Context, cfg app.Config, log *slog.Logger, stdout io.Writer) error {
	// Listen for signals before serving: a SIGTERM that arrives as soon as the server answers
	// must still mean a graceful stop, not the default of dying on the spot.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	a, err := app.New(ctx, cfg, app.Options{Log: log, Out: stdout})
	if err != nil {
		return err
	}
	if err := a.Start(ctx); err != nil {
		a.Shutdown(ctx)
		return err
	}
	got := <-sig
	log.Info("shutting down", "signal", got.String(), "grace", cfg.ShutdownGrace.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	return a.Shutdown(sctx)
}
