// Package owedtest sets owed up for tests: a real database (SQLite in a temporary directory,
// and PostgreSQL too when OWED_TEST_POSTGRES_URL is set), a fake clock, a fake model over real
// HTTP, and the whole app behind an httptest server.
package owedtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the PostgreSQL driver for schema setup

	"github.com/owed/owed/app"
	"github.com/owed/owed/clock"
	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest/clocktest"
	"github.com/owed/owed/scheduler"
)

// PostgresEnv names the variable that switches the PostgreSQL suite on.
const PostgresEnv = "OWED_TEST_POSTGRES_URL"

// Start is the fake clock's starting time in every test: a fixed moment, mid-morning UTC.
var Start = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// Dialects runs fn once per database: "sqlite" always, "postgres" when OWED_TEST_POSTGRES_URL
// is set. fn gets a database URL of its own holding only what the migrations put there: a new
// SQLite file in a temporary directory, or a migrated PostgreSQL schema from the pool
// (MigratedPostgresURL).
func Dialects(t *testing.T, fn func(t *testing.T, databaseURL string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "sqlite:"+t.TempDir()+"/owed.db") })
	if base := os.Getenv(PostgresEnv); base != "" {
		t.Run("postgres", func(t *testing.T) { fn(t, MigratedPostgresURL(t, base)) })
	}
}

// EmptyDialects is Dialects on empty databases, not yet migrated (tests of the migrations).
func EmptyDialects(t *testing.T, fn func(t *testing.T, databaseURL string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "sqlite:"+t.TempDir()+"/owed.db") })
	if base := os.Getenv(PostgresEnv); base != "" {
		t.Run("postgres", func(t *testing.T) { fn(t, PostgresURL(t, base)) })
	}
}

// PostgresURL makes a fresh, empty schema in the database at base, dropped when the test ends,
// and returns a URL whose connections use it.
func PostgresURL(t testing.TB, base string) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	schema := "owedtest_" + hex.EncodeToString(b)
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	if _, err := db.Exec(`CREATE SCHEMA ` + schema); err != nil {
		db.Close()
		t.Fatalf("postgres: create schema: %v", err)
	}
	t.Cleanup(func() {
		db.Exec(`DROP SCHEMA ` + schema + ` CASCADE`)
		db.Close()
	})
	return schemaURL(t, base, schema)
}

// PgbouncerEnv names a pgbouncer in transaction mode in front of the server at PostgresEnv
// (every database name passed through; .ci/pgbouncer starts one), for the tests that run
// through a pooler.
const PgbouncerEnv = "OWED_TEST_PGBOUNCER_URL"

// PooledURLs makes a fresh database on the server at PostgresEnv, dropped when the test ends,
// and returns its URL through the pgbouncer at PgbouncerEnv and its direct URL (for LISTEN).
// A database rather than a schema: a pooler in transaction mode refuses a search_path in the
// startup packet. It skips the test unless both variables are set.
func PooledURLs(t testing.TB) (pooled, direct string) {
	t.Helper()
	base, bouncer := os.Getenv(PostgresEnv), os.Getenv(PgbouncerEnv)
	if base == "" || bouncer == "" {
		t.Skip("needs PostgreSQL behind pgbouncer: set " + PostgresEnv + " and " + PgbouncerEnv)
	}
	b := make([]byte, 6)
	rand.Read(b)
	name := "owedpgb_" + hex.EncodeToString(b)
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	if _, err := db.Exec(`CREATE DATABASE ` + name); err != nil {
		db.Close()
		t.Fatalf("postgres: create database: %v", err)
	}
	t.Cleanup(func() {
		db.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`)
		db.Close()
	})
	at := func(u string) string {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatalf("postgres url: %v", err)
		}
		parsed.Path = "/" + name
		return parsed.String()
	}
	return at(bouncer), at(base)
}

// Logger is a quiet logger for tests (errors only), or verbose with OWED_TEST_LOG=1.
func Logger(t testing.TB) *slog.Logger {
	level := slog.LevelError
	if os.Getenv("OWED_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: level}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Store opens a store on databaseURL with the fake clock; configure may change its other
// options (the default daily limit).
func Store(t testing.TB, databaseURL string, clk clock.Clock, configure ...func(*models.Options)) *models.Store {
	t.Helper()
	opts := models.Options{URL: databaseURL, DataDir: t.TempDir(), Clock: clk, MaxConns: 8}
	for _, c := range configure {
		c(&opts)
	}
	s, err := models.Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Env is a running owed for one test.
type Env struct {
	T          testing.TB
	App        *app.App
	Server     *httptest.Server
	Model      *modeltest.Fake
	Clock      *clocktest.Fake
	AdminToken string
}

// AdminToken is the admin token every Env starts with.
const AdminToken = "owed_test_admin_token_0123456789abcdef"

// NewEnv starts owed on databaseURL with a fake model, a fake clock at Start, and the given
// changes to the configuration. The periodic sweep is not started: tests sweep when they choose.
func NewEnv(t testing.TB, databaseURL string, configure ...func(*app.Config)) *Env {
	t.Helper()
	return newEnv(t, databaseURL, false, configure...)
}

// NewEnvFakeSleep is NewEnv on a stepping clock (clocktest.Stepping): the backfill queue's and the
// media engine's waits move the fake clock instead of sleeping, so rate limits, gaps and
// cooldowns pass at once, in fake time.
func NewEnvFakeSleep(t testing.TB, databaseURL string, configure ...func(*app.Config)) *Env {
	t.Helper()
	return newEnv(t, databaseURL, true, configure...)
}

func newEnv(t testing.TB, databaseURL string, fakeSleep bool, configure ...func(*app.Config)) *Env {
	t.Helper()
	model := modeltest.New(t)
	cfg := app.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.DatabaseURL = databaseURL
	cfg.AdminToken = AdminToken
	cfg.ModelURL = model.URL()
	cfg.InlineWait = 5 * time.Second
	cfg.DatabaseMaxConns = 8 // many tests share one PostgreSQL server and its 100 connections
	cfg.WriteRate = 0        // tests that write in bulk should not trip the per-token limit; its own test turns it on
	for _, f := range configure {
		f(&cfg)
	}
	clk := clocktest.NewFake(Start)
	// A heartbeat every 2 s: a test of a deaf listener sees readiness fall within 4 s.
	opts := app.Options{Clock: clk, Log: Logger(t), BeatEvery: 2 * time.Second}
	if fakeSleep {
		opts.Clock = clocktest.Stepping{Fake: clk} // every wait moves the fake clock and ends at once
	}
	a, err := app.New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("app: %v", err)
	}
	if err := a.Notify.Start(context.Background()); err != nil {
		a.Shutdown(context.Background())
		t.Fatalf("notify: %v", err)
	}
	srv := httptest.NewServer(a.Echo)
	t.Cleanup(func() {
		a.API.CloseStreams() // httptest's Close waits for open requests, and a stream never ends by itself
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Shutdown(ctx)
	})
	return &Env{T: t, App: a, Server: srv, Model: model, Clock: clk, AdminToken: AdminToken}
}

// Serve starts owed on databaseURL as `owed serve` does (the notifier, the runners, cron; the
// real clock), on a loopback listener of its own and with the given changes to the
// configuration. It is shut down when the test ends (again, if the test shut it down itself).
func Serve(t testing.TB, databaseURL string, configure ...func(*app.Config)) (*app.App, net.Listener) {
	t.Helper()
	cfg := app.Defaults()
	cfg.DataDir, cfg.DatabaseURL, cfg.AdminToken = t.TempDir(), databaseURL, AdminToken
	for _, f := range configure {
		f(&cfg)
	}
	ctx := context.Background()
	a, err := app.New(ctx, cfg, app.Options{Log: Logger(t)})
	if err != nil {
		t.Fatalf("app: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.Shutdown(ctx)
		t.Fatal(err)
	}
	if err := a.Serve(ctx, ln); err != nil {
		a.Shutdown(ctx)
		t.Fatalf("serve: %v", err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		a.Shutdown(sctx)
	})
	return a, ln
}

// Response is an answer read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic value.
func (r Response) JSON() map[string]any {
	var m map[string]any
	json.Unmarshal(r.Body, &m)
	return m
}

// Decode decodes the body into v.
func (r Response) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// ErrorCode is the error shape's code, or "".
func (r Response) ErrorCode() string {
	var e struct {
		Error struct{ Code, Field string }
	}
	json.Unmarshal(r.Body, &e)
	return e.Error.Code
}

// Do sends a request with a bearer token ("" for none) and a body (a string or []byte is sent
// as is, anything else as JSON) and reads the answer; headers are name, value pairs.
func (e *Env) Do(method, path, token string, body any, headers ...string) Response {
	e.T.Helper()
	r, err := Call(e.Server.Client(), e.Server.URL, method, path, token, body, headers...)
	if err != nil && r.Status == 0 { // an answer that broke off is the test's to judge
		e.T.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// Call sends a request to base+path on client as Env.Do does, and reads the answer whole (an
// error with a non-zero Status: the body broke off). It fails no test: a goroutine, or a test
// of owed as a process, decides what an error means.
func Call(client *http.Client, base, method, path, token string, body any, headers ...string) (Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return Response{}, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return Response{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := client.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return Response{Status: res.StatusCode, Header: res.Header, Body: b}, err
}

// User creates a user through the admin API and returns its id and token. User names are
// unique regardless of case: on a database where the name is taken (a second Env on it), the
// user is NAME-2, NAME-3, ….
func (e *Env) User(name string, role models.Role) (int64, string) {
	e.T.Helper()
	r := e.Do(http.MethodPost, "/api/admin/users", e.AdminToken, map[string]string{"name": name, "role": string(role)})
	for n := 2; r.Status == http.StatusConflict && n < 100; n++ {
		r = e.Do(http.MethodPost, "/api/admin/users", e.AdminToken, map[string]string{"name": fmt.Sprintf("%s-%d", name, n), "role": string(role)})
	}
	if r.Status != http.StatusCreated {
		e.T.Fatalf("create user: %d %s", r.Status, r.Body)
	}
	var u struct {
		ID    int64
		Token string
	}
	r.Decode(e.T, &u)
	return u.ID, u.Token
}

// Data is the store fixture on the app's store and fake clock, reporting to the Env's test.
func (e *Env) Data() *Data {
	return &Data{T: e.T, Ctx: context.Background(), Store: e.App.Store, Clock: e.Clock}
}

// Quiet stops the app's background work (inline screens, scores after a write, authors'
// sweeps), so that nothing changes the database behind the test's back: writes answer pending.
// It returns a content runner of the test's own on the app's store, model, clock and settings,
// which settles the owed work when the test sweeps with it (a stopped runner claims nothing
// more).
func (e *Env) Quiet() *scheduler.Content {
	e.T.Helper()
	if err := e.App.Content.Stop(context.Background()); err != nil {
		e.T.Fatalf("stop: %v", err)
	}
	cfg := e.App.Config
	model := modelclient.New(modelclient.Config{URL: cfg.ModelURL, Key: cfg.ModelKey, API: cfg.ModelAPI, Model: cfg.ModelName, Timeout: cfg.ModelTimeout})
	return scheduler.NewContent(e.App.Store, model, e.Clock, Logger(e.T), e.App.Metrics,
		scheduler.ContentConfig{Lease: cfg.Lease, ModelName: cfg.ModelName, ReviewBelow: cfg.ReviewBand()})
}

// Sweep runs every due job now, as the periodic sweep does.
func (e *Env) Sweep() int {
	e.T.Helper()
	n, err := e.App.Content.Sweep(context.Background(), 0)
	if err != nil {
		e.T.Fatalf("sweep: %v", err)
	}
	return n
}

// LogBuffer is a log destination that the store's and runners' goroutines may write to at
// once, read by the test with String.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
