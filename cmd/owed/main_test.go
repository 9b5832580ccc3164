package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// cli runs owed's command line in the test's process with an environment of its own, so CLI
// tests run in parallel: none sets the process's environment.
type cli struct {
	t   *testing.T
	dir string            // OWED_DATA_DIR
	env map[string]string // the only OWED_* settings run sees
}

// cliEnv points run at a fresh database (the dialect's) and data directory, with no other
// OWED_* setting from the environment the tests run in.
func cliEnv(t *testing.T, db string) *cli {
	t.Helper()
	dir := t.TempDir()
	return &cli{t: t, dir: dir, env: map[string]string{"OWED_DATA_DIR": dir, "OWED_DATABASE_URL": db, "OWED_LOG_LEVEL": "error"}}
}

// run runs owed with args.
func (c *cli) run(args ...string) (stdout, stderr string, err error) {
	c.t.Helper()
	var out, errb bytes.Buffer
	err = run(args, func(k string) string { return c.env[k] }, &out, &errb)
	return out.String(), errb.String(), err
}

// whoIs asks a server on the database who a token belongs to.
func whoIs(t *testing.T, db, dataDir, token string) (int, map[string]any) {
	t.Helper()
	cfg := app.Defaults()
	cfg.DatabaseURL, cfg.DataDir = db, dataDir
	a, err := app.New(context.Background(), cfg, app.Options{Log: owedtest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	req := httptest.NewRequest(http.MethodGet, "/api/session", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	a.Echo.ServeHTTP(rec, req)
	var body struct{ User map[string]any }
	json.Unmarshal(rec.Body.Bytes(), &body)
	return rec.Code, body.User
}

var printedToken = regexp.MustCompile(`owed_[A-Za-z0-9_-]{43}`)

// TestUsersAdd: `owed users add` prints a token, once, that authenticates as that user.
func TestUsersAdd(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		cli := cliEnv(t, db)
		dir := cli.dir
		tokens := map[string]string{}
		for _, args := range [][]string{
			{"users", "add", "bob", "--role", "author"},
			{"users", "add", "--role", "bot", "bot-1"}, // flags before the name too
			{"users", "add", "ada", "--role=admin"},
			{"users", "add", "cy"}, // an author by default
		} {
			out, _, err := cli.run(args...)
			if err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			found := printedToken.FindAllString(out, -1)
			if len(found) != 1 {
				t.Fatalf("%v printed %q: want one token", args, out)
			}
			tokens[strings.Join(args, " ")] = found[0]
		}
		for args, want := range map[string][2]string{
			"users add bob --role author": {"bob", "author"},
			"users add --role bot bot-1":  {"bot-1", "bot"},
			"users add ada --role=admin":  {"ada", "admin"},
			"users add cy":                {"cy", "author"},
		} {
			status, u := whoIs(t, db, dir, tokens[args])
			if status != http.StatusOK || u["name"] != want[0] || u["role"] != want[1] {
				t.Errorf("%s: the token answers %d %v, want %s (%s)", args, status, u, want[0], want[1])
			}
		}

		// Refused: nothing is created.
		for _, args := range [][]string{
			{"users", "add", "eve", "--role", "root"},
			{"users", "add"},
			{"users", "add", "--role", "author"},
			{"users", "add", "eve", "mallory"},
			{"users", "add", "  "},
			{"users", "add", "eve", "--colour", "red"},
			{"users", "list"},
			{"users"},
		} {
			out, _, err := cli.run(args...)
			if err == nil || printedToken.MatchString(out) {
				t.Errorf("%v: %v, printed %q; want an error and no token", args, err, out)
			}
		}
		if _, _, err := cli.run("users", "add", "eve", "--role", "root"); err == nil || !strings.Contains(err.Error(), "--role") {
			t.Errorf("a bad role: %v, want it named", err)
		}
		store, err := models.Open(context.Background(), models.Options{URL: db, DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		if n, err := store.CountUsers(context.Background(), ""); err != nil || n != 4 {
			t.Errorf("users: %d %v, want the 4 added", n, err)
		}
	})
}

// TestMigrate: `owed migrate` makes the schema on an empty database and is idempotent.
func TestMigrate(t *testing.T) {
	t.Parallel()
	owedtest.EmptyDialects(t, func(t *testing.T, db string) {
		cli := cliEnv(t, db)
		dir := cli.dir
		for range 2 {
			out, _, err := cli.run("migrate")
			if err != nil || !strings.Contains(out, "up to date") {
				t.Fatalf("migrate: %v %q", err, out)
			}
		}
		store, err := models.Open(context.Background(), models.Options{URL: db, DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		if n, err := store.CountUsers(context.Background(), ""); err != nil || n != 0 {
			t.Errorf("after migrate: %d users, %v; want an empty schema", n, err)
		}
	})
	// With no database URL, SQLite in the data directory.
	cli := cliEnv(t, "")
	dir := cli.dir
	if _, _, err := cli.run("migrate"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "owed.db")); err != nil {
		t.Errorf("no database in OWED_DATA_DIR: %v", err)
	}
}

// TestCommandLine: unknown commands and bad configuration are errors that say what is wrong.
func TestCommandLine(t *testing.T) {
	t.Parallel()
	cli := cliEnv(t, "")
	if _, errOut, err := cli.run("frobnicate"); err == nil || !strings.Contains(err.Error(), "frobnicate") || !strings.Contains(errOut, "usage") {
		t.Errorf("unknown command: %v, stderr %q", err, errOut)
	}
	if _, errOut, err := cli.run(); err == nil || !strings.Contains(errOut, "usage") {
		t.Errorf("no command: %v, stderr %q", err, errOut)
	}
	if out, _, err := cli.run("help"); err != nil || !strings.Contains(out, "owed serve") {
		t.Errorf("help: %v %q", err, out)
	}
	if _, _, err := cli.run("migrate", "--frobnicate"); err == nil {
		t.Errorf("an unknown flag was accepted")
	}
	cli.env["OWED_LEASE"] = "forever"
	if _, _, err := cli.run("migrate"); err == nil || !strings.Contains(err.Error(), "OWED_LEASE") {
		t.Errorf("bad configuration: %v, want OWED_LEASE named", err)
	}
}

// serveOnce runs `owed serve` on the database until it is ready, then SIGTERMs it and returns
// what it printed; it fails unless the process exits 0.
func serveOnce(t *testing.T, db, dataDir string, whileUp func(base string)) (stdout string) {
	t.Helper()
	p := startOwed(t, "OWED_DATA_DIR="+dataDir, "OWED_DATABASE_URL="+db)
	whileUp(p.URL)
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Errorf("owed serve exited with %v after SIGTERM, want 0", err)
	}
	return p.stdout.String()
}

func sessionOf(t *testing.T, base, token string) (int, map[string]any) {
	t.Helper()
	r, err := owedtest.Call(http.DefaultClient, base, http.MethodGet, "/api/session", token, nil)
	if err != nil && r.Status == 0 {
		t.Fatal(err)
	}
	var body struct{ User map[string]any }
	json.Unmarshal(r.Body, &body)
	return r.Status, body.User
}

// TestServe: `owed serve` with no admin token configured prints a first admin token on an
// empty database, once; it works; a second start prints none; SIGTERM stops it cleanly.
func TestServe(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		dataDir := t.TempDir()
		first := serveOnce(t, db, dataDir, func(string) {})
		tokens := printedToken.FindAllString(first, -1)
		if len(tokens) != 1 {
			t.Fatalf("first start printed %q: want one admin token", first)
		}
		token := tokens[0]
		second := serveOnce(t, db, dataDir, func(base string) {
			if status, u := sessionOf(t, base, token); status != http.StatusOK || u["role"] != "admin" {
				t.Errorf("the printed token: %d %v, want an admin", status, u)
			}
			if status, _ := sessionOf(t, base, "owed_nope"); status != http.StatusUnauthorized {
				t.Errorf("a bad token: %d, want 401", status)
			}
		})
		if printedToken.MatchString(second) || strings.Contains(second, "admin token") {
			t.Errorf("second start printed %q: the token is shown once", second)
		}
	})
}

// TestServeStopsWhenTheListenerFails: when the API's listener fails while serving, serve
// shuts owed down and returns the listener's error, which `owed serve` exits non-zero with,
// rather than waiting for a signal with the runners working and no HTTP.
func TestServeStopsWhenTheListenerFails(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		a, ln := owedtest.Serve(t, db)
		ln.Close() // the listener fails under the server
		served := make(chan error, 1)
		go func() { served <- serveUntil(a, make(chan os.Signal), 10*time.Second, owedtest.Logger(t)) }()
		select {
		case err := <-served:
			if err == nil || !strings.Contains(err.Error(), "serving HTTP on") {
				t.Errorf("serve returned %v; want the listener's error", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("serve did not stop when its listener failed")
		}
		if err := a.Store.Ping(context.Background()); err == nil {
			t.Error("the database is still open: serve returned without shutting down")
		}
	})
}

// TestServeExitsNonZeroWhenThePortIsTaken: `owed serve` on an address another process holds
// exits non-zero, saying which address.
func TestServeExitsNonZeroWhenThePortIsTaken(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(owedBinary(t), "serve")
	cmd.Env = owedEnv("OWED_ADDR="+ln.Addr().String(), "OWED_DATA_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("owed serve on a taken port: %v, want a non-zero exit\n%s", err, out)
	}
	if !strings.Contains(string(out), ln.Addr().String()) || !strings.Contains(string(out), "address already in use") {
		t.Errorf("owed serve on a taken port printed %q; want the address and why", out)
	}
}
