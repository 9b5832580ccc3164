package riverside

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"

	"github.com/owed/owed/bench/internal/harness"
	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
)

// ScreenArgs is one screen job: the item (a pitch) and its author.
type ScreenArgs struct {
	ItemID int64 `json:"item_id"`
	UserID int64 `json:"user_id"`
}

// Kind is River's job kind.
func (ScreenArgs) Kind() string { return "owed_screen" }

// The statements are owed's own (models.ScreenSubject, models.Charge, models.RecordScreen and
// insertEvent), so both sides ask the database for the same work.
const (
	qItem   = `SELECT user_id, '' AS title, body AS text FROM pitches WHERE id = ?`
	qLimit  = `COALESCE((SELECT daily_limit FROM users WHERE id = ?), ?)`
	qCharge = `INSERT INTO budgets (user_id, day, spent) SELECT ?, ?, ? WHERE ? <= ` + qLimit + `
		ON CONFLICT (user_id, day) DO UPDATE SET spent = budgets.spent + excluded.spent
		WHERE budgets.spent + excluded.spent <= ` + qLimit + `
		RETURNING spent`
	qScreen = `INSERT INTO screens (kind, item_id, verdict, confidence, screened_at)
		SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM pitches WHERE id = ?)
		ON CONFLICT (kind, item_id) DO NOTHING`
	qEvent = `INSERT INTO events (at, event, kind, item_id, user_id, outcome, why, status, upstream_ms, attempt,
		confidence, art, request_bytes, runs) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`
)

func chargeArgs(userID, n, limit int64, now time.Time) []any {
	return []any{userID, models.BudgetDay(now), n, n, userID, limit, userID, limit}
}

func screenArgs(itemID int64, v *modelclient.Verdict, now int64) []any {
	return []any{models.KindPitch, itemID, v.Verdict, v.Confidence, now, itemID}
}

func eventArgs(ev *models.Event) []any {
	return []any{ev.At.UnixMilli(), ev.Event, ev.Kind, ev.ItemID, ev.UserID, ev.Outcome, ev.Why, ev.Status, ev.UpstreamMs, ev.Attempt,
		ev.Confidence, ev.Art, ev.RequestBytes, ev.Runs}
}

// app is the worker's database work on one driver.
type app interface {
	item(ctx context.Context, id int64) (userID int64, text string, ok bool, err error)
	charge(ctx context.Context, userID, n, limit int64, now time.Time) (bool, error)
	// record keeps the verdict and its event and completes the job, in one transaction.
	record(ctx context.Context, job *river.Job[ScreenArgs], v *modelclient.Verdict, ev *models.Event) error
}

// sqlApp is app over database/sql (SQLite, or PostgreSQL through pgx's stdlib).
type sqlApp struct {
	dialect  string
	write    *sql.DB
	read     *sql.DB
	complete func(context.Context, *sql.Tx, *river.Job[ScreenArgs]) error
	qItem    string
	qCharge  string
	qScreen  string
	qEvent   string
}

func newSQLApp(dialect string, write, read *sql.DB, complete func(context.Context, *sql.Tx, *river.Job[ScreenArgs]) error) *sqlApp {
	ph := func(q string) string { return harness.Placeholders(dialect, q) }
	return &sqlApp{dialect: dialect, write: write, read: read, complete: complete,
		qItem: ph(qItem), qCharge: ph(qCharge), qScreen: ph(qScreen), qEvent: ph(qEvent)}
}

func (a *sqlApp) item(ctx context.Context, id int64) (int64, string, bool, error) {
	var userID int64
	var title, text string
	err := a.read.QueryRowContext(ctx, a.qItem, id).Scan(&userID, &title, &text)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", false, nil
	}
	return userID, text, err == nil, err
}

func (a *sqlApp) charge(ctx context.Context, userID, n, limit int64, now time.Time) (bool, error) {
	var spent int64
	err := a.write.QueryRowContext(ctx, a.qCharge, chargeArgs(userID, n, limit, now)...).Scan(&spent)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (a *sqlApp) record(ctx context.Context, job *river.Job[ScreenArgs], v *modelclient.Verdict, ev *models.Event) error {
	tx, err := a.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, a.qScreen, screenArgs(job.Args.ItemID, v, ev.At.UnixMilli())...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n > 0 {
		if err := tx.QueryRowContext(ctx, a.qEvent, eventArgs(ev)...).Scan(&ev.ID); err != nil {
			return err
		}
	}
	if err := a.complete(ctx, tx, job); err != nil {
		return err
	}
	return tx.Commit()
}

// pgxApp is app over a pgx pool (riverpgxv5).
type pgxApp struct {
	pool                            *pgxpool.Pool
	qItem, qCharge, qScreen, qEvent string
}

func newPgxApp(pool *pgxpool.Pool) *pgxApp {
	ph := func(q string) string { return harness.Placeholders(harness.Postgres, q) }
	return &pgxApp{pool: pool, qItem: ph(qItem), qCharge: ph(qCharge), qScreen: ph(qScreen), qEvent: ph(qEvent)}
}

func (a *pgxApp) item(ctx context.Context, id int64) (int64, string, bool, error) {
	var userID int64
	var title, text string
	err := a.pool.QueryRow(ctx, a.qItem, id).Scan(&userID, &title, &text)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", false, nil
	}
	return userID, text, err == nil, err
}

func (a *pgxApp) charge(ctx context.Context, userID, n, limit int64, now time.Time) (bool, error) {
	var spent int64
	err := a.pool.QueryRow(ctx, a.qCharge, chargeArgs(userID, n, limit, now)...).Scan(&spent)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (a *pgxApp) record(ctx context.Context, job *river.Job[ScreenArgs], v *modelclient.Verdict, ev *models.Event) error {
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	tag, err := tx.Exec(ctx, a.qScreen, screenArgs(job.Args.ItemID, v, ev.At.UnixMilli())...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() > 0 {
		if err := tx.QueryRow(ctx, a.qEvent, eventArgs(ev)...).Scan(&ev.ID); err != nil {
			return err
		}
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// screenWorker does owed's screen work as a River worker: read the item, charge the author's
// budget, ask the model over HTTP, then record the verdict and its event and complete the job in
// one transaction. Failures are returned, and River retries them with its own backoff.
type screenWorker struct {
	river.WorkerDefaults[ScreenArgs]
	app      app
	model    *modelclient.Client
	limit    int64
	total    int64
	done     atomic.Int64
	finished chan struct{}
}

func (w *screenWorker) Work(ctx context.Context, job *river.Job[ScreenArgs]) error {
	userID, text, ok, err := w.app.item(ctx, job.Args.ItemID)
	if err != nil {
		return fmt.Errorf("read item: %w", err)
	}
	if !ok {
		return nil // gone
	}
	now := time.Now()
	if ok, err := w.app.charge(ctx, userID, 1, w.limit, now); err != nil {
		return fmt.Errorf("charge: %w", err)
	} else if !ok {
		return river.JobSnooze(models.BudgetReset(now).Sub(now))
	}
	reply := w.model.Screen(ctx, modelclient.ScreenRequest{Kind: string(models.KindPitch), Subject: modelclient.Subject{Text: text}})
	if reply.Why != "" {
		return fmt.Errorf("model: %s (status %d)", reply.Why, reply.Status)
	}
	if reply.Verdict == nil {
		return errors.New("model: no verdict")
	}
	status, upstreamMs, bytes := reply.Status, reply.UpstreamMs, int64(reply.RequestBytes)
	ev := &models.Event{At: time.Now(), Event: models.TaskScreen, Kind: models.KindPitch, ItemID: job.Args.ItemID,
		UserID: userID, Outcome: models.EventOutcome(reply.Verdict.Verdict), Status: &status, UpstreamMs: &upstreamMs, Attempt: job.Attempt - 1,
		Confidence: &reply.Verdict.Confidence, RequestBytes: &bytes}
	if err := w.app.record(ctx, job, reply.Verdict, ev); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if w.done.Add(1) == w.total {
		close(w.finished)
	}
	return nil
}

// Screen seeds authors and n pitches in the fresh database cfg.Where, inserts one River job per
// pitch, then times River working them all with workers asking model. limit is the daily
// budget per author.
func Screen(ctx context.Context, cfg Config, model *modelclient.Client, authors, n int, limit int64) (harness.Result, error) {
	res := harness.Result{Name: "River " + label(cfg), Jobs: n}
	p, setup, err := open(ctx, cfg)
	if err != nil {
		return res, err
	}
	defer p.close()
	if err := harness.AppSchema(ctx, setup, cfg.Dialect); err != nil {
		return res, fmt.Errorf("app schema: %w", err)
	}
	items, err := harness.Seed(ctx, setup, cfg.Dialect, authors, n)
	if err != nil {
		return res, err
	}
	complete := func(ctx context.Context, tx *sql.Tx, job *river.Job[ScreenArgs]) error {
		var err error
		if cfg.Dialect == harness.SQLite {
			_, err = river.JobCompleteTx[*riversqlite.Driver](ctx, tx, job)
		} else {
			_, err = river.JobCompleteTx[*riverdatabasesql.Driver](ctx, tx, job)
		}
		return err
	}
	err = withDriver(cfg, p,
		func(d *riversqlite.Driver) error {
			res.Elapsed, res.CPU, err = screen(ctx, cfg, d, newSQLApp(cfg.Dialect, p.write, p.read, complete), model, items, limit)
			return err
		},
		func(d *riverdatabasesql.Driver) error {
			res.Elapsed, res.CPU, err = screen(ctx, cfg, d, newSQLApp(cfg.Dialect, p.write, p.read, complete), model, items, limit)
			return err
		},
		func(d *riverpgxv5.Driver) error {
			res.Elapsed, res.CPU, err = screen(ctx, cfg, d, newPgxApp(p.pgx), model, items, limit)
			return err
		})
	if err != nil {
		return res, err
	}
	for q, want := range map[string]int64{
		`SELECT count(*) FROM screens`:                              int64(n),
		`SELECT count(*) FROM events`:                               int64(n),
		`SELECT COALESCE(sum(spent), 0) FROM budgets`:               int64(n),
		`SELECT count(*) FROM river_job WHERE state = 'completed'`:  int64(n),
		`SELECT count(*) FROM river_job WHERE state <> 'completed'`: 0,
	} {
		if got, err := harness.Count(ctx, setup, q); err != nil || got != want {
			return res, fmt.Errorf("river screen check %q: got %d, want %d (%v)", q, got, want, err)
		}
	}
	return res, nil
}

func screen[TTx any](ctx context.Context, cfg Config, driver riverdriver.Driver[TTx], a app, model *modelclient.Client,
	items [][2]int64, limit int64) (time.Duration, harness.CPU, error) {
	if err := migrate(ctx, driver); err != nil {
		return 0, harness.CPU{}, fmt.Errorf("river migrate: %w", err)
	}
	w := &screenWorker{app: a, model: model, limit: limit, total: int64(len(items)), finished: make(chan struct{})}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(driver, clientConfig(cfg, workers))
	if err != nil {
		return 0, harness.CPU{}, err
	}
	params := make([]river.InsertManyParams, len(items))
	for i, it := range items {
		params[i] = river.InsertManyParams{Args: ScreenArgs{ItemID: it[0], UserID: it[1]}}
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
	var waitErr error
	select {
	case <-w.finished:
	case <-time.After(cfg.Timeout):
		waitErr = fmt.Errorf("river screen: %d of %d jobs done after %s", w.done.Load(), len(items), cfg.Timeout)
	case <-ctx.Done():
		waitErr = ctx.Err()
	}
	elapsed := time.Since(start)
	used := cpu()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return elapsed, used, errors.Join(waitErr, client.Stop(stopCtx))
}

func label(cfg Config) string {
	if cfg.Dialect == harness.SQLite {
		return fmt.Sprintf("(riversqlite, %d workers)", cfg.Workers)
	}
	d := "riverpgxv5"
	if cfg.PGDriver == DatabaseSQL {
		d = "riverdatabasesql"
	}
	return fmt.Sprintf("(%s, %d workers)", d, cfg.Workers)
}
