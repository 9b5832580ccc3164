// Package harness is what the owed-against-River commands share: fresh databases per side, the
// fake model over loopback HTTP, seeding, profiling and the printed table.
package harness

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql "pgx", for setup and River's database/sql driver
	_ "github.com/mattn/go-sqlite3"    // database/sql "sqlite3", the driver owed uses

	"github.com/owed/owed/migrations"
	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/modelclient/modeltest"
)

// Dialects.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// Flags are the flags every command takes.
type Flags struct {
	DB         string
	PG         string
	N          int
	Authors    int
	Conns      int
	Runs       int
	Side       string
	CPUProfile string
	RiverProf  string
	Keep       bool
	Waits      bool
	WhatIf     []string
}

// Register adds the common flags to fs.
func (f *Flags) Register(fs *flag.FlagSet, defaultN int) {
	fs.StringVar(&f.DB, "db", SQLite, "database: sqlite or postgres")
	fs.StringVar(&f.PG, "pg", envOr("OWED_BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL server URL (its database is only used to create and drop the benchmark's own databases)")
	fs.IntVar(&f.N, "n", defaultN, "jobs per side")
	fs.IntVar(&f.Authors, "authors", 100, "authors the items are spread over")
	fs.IntVar(&f.Conns, "conns", 32, "PostgreSQL pool size per side (owed's default MaxConns is 32)")
	fs.IntVar(&f.Runs, "runs", 1, "repeat the whole comparison this many times and report medians")
	fs.StringVar(&f.Side, "side", "both", "both, owed, river or prototype (screen: the what-if prototype alone)")
	fs.StringVar(&f.CPUProfile, "cpuprofile", "", "write a CPU profile of owed's side (its timed part only) to this file; with -runs > 1, of the last run")
	fs.StringVar(&f.RiverProf, "river-cpuprofile", "", "write a CPU profile of River's side (its timed part only) to this file")
	fs.BoolVar(&f.Waits, "waits", false, "PostgreSQL: sample pg_stat_activity on owed's side during its timed part and print the tally")
	fs.Func("whatif", "owed's side only, comma-separated database settings owed does not make today: async-commit, fillfactor (PostgreSQL)",
		func(v string) error { f.WhatIf = strings.Split(v, ","); return nil })
	fs.BoolVar(&f.Keep, "keep", false, "keep the databases afterwards (SQLite files / PostgreSQL databases)")
}

// Check validates the flags.
func (f *Flags) Check() error {
	if f.DB != SQLite && f.DB != Postgres {
		return fmt.Errorf("-db %q: want sqlite or postgres", f.DB)
	}
	if f.Side != "both" && f.Side != "owed" && f.Side != "river" && f.Side != "prototype" {
		return fmt.Errorf("-side %q: want both, owed, river or prototype", f.Side)
	}
	if f.N <= 0 || f.Authors <= 0 || f.Runs <= 0 || f.Conns <= 0 {
		return fmt.Errorf("-n, -authors, -runs and -conns must be positive")
	}
	return nil
}

// Owed and River say whether each side runs.
func (f *Flags) Owed() bool  { return f.Side == "both" || f.Side == "owed" }
func (f *Flags) River() bool { return f.Side == "both" || f.Side == "river" }

// Prototype says whether a what-if prototype that was asked for runs.
func (f *Flags) Prototype() bool {
	return f.Side == "both" || f.Side == "owed" || f.Side == "prototype"
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Databases hands out fresh, empty databases of one dialect and removes them at Close.
type Databases struct {
	dialect string
	dir     string   // SQLite: files live here
	pgBase  *url.URL // PostgreSQL: the server
	admin   *sql.DB
	made    []string
	keep    bool
}

// NewDatabases prepares fresh databases for f.DB.
func NewDatabases(f *Flags) (*Databases, error) {
	d := &Databases{dialect: f.DB, keep: f.Keep}
	if f.DB == SQLite {
		dir, err := os.MkdirTemp("", "owedbench-")
		if err != nil {
			return nil, err
		}
		d.dir = dir
		return d, nil
	}
	u, err := url.Parse(f.PG)
	if err != nil {
		return nil, fmt.Errorf("-pg: %w", err)
	}
	d.pgBase = u
	if d.admin, err = sql.Open("pgx", f.PG); err != nil {
		return nil, err
	}
	if err := d.admin.Ping(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return d, nil
}

// Fresh makes an empty database called name and returns where it is: an SQLite file path, or a
// postgres:// URL.
func (d *Databases) Fresh(ctx context.Context, name string) (string, error) {
	if d.dialect == SQLite {
		p := filepath.Join(d.dir, name+".db")
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(p + suffix)
		}
		return p, nil
	}
	db := "owedbench_" + name
	if _, err := d.admin.ExecContext(ctx, `DROP DATABASE IF EXISTS `+db+` WITH (FORCE)`); err != nil {
		return "", err
	}
	if _, err := d.admin.ExecContext(ctx, `CREATE DATABASE `+db); err != nil {
		return "", err
	}
	if !slices.Contains(d.made, db) {
		d.made = append(d.made, db)
	}
	u := *d.pgBase
	u.Path = "/" + db
	return u.String(), nil
}

// Close removes every database made (unless kept).
func (d *Databases) Close() {
	if d.keep {
		if d.dir != "" {
			fmt.Fprintf(os.Stderr, "databases kept in %s\n", d.dir)
		} else {
			fmt.Fprintf(os.Stderr, "databases kept: %s\n", strings.Join(d.made, ", "))
		}
		return
	}
	if d.dir != "" {
		os.RemoveAll(d.dir)
	}
	if d.admin != nil {
		for _, db := range d.made {
			d.admin.Exec(`DROP DATABASE IF EXISTS ` + db + ` WITH (FORCE)`)
		}
		d.admin.Close()
	}
}

// SQLiteDSN is the mattn/go-sqlite3 DSN both sides use on SQLite: WAL, synchronous NORMAL, as
// owed's writer.
func SQLiteDSN(path string, readOnly bool) string {
	common := "_busy_timeout=10000&_foreign_keys=on&_synchronous=NORMAL&_cache_size=-32000"
	if readOnly {
		return "file:" + path + "?mode=ro&_txlock=deferred&" + common
	}
	return "file:" + path + "?_journal_mode=WAL&_txlock=immediate&" + common
}

// OwedURL is how owed's models.Open is told where path (from Fresh) is.
func OwedURL(dialect, where string) string {
	if dialect == SQLite {
		return "sqlite:" + where
	}
	return where
}

// Placeholders numbers ? placeholders as $1, $2 … for PostgreSQL.
func Placeholders(dialect, q string) string {
	if dialect != Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// AppSchema gives the database at db owed's tables (owed's own migrations) without owed's
// triggers: River's side does its bookkeeping itself, so it gets the same tables and indexes
// but none of the trigger work that is owed's way of owing jobs.
func AppSchema(ctx context.Context, db *sql.DB, dialect string) error {
	if _, err := migrations.ApplyWith(ctx, db, dialect, migrations.LockWait{}); err != nil {
		return err
	}
	var q string
	if dialect == SQLite {
		q = `SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger'`
	} else {
		q = `SELECT t.tgname, c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
			JOIN pg_namespace n ON n.oid = c.relnamespace WHERE NOT t.tgisinternal AND n.nspname = current_schema()`
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	var drops []string
	for rows.Next() {
		var name, table string
		if err := rows.Scan(&name, &table); err != nil {
			rows.Close()
			return err
		}
		if dialect == SQLite {
			drops = append(drops, `DROP TRIGGER `+name)
		} else {
			drops = append(drops, `DROP TRIGGER `+name+` ON `+table)
		}
	}
	rows.Close()
	for _, d := range drops {
		if _, err := db.ExecContext(ctx, d); err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
	}
	return nil
}

// Seed inserts authors (ids 1…authors) and n pitches spread over them round-robin, due a
// second ago, and returns the pitches as (id, user id) in id order. On owed's database the
// pitches' trigger owes one screen job each.
func Seed(ctx context.Context, db *sql.DB, dialect string, authors, n int) ([][2]int64, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	for i := 1; i <= authors; i++ {
		if _, err := tx.ExecContext(ctx, Placeholders(dialect, `INSERT INTO users (id, name, role, token_hash) VALUES (?, ?, 'author', ?)`),
			i, fmt.Sprintf("author %d", i), fmt.Sprintf("bench-token-%d", i)); err != nil {
			return nil, fmt.Errorf("seed users: %w", err)
		}
	}
	at := time.Now().Add(-time.Second).UnixMilli()
	const chunk = 500
	for start := 0; start < n; start += chunk {
		end := min(start+chunk, n)
		var b strings.Builder
		b.WriteString(`INSERT INTO pitches (user_id, body, created_at) VALUES `)
		args := make([]any, 0, 3*(end-start))
		for i := start; i < end; i++ {
			if i > start {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?)")
			args = append(args, int64(i%authors+1), PitchBody(i), at)
		}
		if _, err := tx.ExecContext(ctx, Placeholders(dialect, b.String()), args...); err != nil {
			return nil, fmt.Errorf("seed pitches: %w", err)
		}
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, user_id FROM pitches ORDER BY id`)
	if err != nil {
		return nil, err
	}
	items := make([][2]int64, 0, n)
	for rows.Next() {
		var it [2]int64
		if err := rows.Scan(&it[0], &it[1]); err != nil {
			rows.Close()
			return nil, err
		}
		items = append(items, it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return items, tx.Commit()
}

// PitchBody is the text of pitch i: a couple of hundred bytes, as a real pitch.
func PitchBody(i int) string {
	return fmt.Sprintf("Pitch %d: a slow song in D minor about the last train home, with a cello line "+
		"that keeps coming back and a chorus everyone can sing after hearing it once. Drums only in the "+
		"bridge; the rest is voice, cello and a piano that never plays more than three notes at a time.", i)
}

// Count runs a SELECT count(*)-like query.
func Count(ctx context.Context, db *sql.DB, q string) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, q).Scan(&n)
	return n, err
}

// Model is the fake model both sides ask: owed's modeltest.Fake, an instant model over real
// loopback HTTP (relay dialect), with request recording off.
type Model struct {
	Fake    *modeltest.Fake
	cleanup []func()
}

// StartModel starts the fake model.
func StartModel() *Model {
	m := &Model{}
	m.Fake = modeltest.New(&cleanupTB{m: m})
	m.Fake.KeepRequests(false)
	return m
}

// Client is a model client for the fake: owed's own modelclient with its shared, pooled transport.
func (m *Model) Client() *modelclient.Client { return modelclient.New(m.Fake.Config()) }

// Close stops the fake.
func (m *Model) Close() {
	for i := len(m.cleanup) - 1; i >= 0; i-- {
		m.cleanup[i]()
	}
}

// cleanupTB is the little of testing.TB that modeltest.New uses (Helper and Cleanup), so a
// command can run the fake outside a test. Anything else it is asked panics.
type cleanupTB struct {
	testing.TB
	m *Model
}

func (t *cleanupTB) Helper()          {}
func (t *cleanupTB) Cleanup(f func()) { t.m.cleanup = append(t.m.cleanup, f) }

// Profile starts a CPU profile into path ("" does nothing); the returned func stops it.
func Profile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// Result is one side's timed run.
type Result struct {
	Name    string
	Jobs    int
	Elapsed time.Duration
	CPU     CPU
}

// CPUSplit says where the CPU per job went: this process, and the database's backends.
func (r Result) CPUSplit() string {
	if r.Jobs == 0 {
		return ""
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(r.Jobs) }
	if r.CPU.DB == 0 {
		return fmt.Sprintf("process %.0f", us(r.CPU.Self))
	}
	return fmt.Sprintf("process %.0f + postgres %.0f", us(r.CPU.Self), us(r.CPU.DB))
}

// CPUPerJob is the processor time per job (this process and the side's database backends).
func (r Result) CPUPerJob() time.Duration {
	if r.Jobs == 0 {
		return 0
	}
	return r.CPU.Total() / time.Duration(r.Jobs)
}

// Rate is jobs per second.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Jobs) / r.Elapsed.Seconds()
}

// Table collects the results of every run, by row name, and prints medians.
type Table struct {
	order []string
	rows  map[string][]Result
}

// Add records one result.
func (t *Table) Add(r Result) {
	if t.rows == nil {
		t.rows = map[string][]Result{}
	}
	if _, ok := t.rows[r.Name]; !ok {
		t.order = append(t.order, r.Name)
	}
	t.rows[r.Name] = append(t.rows[r.Name], r)
}

// Median is a row's median rate (0 when missing).
func (t *Table) Median(name string) float64 {
	rs := t.rows[name]
	if len(rs) == 0 {
		return 0
	}
	rates := make([]float64, len(rs))
	for i, r := range rs {
		rates[i] = r.Rate()
	}
	slices.Sort(rates)
	if len(rates)%2 == 1 {
		return rates[len(rates)/2]
	}
	return (rates[len(rates)/2-1] + rates[len(rates)/2]) / 2
}

// MedianCPU is a row's median CPU per job in microseconds.
func (t *Table) MedianCPU(name string) float64 {
	rs := t.rows[name]
	if len(rs) == 0 {
		return 0
	}
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = float64(r.CPUPerJob()) / float64(time.Microsecond)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// Print writes the table: each row's runs and median, then each (owed row, River row) ratio.
func (t *Table) Print(title string, ratios [][2]string) {
	fmt.Printf("\n%s\n", title)
	fmt.Printf("%-60s %7s %9s %11s  %s\n", "side", "jobs", "median/s", "CPU µs/job", "runs (jobs/s)")
	for _, name := range t.order {
		var runs []string
		for _, r := range t.rows[name] {
			runs = append(runs, fmt.Sprintf("%.0f", r.Rate()))
		}
		fmt.Printf("%-60s %7d %9.0f %11.0f  %s\n", name, t.rows[name][0].Jobs, t.Median(name), t.MedianCPU(name), strings.Join(runs, " "))
	}
	for _, p := range ratios {
		a, b := t.Median(p[0]), t.Median(p[1])
		if a == 0 || b == 0 {
			continue
		}
		fmt.Printf("ratio  %s / %s = %.2fx throughput", p[0], p[1], a/b)
		if ca, cb := t.MedianCPU(p[0]), t.MedianCPU(p[1]); ca > 0 && cb > 0 {
			fmt.Printf("; CPU per job %.2fx River's", ca/cb)
		}
		fmt.Println()
	}
}

// Machine describes where the run happened, for the report.
func Machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return fmt.Sprintf("%d CPUs (%s), %s, GOMAXPROCS %d, load %s, %s", runtime.NumCPU(), model, runtime.Version(),
		runtime.GOMAXPROCS(0), load, time.Now().UTC().Format(time.RFC3339))
}

// Waits samples what the PostgreSQL backends of one database are doing (pg_stat_activity)
// every interval until the returned func is called, which returns the tally as printable lines:
// a wall-clock view of the database side that a CPU profile of the client cannot give.
func Waits(ctx context.Context, dialect, where string, interval time.Duration) func() []string {
	if dialect != Postgres {
		return func() []string { return nil }
	}
	db, err := sql.Open("pgx", where)
	if err != nil {
		return func() []string { return []string{err.Error()} }
	}
	db.SetMaxOpenConns(1)
	before, berr := dbStats(ctx, db)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan map[string]int)
	go func() {
		tally := map[string]int{}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			rows, err := db.QueryContext(ctx, `SELECT state, COALESCE(wait_event_type, '-'), COALESCE(wait_event, '-')
				FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`)
			if err == nil {
				for rows.Next() {
					var state, typ, ev string
					if rows.Scan(&state, &typ, &ev) == nil {
						tally[state+" "+typ+":"+ev]++
					}
				}
				rows.Close()
			}
			tally["(samples)"]++
			select {
			case <-ctx.Done():
				done <- tally
				return
			case <-t.C:
			}
		}
	}()
	return func() []string {
		cancel()
		tally := <-done
		defer db.Close()
		samples := tally["(samples)"]
		delete(tally, "(samples)")
		keys := make([]string, 0, len(tally))
		for k := range tally {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int { return tally[b] - tally[a] })
		out := []string{fmt.Sprintf("pg_stat_activity, %d samples, mean backends per sample in each state (wait_event_type:wait_event):", samples)}
		// A backend reports its counts within a second of going idle.
		time.Sleep(1500 * time.Millisecond)
		if after, err := dbStats(context.WithoutCancel(ctx), db); err == nil && berr == nil {
			d := make([]int64, len(after))
			for i := range after {
				d[i] = after[i] - before[i]
			}
			d[0] -= int64(samples) + 1 // this sampler's own transactions
			out = append(out, fmt.Sprintf("pg_stat_database during the run: %d commits, %d rows inserted, %d updated (%d HOT), %d deleted, %d returned, %d fetched",
				d[0], d[1], d[2], d[3], d[4], d[5], d[6]))
		} else {
			out = append(out, fmt.Sprintf("pg_stat_database: %v %v", berr, err))
		}
		for _, k := range keys {
			out = append(out, fmt.Sprintf("  %6.2f  %s", float64(tally[k])/float64(max(samples, 1)), k))
		}
		return out
	}
}

// dbStats are the database's commits and row counts (pg_stat_database), and its tables' HOT
// updates.
func dbStats(ctx context.Context, db *sql.DB) ([]int64, error) {
	v := make([]int64, 7)
	err := db.QueryRowContext(ctx, `SELECT xact_commit, tup_inserted, tup_updated,
		(SELECT COALESCE(SUM(n_tup_hot_upd), 0) FROM pg_stat_user_tables), tup_deleted, tup_returned, tup_fetched
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6])
	return v, err
}
