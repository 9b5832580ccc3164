// Package owedside is owed's side of each comparison, run through owed's own packages: the store
// (models.Open, with its pools and migrations and triggers) and the scheduler's Sweep.
package owedside

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	neturl "net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/owed/owed/bench/internal/harness"
	"github.com/owed/owed/clock"
	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
	"github.com/owed/owed/scheduler"
)

// Config says where and how owed runs.
type Config struct {
	Dialect    string // harness.SQLite or harness.Postgres
	Where      string // a fresh database: SQLite file path or postgres:// URL
	Conns      int    // PostgreSQL MaxConns
	Workers    int    // jobs at once (the sweep's Concurrency)
	Timeout    time.Duration
	CPUProfile string // profile the timed part into this file
	Waits      bool   // PostgreSQL: sample pg_stat_activity during the timed part and print it
	InFlight   int    // queue delete-batch: claim-and-delete loops at once
	WhatIf     []string
}

// What-ifs: database settings owed does not make today, applied to owed's benchmark database
// only, to measure what they would move. Neither changes owed's code.
const (
	// AsyncCommit runs owed's connections with synchronous_commit = off (PostgreSQL): a crash
	// can lose the last few hundred milliseconds of commits, whole transactions only, so a lost
	// verdict's job comes back and is run again; a lost charge is budget not counted.
	AsyncCommit = "async-commit"
	// FillFactor leaves 30% of content_jobs' pages free (PostgreSQL), so a claim's lease update
	// can be a HOT update that writes no index entries.
	FillFactor = "fillfactor"
)

func whatIfName(name string, whatIf []string) string {
	if len(whatIf) == 0 {
		return name
	}
	return name + " [what-if: " + strings.Join(whatIf, "+") + "]"
}

// open opens owed's store on a fresh database and seeds it: authors, and n pitches whose trigger
// owes one screen job each. limit is the authors' default daily limit (0: the store's default).
func open(ctx context.Context, cfg Config, authors, n int, limit int64) (*models.Store, *sql.DB, error) {
	url := harness.OwedURL(cfg.Dialect, cfg.Where)
	if slices.Contains(cfg.WhatIf, AsyncCommit) {
		if cfg.Dialect != harness.Postgres {
			return nil, nil, fmt.Errorf("what-if %s: PostgreSQL only", AsyncCommit)
		}
		u, err := neturl.Parse(url)
		if err != nil {
			return nil, nil, err
		}
		q := u.Query()
		q.Set("synchronous_commit", "off") // a run-time parameter of every connection
		u.RawQuery = q.Encode()
		url = u.String()
	}
	store, err := models.Open(ctx, models.Options{URL: url, MaxConns: cfg.Conns, Clock: clock.Real{}, DailyLimit: limit})
	if err != nil {
		return nil, nil, err
	}
	db, _, err := store.RawPools()
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	if slices.Contains(cfg.WhatIf, FillFactor) {
		if cfg.Dialect != harness.Postgres {
			store.Close()
			return nil, nil, fmt.Errorf("what-if %s: PostgreSQL only", FillFactor)
		}
		if _, err := db.ExecContext(ctx, `ALTER TABLE content_jobs SET (fillfactor = 70)`); err != nil {
			store.Close()
			return nil, nil, err
		}
	}
	if _, err := harness.Seed(ctx, db, cfg.Dialect, authors, n); err != nil {
		store.Close()
		return nil, nil, err
	}
	if got, err := harness.Count(ctx, db, `SELECT count(*) FROM content_jobs WHERE task = 'screen'`); err != nil || got != int64(n) {
		store.Close()
		return nil, nil, fmt.Errorf("owed seed: %d screen jobs owed, want %d (%v)", got, n, err)
	}
	if cfg.Dialect == harness.Postgres {
		// Planner statistics of the freshly filled tables, as autovacuum would give a running
		// system (River's side gets the same). Without them the claim's plan hash-joins a
		// sequential scan of content_jobs on every claim.
		if _, err := db.ExecContext(ctx, `ANALYZE`); err != nil {
			store.Close()
			return nil, nil, err
		}
	}
	return store, db, nil
}

func check(ctx context.Context, db *sql.DB, what string, want map[string]int64) error {
	for q, w := range want {
		if got, err := harness.Count(ctx, db, q); err != nil || got != w {
			return fmt.Errorf("%s check %q: got %d, want %d (%v)", what, q, got, w, err)
		}
	}
	return nil
}

// Screen times scheduler.Content.Sweep settling n pending screen jobs against model.
func Screen(ctx context.Context, cfg Config, model *modelclient.Client, authors, n int, limit int64) (harness.Result, error) {
	res := harness.Result{Name: whatIfName(fmt.Sprintf("owed Sweep (concurrency %d)", cfg.Workers), cfg.WhatIf), Jobs: n}
	store, db, err := open(ctx, cfg, authors, n, limit)
	if err != nil {
		return res, err
	}
	defer store.Close()
	content := scheduler.NewContent(store, model, clock.Real{}, harness.OwedLogger(), nil, scheduler.ContentConfig{
		// The model cap (OWED_MODEL_CONCURRENCY) set to the sweep's concurrency: the bench measures the
		// queue against an instant model, so its workers are what is compared with River's.
		Concurrency: cfg.Workers, ModelConcurrency: cfg.Workers, Owner: "bench"})
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	stop, err := harness.Profile(cfg.CPUProfile)
	if err != nil {
		return res, err
	}
	waits := startWaits(ctx, cfg)
	cpu := harness.MeasureCPU(ctx, cfg.Dialect, cfg.Where)
	start := time.Now()
	ran, err := content.Sweep(ctx, 0)
	res.Elapsed = time.Since(start)
	res.CPU = cpu()
	stop()
	waits()
	if err != nil {
		return res, fmt.Errorf("sweep: %w", err)
	}
	if ran != n {
		return res, fmt.Errorf("sweep ran %d jobs, want %d", ran, n)
	}
	return res, check(context.WithoutCancel(ctx), db, "owed screen", map[string]int64{
		`SELECT count(*) FROM screens`:                int64(n),
		`SELECT count(*) FROM events`:                 int64(n),
		`SELECT COALESCE(sum(spent), 0) FROM budgets`: int64(n),
		`SELECT count(*) FROM content_jobs`:           0,
	})
}

// Queue modes: how a claimed job is completed.
const (
	Delete      = "delete"       // one DELETE of the job per job (the queue core)
	Record      = "record"       // models.RecordScreen per job: verdict + event, the trigger deletes the job
	DeleteBatch = "delete-batch" // what-if, not owed's code: one DELETE per claimed batch
)

// Queue times owed's queue core on n due jobs, no work: jobs are claimed with models.ClaimDue
// and completed as mode says. Delete and Record run in Sweep's own loop shape (claim as many as
// there are free slots, one goroutine per job, at most cfg.Workers at once); DeleteBatch runs
// cfg.InFlight loops that each claim cfg.Workers at a time and delete each batch in one
// statement.
func Queue(ctx context.Context, cfg Config, mode string, authors, n int) (harness.Result, error) {
	res := harness.Result{Name: whatIfName(fmt.Sprintf("owed ClaimDue + %s (%d at once)", mode, cfg.Workers), cfg.WhatIf), Jobs: n}
	store, db, err := open(ctx, cfg, authors, n, 0)
	if err != nil {
		return res, err
	}
	defer store.Close()
	const owner, lease = "bench", 2 * time.Minute
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	var run func(ctx context.Context) (int, error)
	switch mode {
	case Delete:
		run = func(ctx context.Context) (int, error) {
			return sweepShaped(ctx, store, cfg.Workers, owner, lease, func(ctx context.Context, job models.Job) error {
				_, err := store.RawExec(ctx, `DELETE FROM content_jobs WHERE id = ? AND lease_owner = ?`, job.ID, owner)
				return err
			})
		}
	case Record:
		run = func(ctx context.Context) (int, error) {
			return sweepShaped(ctx, store, cfg.Workers, owner, lease, func(ctx context.Context, job models.Job) error {
				conf := 0.9
				ev := models.Event{Event: models.TaskScreen, Kind: job.Kind, ItemID: job.ItemID, UserID: job.UserID,
					Outcome: models.OutcomeAllow, Attempt: job.Attempts, Confidence: &conf}
				ok, err := store.RecordScreen(ctx, job.Kind, job.ItemID, models.VerdictAllow, conf, ev)
				if err == nil && !ok {
					err = fmt.Errorf("job %d: nothing recorded", job.ID)
				}
				return err
			})
		}
	case DeleteBatch:
		loop := func(ctx context.Context) (int, error) {
			ran := 0
			for {
				jobs, err := store.ClaimDue(ctx, cfg.Workers, lease, owner, 0)
				if err != nil || len(jobs) == 0 {
					return ran, err
				}
				ids := make([]int64, len(jobs))
				for i, j := range jobs {
					ids[i] = j.ID
				}
				list, err := json.Marshal(ids)
				if err != nil {
					return ran, err
				}
				if _, err := store.RawExec(ctx, `DELETE FROM content_jobs WHERE `+store.IDIn("id")+` AND lease_owner = ?`, string(list), owner); err != nil {
					return ran, err
				}
				ran += len(jobs)
			}
		}
		run = func(ctx context.Context) (int, error) {
			var wg sync.WaitGroup
			ran := make([]int, max(cfg.InFlight, 1))
			errs := make([]error, len(ran))
			for i := range ran {
				wg.Go(func() { ran[i], errs[i] = loop(ctx) })
			}
			wg.Wait()
			total := 0
			for _, n := range ran {
				total += n
			}
			return total, errors.Join(errs...)
		}
		res.Name = whatIfName(fmt.Sprintf("owed ClaimDue + %s (batches of %d, %d in flight)", mode, cfg.Workers, max(cfg.InFlight, 1)), cfg.WhatIf)
	default:
		return res, fmt.Errorf("unknown mode %q", mode)
	}

	stop, err := harness.Profile(cfg.CPUProfile)
	if err != nil {
		return res, err
	}
	waits := startWaits(ctx, cfg)
	cpu := harness.MeasureCPU(ctx, cfg.Dialect, cfg.Where)
	start := time.Now()
	ran, err := run(ctx)
	res.Elapsed = time.Since(start)
	res.CPU = cpu()
	stop()
	waits()
	if err != nil {
		return res, err
	}
	if ran != n {
		return res, fmt.Errorf("owed queue ran %d jobs, want %d", ran, n)
	}
	want := map[string]int64{`SELECT count(*) FROM content_jobs`: 0}
	if mode == Record {
		want[`SELECT count(*) FROM screens`] = int64(n)
	}
	return res, check(context.WithoutCancel(ctx), db, "owed queue", want)
}

// sweepShaped is scheduler.Content.Sweep's loop with run in place of the content job: claim as many
// due jobs as there are free slots, run each in its own goroutine, until none is due and none
// is running.
func sweepShaped(ctx context.Context, store *models.Store, concurrency int, owner string, lease time.Duration,
	run func(context.Context, models.Job) error) (int, error) {
	finished := make(chan error, concurrency)
	running, ran := 0, 0
	var errs []error
	wait := func() {
		if err := <-finished; err != nil {
			errs = append(errs, err)
		}
		running--
	}
	defer func() {
		for running > 0 {
			wait()
		}
	}()
	for ctx.Err() == nil && len(errs) == 0 {
	drain:
		for running > 0 {
			select {
			case err := <-finished:
				if err != nil {
					errs = append(errs, err)
				}
				running--
			default:
				break drain
			}
		}
		free := concurrency - running
		if free == 0 {
			wait()
			continue
		}
		jobs, err := store.ClaimDue(ctx, free, lease, owner, 0)
		if err != nil {
			return ran, fmt.Errorf("claim: %w", err)
		}
		if len(jobs) == 0 {
			if running == 0 {
				return ran, nil
			}
			wait()
			continue
		}
		ran += len(jobs)
		running += len(jobs)
		for _, job := range jobs {
			go func() { finished <- run(ctx, job) }()
		}
	}
	if len(errs) > 0 {
		return ran, errors.Join(errs...)
	}
	return ran, ctx.Err()
}

func startWaits(ctx context.Context, cfg Config) func() {
	if !cfg.Waits {
		return func() {}
	}
	stop := harness.Waits(ctx, cfg.Dialect, cfg.Where, 20*time.Millisecond)
	return func() {
		for _, line := range stop() {
			fmt.Println(line)
		}
	}
}
