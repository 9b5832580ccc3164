package riverside

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"

	"github.com/owed/owed/bench/internal/harness"
)

// NoopArgs and NoopWorker are River's own benchmark job (cmd/river/riverbench): no work.
type NoopArgs struct {
	Num int `json:"num"`
}

// Kind is River's job kind.
func (NoopArgs) Kind() string { return "benchmark" }

type noopWorker struct {
	river.WorkerDefaults[NoopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[NoopArgs]) error { return nil }

// Noop times River working n no-op jobs, inserted beforehand, the way River's own benchmark
// does in its burn-down mode (river bench --num-total-jobs): its fetch settings, cfg.Workers
// workers (its benchmark uses 2,000), and a job counted when its completion event arrives, that
// is after River's completer has written it.
func Noop(ctx context.Context, cfg Config, n int) (harness.Result, error) {
	res := harness.Result{Name: "River no-op " + label(cfg), Jobs: n}
	p, setup, err := open(ctx, cfg)
	if err != nil {
		return res, err
	}
	defer p.close()
	err = withDriver(cfg, p,
		func(d *riversqlite.Driver) error { res.Elapsed, res.CPU, err = noop(ctx, cfg, d, n); return err },
		func(d *riverdatabasesql.Driver) error { res.Elapsed, res.CPU, err = noop(ctx, cfg, d, n); return err },
		func(d *riverpgxv5.Driver) error { res.Elapsed, res.CPU, err = noop(ctx, cfg, d, n); return err })
	if err != nil {
		return res, err
	}
	if got, err := harness.Count(ctx, setup, `SELECT count(*) FROM river_job WHERE state = 'completed'`); err != nil || got != int64(n) {
		return res, fmt.Errorf("river no-op check: %d completed, want %d (%v)", got, n, err)
	}
	return res, nil
}

func noop[TTx any](ctx context.Context, cfg Config, driver riverdriver.Driver[TTx], n int) (time.Duration, harness.CPU, error) {
	if err := migrate(ctx, driver); err != nil {
		return 0, harness.CPU{}, fmt.Errorf("river migrate: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	client, err := river.NewClient(driver, clientConfig(cfg, workers))
	if err != nil {
		return 0, harness.CPU{}, err
	}
	events, cancelSub := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: n + 1000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer cancelSub()
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: NoopArgs{Num: i}}
	}
	if err := insertAll(ctx, client, params); err != nil {
		return 0, harness.CPU{}, err
	}
	if err := analyze(ctx, cfg, driver.GetExecutor()); err != nil {
		return 0, harness.CPU{}, err
	}
	stopProfile, err := harness.Profile(cfg.Profile)
	if err != nil {
		return 0, harness.CPU{}, err
	}
	defer stopProfile()
	cpu := harness.MeasureCPU(ctx, cfg.Dialect, cfg.Where)
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return 0, harness.CPU{}, err
	}
	var last time.Time
	var waitErr error
	timeout := time.After(cfg.Timeout)
	for done := 0; done < n && waitErr == nil; {
		select {
		case ev := <-events:
			if ev.Kind != river.EventKindJobCompleted {
				waitErr = fmt.Errorf("river no-op job %d: %s", ev.Job.ID, ev.Kind)
			}
			done++
			last = time.Now()
		case <-timeout:
			waitErr = fmt.Errorf("river no-op: %d of %d jobs done after %s", done, n, cfg.Timeout)
		case <-ctx.Done():
			waitErr = ctx.Err()
		}
	}
	used := cpu()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return last.Sub(start), used, errors.Join(waitErr, client.Stop(stopCtx))
}
