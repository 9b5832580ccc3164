// Command queue compares owed's queue core with River's no-op jobs, in one run:
//
//   - owed: n due jobs (n pitches; their trigger owes one screen job each), claimed with
//     models.ClaimDue in Sweep's loop shape and completed with no work. -modes says how a job is
//     completed: "delete" (one DELETE per job: claim → complete), "record" (models.RecordScreen
//     per job: owed's real completion, the verdict's trigger deletes the job), and
//     "delete-batch" (a what-if that is not owed's code: one DELETE per claimed batch).
//
//   - River v0.51.2: n no-op jobs with its own benchmark's settings (cmd/river/riverbench:
//     FetchCooldown 2ms, FetchPollInterval 20ms, 2,000 workers), counted by completion events.
//
//     go run ./cmd/queue -db sqlite -n 20000
//     go run ./cmd/queue -db postgres -n 50000 -runs 3
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/owed/owed/bench/internal/harness"
	"github.com/owed/owed/bench/internal/owedside"
	"github.com/owed/owed/bench/internal/riverside"
)

func main() {
	var f harness.Flags
	f.Register(flag.CommandLine, 20000)
	workers := flag.Int("workers", 256, "owed: jobs claimed and completing at once (the sweep's Concurrency)")
	modes := flag.String("modes", "delete,record,delete-batch", "owed completion modes to run, comma-separated")
	inflight := flag.Int("batch-inflight", 2, "owed delete-batch: claim-and-delete loops at once")
	riverWorkers := flag.Int("river-workers", 2000, "River: MaxWorkers (its benchmark uses 2,000)")
	riverPG := flag.String("river-pg", riverside.PGX, "River's PostgreSQL driver: pgxv5 or databasesql")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up on a side after this long")
	flag.Parse()
	if err := f.Check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, &f, *workers, *inflight, strings.Split(*modes, ","), *riverWorkers, *riverPG, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "queue:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, f *harness.Flags, workers, inflight int, modes []string, riverWorkers int, riverPG string, timeout time.Duration) error {
	dbs, err := harness.NewDatabases(f)
	if err != nil {
		return err
	}
	defer dbs.Close()
	fmt.Printf("owed against River: queue core (no work), %s, %d jobs per side\n", f.DB, f.N)
	fmt.Printf("machine: %s\n", harness.Machine())
	var t harness.Table
	var owedNames []string
	riverName := ""
	for i := range f.Runs {
		var sides []func() (harness.Result, error)
		if f.Owed() {
			for _, mode := range modes {
				sides = append(sides, func() (harness.Result, error) {
					where, err := dbs.Fresh(ctx, "owed_queue")
					if err != nil {
						return harness.Result{}, err
					}
					prof := ""
					if f.CPUProfile != "" {
						prof = strings.TrimSuffix(f.CPUProfile, ".prof") + "-" + mode + ".prof"
					}
					r, err := owedside.Queue(ctx, owedside.Config{Dialect: f.DB, Where: where, Conns: f.Conns, Workers: workers,
						Timeout: timeout, CPUProfile: prof, Waits: f.Waits, WhatIf: f.WhatIf, InFlight: inflight}, mode, f.Authors, f.N)
					if err != nil {
						return r, fmt.Errorf("owed %s: %w", mode, err)
					}
					if i == 0 {
						owedNames = append(owedNames, r.Name)
					}
					return r, nil
				})
			}
		}
		if f.River() {
			river := func() (harness.Result, error) {
				where, err := dbs.Fresh(ctx, "river_queue")
				if err != nil {
					return harness.Result{}, err
				}
				r, err := riverside.Noop(ctx, riverside.Config{Dialect: f.DB, Where: where, PGDriver: riverPG, Conns: f.Conns,
					Workers: riverWorkers, Timeout: timeout, Log: harness.QuietLogger(), Profile: f.RiverProf}, f.N)
				if err != nil {
					return r, fmt.Errorf("river: %w", err)
				}
				riverName = r.Name
				return r, nil
			}
			// Alternate River between last and first, so a slow spell on the shared machine
			// does not always land on the same side.
			if i%2 == 1 {
				sides = append([]func() (harness.Result, error){river}, sides...)
			} else {
				sides = append(sides, river)
			}
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
	t.Print(fmt.Sprintf("queue core on %s, median of %d run(s); goal: owed >= 1x River", f.DB, f.Runs), ratios)
	return nil
}
