// Command owed serves owed's API, admin SPA, periodic sweep, webhook deliveries and backfill queue, and runs its
// administrative commands.
//
//	owed serve                              run everything (configured by OWED_* variables or flags)
//	owed migrate [--status]                 apply pending database migrations and exit, or list them
//	owed users add NAME --role ROLE         add a user and print its token once
//	owed backup FILE                        a consistent copy of a live SQLite database
//	owed health                             exit 0 when the local server is ready (container health checks)
//	owed version                            print the version
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
	if err := run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "owed:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  owed serve [flags]                   API, admin SPA, sweeps, deliveries and backfill in one process
  owed migrate [--status] [flags]      apply pending database migrations and exit; --status only lists them
  owed users add NAME --role ROLE      add a user (author, bot or admin) and print its token once
  owed backup FILE [flags]             a consistent copy of a live SQLite database
  owed health                          exit 0 when the local server is ready (container health checks)
  owed version                         print owed's version
Every setting is an OWED_* environment variable and a flag of the same name (OWED_MODEL_URL is
--model-url); flags override the environment. "owed COMMAND --help" lists them.`

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return errors.New("no command")
	}
	switch args[0] {
	case "help", "-h", "--help", "-help":
		fmt.Fprintln(stdout, usage)
		return nil
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "owed", app.BuildVersion())
		return nil
	}
	cfg, err := app.FromEnv(getenv)
	if err != nil {
		return err
	}
	cmd, rest, err := commandOf(args)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("owed "+cmd, flag.ContinueOnError)
	// Parse errors are returned (and printed once, by main); the flags are listed only when
	// asked for, on stdout.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	cfg.Flags(fs)
	own, ok := declareFlags(fs, cmd)
	if !ok {
		fmt.Fprintln(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
	operands, helped, err := parseAround(fs, rest, cmd, stdout)
	if err != nil || helped {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	log := app.NewLogger(cfg, stderr)
	slog.SetDefault(log)
	return execute(context.Background(), cfg, log, cmd, operands, own, stdout)
}

// commandOf splits args into the command and what follows it; "users add" is one command.
func commandOf(args []string) (cmd string, rest []string, err error) {
	cmd, rest = args[0], args[1:]
	if cmd != "users" {
		return cmd, rest, nil
	}
	if len(rest) == 0 || (rest[0] != "add" && !isHelp(rest[0])) {
		return "", nil, errors.New("usage: owed users add NAME --role author|bot|admin")
	}
	if rest[0] == "add" {
		return "users add", rest[1:], nil
	}
	return cmd, rest, nil
}

// ownFlags are the flags one command has beside the configuration's.
type ownFlags struct {
	status *bool   // migrate
	role   *string // users add
}

// declareFlags declares cmd's own flags on fs; ok is false for a command owed does not have.
func declareFlags(fs *flag.FlagSet, cmd string) (own ownFlags, ok bool) {
	switch cmd {
	case "serve", "backup", "health":
	case "migrate":
		own.status = fs.Bool("status", false, "list the applied and pending migrations, and change nothing")
	case "users", "users add":
		own.role = fs.String("role", string(models.RoleAuthor), "author, bot or admin")
	default:
		return own, false
	}
	return own, true
}

// execute runs cmd once its flags are parsed and the configuration is valid.
func execute(ctx context.Context, cfg app.Config, log *slog.Logger, cmd string, operands []string, own ownFlags, stdout io.Writer) error {
	open := func() (*models.Store, error) {
		return models.Open(ctx, models.Options{URL: cfg.DatabaseURL, DataDir: cfg.DataDir, Logger: log})
	}
	switch cmd {
	case "serve":
		if len(operands) > 0 {
			return fmt.Errorf("owed serve takes no arguments, got %q", operands)
		}
		return serve(ctx, cfg, log, stdout)
	case "migrate":
		if *own.status {
			return migrateStatus(ctx, cfg, stdout)
		}
		return migrate(open, stdout)
	case "backup":
		if len(operands) != 1 {
			return errors.New("usage: owed backup FILE")
		}
		return backup(ctx, cfg, operands[0], stdout)
	case "health":
		return health(cfg.Addr, stdout)
	}
	return usersAdd(ctx, open, operands, *own.role, stdout)
}

// migrate applies pending migrations (opening the store does) and says so.
func migrate(open func() (*models.Store, error), stdout io.Writer) error {
	store, err := open()
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "owed: the database is up to date")
	return store.Close()
}

// parseAround parses the command's flags wherever they stand among its operands (the flag
// package stops at the first argument that is not a flag) and returns the operands. Asked for
// help, it lists the flags on stdout and reports helped: asking for help is not an error.
func parseAround(fs *flag.FlagSet, args []string, cmd string, stdout io.Writer) (operands []string, helped bool, err error) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(stdout, "usage: owed %s [flags]\n\n", cmd)
				fs.SetOutput(stdout)
				fs.PrintDefaults()
				return nil, true, nil
			}
			return nil, false, err
		}
		if fs.NArg() == 0 {
			return operands, false, nil
		}
		operands = append(operands, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

func usersAdd(ctx context.Context, open func() (*models.Store, error), operands []string, role string, stdout io.Writer) error {
	const usersUsage = "usage: owed users add NAME --role author|bot|admin"
	if len(operands) != 1 || strings.TrimSpace(operands[0]) == "" {
		return errors.New(usersUsage)
	}
	name := strings.TrimSpace(operands[0])
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > 100 {
		return errors.New("NAME must be UTF-8 text of at most 100 characters")
	}
	if !models.ValidRole(models.Role(role)) {
		return fmt.Errorf("--role %q: want author, bot or admin", role)
	}
	store, err := open()
	if err != nil {
		return err
	}
	defer store.Close()
	u, token, err := store.CreateUser(ctx, name, models.Role(role))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "user %d %q (%s); token, shown once:\n%s\n", u.ID, u.Name, u.Role, token)
	return nil
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
	return serveUntil(a, sig, cfg.ShutdownGrace, log)
}

// serveUntil waits for a signal, or for a listener to fail, and shuts a down within grace;
// a failed listener is returned as the error (so owed exits non-zero), with any error of the
// shutdown joined to it.
func serveUntil(a *app.App, sig <-chan os.Signal, grace time.Duration, log *slog.Logger) error {
	var failed error
	select {
	case got := <-sig:
		log.Info("shutting down", "signal", got.String(), "grace", grace.String())
	case failed = <-a.Failed():
		log.Error("shutting down: a listener failed", "err", failed, "grace", grace.String())
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	return errors.Join(failed, a.Shutdown(sctx))
}
