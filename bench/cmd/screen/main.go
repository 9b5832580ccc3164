// Command screen compares owed's screening throughput with River doing the same work, on the
// same fake model over loopback HTTP, in one run:
//
//   - owed: n pitches are inserted (their trigger owes one screen job each) and
//     scheduler.Content.Sweep settles them all: read the item, charge the budget, ask the model,
//     record the verdict and its event in one transaction (the verdict's trigger deletes the job).
//   - River v0.51.2: the same pitches, one River job each, and a worker that reads the item,
//     charges the budget with owed's atomic UPSERT, asks the model through owed's model client,
//     and records the verdict and the event and completes the job (JobCompleteTx) in one
//     transaction.
//
// Each side gets a fresh database: an SQLite file (WAL, synchronous NORMAL) or a PostgreSQL
// database of its own.
//
//	go run ./cmd/screen -db sqlite -n 20000
//	go run ./cmd/screen -db postgres -n 20000 -river-workers 500 -runs 3
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/owed/owed/bench/internal/harness"
	"github.com/owed/owed/bench/internal/owedside"
	"github.com/owed/owed/bench/internal/riverside"
	"github.com/owed/owed/scheduler"
)

func main() {
	var f harness.Flags
	f.Register(flag.CommandLine, 20000)
	workersFlag := flag.String("workers", strconv.Itoa(scheduler.DefaultConcurrency),
		"owed: jobs one sweep runs at once (OWED_SWEEP_CONCURRENCY; the model cap is set to the same); a comma-separated list runs each, the first paired with River")
	riverWorkers := flag.Int("river-workers", 0, "River: MaxWorkers of its queue (0: 100 on SQLite, 500 on PostgreSQL)")
	riverPG := flag.String("river-pg", riverside.PGX, "River's PostgreSQL driver: pgxv5 or databasesql")
	limit := flag.Int64("limit", 1<<40, "daily model-call budget per author (large: the budget never refuses)")
	proto := flag.String("prototype", "", "also run a what-if prototype (not owed's code) on owed's side: BATCH,INFLIGHT, e.g. 64,4")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up on a side after this long")
	flag.Parse()
	if err := f.Check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *riverWorkers == 0 {
		*riverWorkers = 100
		if f.DB == harness.Postgres {
			*riverWorkers = 500
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var workers []int
	for _, w := range strings.Split(*workersFlag, ",") {
		var n int
		if _, err := fmt.Sscanf(w, "%d", &n); err != nil || n <= 0 {
			fmt.Fprintln(os.Stderr, "-workers: want positive numbers, e.g. 64 or 64,256")
			os.Exit(2)
		}
		workers = append(workers, n)
	}
	var batch, inflight int
	if *proto != "" {
		if _, err := fmt.Sscanf(*proto, "%d,%d", &batch, &inflight); err != nil || batch <= 0 || inflight <= 0 {
			fmt.Fprintln(os.Stderr, "-prototype: want BATCH,INFLIGHT, e.g. 64,4")
			os.Exit(2)
		}
	}
	if err := run(ctx, &f, workers, *riverWorkers, *riverPG, *limit, *timeout, batch, inflight); err != nil {
		fmt.Fprintln(os.Stderr, "screen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, f *harness.Flags, workers []int, riverWorkers int, riverPG string, limit int64, timeout time.Duration,
	batch, inflight int) error {
	dbs, err := harness.NewDatabases(f)
	if err != nil {
		return err
	}
	defer dbs.Close()
	model := harness.StartModel()
	defer model.Close()
	client := model.Client()

	fmt.Printf("owed against River: screening, %s, %d jobs per side over %d authors, fake model at %s\n", f.DB, f.N, f.Authors, model.Fake.URL())
	fmt.Printf("machine: %s\n", harness.Machine())
	var t harness.Table
	var riverName, protoName string
	owedNames := make([]string, len(workers))
	owed := func(k int) func() (harness.Result, error) {
		return func() (harness.Result, error) {
			where, err := dbs.Fresh(ctx, "owed_screen")
			if err != nil {
				return harness.Result{}, err
			}
			r, err := owedside.Screen(ctx, owedside.Config{Dialect: f.DB, Where: where, Conns: f.Conns, Workers: workers[k],
				Timeout: timeout, CPUProfile: f.CPUProfile, Waits: f.Waits, WhatIf: f.WhatIf}, client, f.Authors, f.N, limit)
			owedNames[k] = r.Name
			return r, wrap("owed", err)
		}
	}
	for i := range f.Runs {
		// Alternate which side goes first, so a slow spell on the shared machine does not always
		// land on the same side.
		sides := []func() (harness.Result, error){
			owed(0),
			func() (harness.Result, error) {
				where, err := dbs.Fresh(ctx, "river_screen")
				if err != nil {
					return harness.Result{}, err
				}
				r, err := riverside.Screen(ctx, riverside.Config{Dialect: f.DB, Where: where, PGDriver: riverPG, Conns: f.Conns,
					Workers: riverWorkers, Timeout: timeout, Log: harness.QuietLogger(), Profile: f.RiverProf}, client, f.Authors, f.N, limit)
				riverName = r.Name
				return r, wrap("river", err)
			},
		}
		switch {
		case !f.Owed() && !f.River():
			sides = nil
		case !f.Owed():
			sides = sides[1:]
		case !f.River():
			sides = sides[:1]
		case i%2 == 1:
			sides[0], sides[1] = sides[1], sides[0]
		}
		if f.Owed() {
			for k := 1; k < len(workers); k++ {
				sides = append(sides, owed(k))
			}
		}
		if batch > 0 && f.Prototype() {
			sides = append(sides, func() (harness.Result, error) {
				where, err := dbs.Fresh(ctx, "owed_proto")
				if err != nil {
					return harness.Result{}, err
				}
				prof := ""
				if f.CPUProfile != "" {
					prof = strings.TrimSuffix(f.CPUProfile, ".prof") + "-prototype.prof"
				}
				r, err := owedside.Prototype(ctx, owedside.Config{Dialect: f.DB, Where: where, Conns: f.Conns, Timeout: timeout,
					CPUProfile: prof, Waits: f.Waits, WhatIf: f.WhatIf}, client, f.Authors, f.N, limit, batch, inflight)
				protoName = r.Name
				return r, wrap("prototype", err)
			})
		}
		for _, side := range sides {
			r, err := side()
			if err != nil {
				return err
			}
			fmt.Printf("run %d: %-60s %8.0f jobs/s  %5.0f µs CPU/job (%s)  %s\n", i+1, r.Name, r.Rate(),
				float64(r.CPUPerJob())/float64(time.Microsecond), r.CPUSplit(), r.Elapsed.Round(time.Millisecond))
			t.Add(r)
		}
	}
	var ratios [][2]string
	for _, o := range owedNames {
		ratios = append(ratios, [2]string{o, riverName})
	}
	ratios = append(ratios, [2]string{protoName, riverName})
	t.Print(fmt.Sprintf("screening on %s, median of %d run(s); goal: owed >= 2x River", f.DB, f.Runs), ratios)
	return nil
}

func wrap(side string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", side, err)
	}
	return nil
}
