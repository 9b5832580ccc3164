package owedside

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/owed/owed/bench/internal/harness"
	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
)

// Prototype is a what-if, NOT owed's code: owed's screen work on owed's own schema and
// triggers, done the way the issue suggests (claims in batches, one transaction that charges a
// batch, the model asked for the whole batch at once, one transaction that records a batch's
// verdicts and events with multi-row statements, statements prepared once), to measure what
// such a change to scheduler.Content and models would move. loops batches are in flight at
// once. Its semantics are the seed's for the path measured here (every charge covered, every
// answer a verdict): the budget is still charged before the model is asked, and a verdict is
// still recorded with its event in one transaction, by (kind, item) exactly once. A refused
// charge or a failed ask, which this benchmark never meets, would go back to the per-job path.
func Prototype(ctx context.Context, cfg Config, model *modelclient.Client, authors, n int, limit int64, batch, loops int) (harness.Result, error) {
	res := harness.Result{Name: fmt.Sprintf("what-if prototype: batches of %d, %d in flight", batch, loops), Jobs: n}
	store, db, err := open(ctx, cfg, authors, n, limit)
	if err != nil {
		return res, err
	}
	defer store.Close()
	_, read, err := store.RawPools()
	if err != nil {
		return res, err
	}
	p := &proto{dialect: cfg.Dialect, store: store, db: db, read: read, model: model, limit: limit, batch: batch,
		stmts: map[string]*sql.Stmt{}}
	defer p.close()
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	stop, err := harness.Profile(cfg.CPUProfile)
	if err != nil {
		return res, err
	}
	waits := startWaits(ctx, cfg)
	cpu := harness.MeasureCPU(ctx, cfg.Dialect, cfg.Where)
	start := time.Now()
	var wg sync.WaitGroup
	ran := make([]int, loops)
	errs := make([]error, loops)
	for i := range loops {
		wg.Go(func() { ran[i], errs[i] = p.loop(ctx) })
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.CPU = cpu()
	stop()
	waits()
	total := 0
	for i := range loops {
		if errs[i] != nil {
			return res, errs[i]
		}
		total += ran[i]
	}
	if total != n {
		return res, fmt.Errorf("prototype ran %d jobs, want %d", total, n)
	}
	return res, check(context.WithoutCancel(ctx), db, "prototype", map[string]int64{
		`SELECT count(*) FROM screens`:                int64(n),
		`SELECT count(*) FROM events`:                 int64(n),
		`SELECT COALESCE(sum(spent), 0) FROM budgets`: int64(n),
		`SELECT count(*) FROM content_jobs`:           0,
	})
}

type proto struct {
	dialect  string
	store    *models.Store
	db, read *sql.DB
	model    *modelclient.Client
	limit    int64
	batch    int
	mu       sync.Mutex
	stmts    map[string]*sql.Stmt
}

func (p *proto) close() {
	for _, s := range p.stmts {
		s.Close()
	}
}

// stmt prepares q once (per pool) and keeps it: SQLite's prepare is a large part of owed's
// per-job cost today, since every statement is prepared anew (the screens insert compiles its
// trigger each time).
func (p *proto) stmt(ctx context.Context, db *sql.DB, q string) (*sql.Stmt, error) {
	q = harness.Placeholders(p.dialect, q)
	key := fmt.Sprintf("%p %s", db, q)
	p.mu.Lock()
	s, ok := p.stmts[key]
	p.mu.Unlock()
	if ok {
		return s, nil
	}
	// Not under the lock: on SQLite, preparing waits for the one writer connection.
	s, err := db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if prev, ok := p.stmts[key]; ok {
		s.Close()
		return prev, nil
	}
	p.stmts[key] = s
	return s, nil
}

// values is a VALUES list of rows rows, each a typed placeholder per column type.
func values(rows int, types ...string) string {
	cols := make([]string, len(types))
	for i, t := range types {
		cols[i] = "CAST(? AS " + t + ")"
	}
	one := "(" + strings.Join(cols, ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(one+", ", rows), ", ")
}

type protoJob struct {
	job     models.Job
	text    string
	reply   modelclient.Reply
	present bool
}

func (p *proto) loop(ctx context.Context) (int, error) {
	ran := 0
	for {
		claimed, err := p.store.ClaimDue(ctx, p.batch, 2*time.Minute, "bench-proto", 0)
		if err != nil || len(claimed) == 0 {
			return ran, err
		}
		if err := p.run(ctx, claimed); err != nil {
			return ran, err
		}
		ran += len(claimed)
	}
}

func (p *proto) run(ctx context.Context, claimed []models.Job) error {
	jobs := make([]*protoJob, len(claimed))
	byID := map[int64]*protoJob{}
	args := make([]any, len(claimed))
	for i, j := range claimed {
		if j.Kind != models.KindPitch {
			return fmt.Errorf("prototype handles pitches only")
		}
		jobs[i] = &protoJob{job: j}
		byID[j.ItemID] = jobs[i]
		args[i] = j.ItemID
	}
	// The items, in one read.
	s, err := p.stmt(ctx, p.read, `SELECT id, body FROM pitches WHERE id IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(args)), ", ")+`)`)
	if err != nil {
		return err
	}
	rows, err := s.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int64
		var text string
		if err := rows.Scan(&id, &text); err != nil {
			rows.Close()
			return err
		}
		byID[id].text, byID[id].present = text, true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}

	// The budget, charged for the whole batch in one statement and one commit: per author, the
	// batch's calls, refused whole when the day's rest cannot cover them.
	now := time.Now()
	perUser := map[int64]int64{}
	var users []int64
	for _, j := range jobs {
		if j.present {
			if perUser[j.job.UserID] == 0 {
				users = append(users, j.job.UserID)
			}
			perUser[j.job.UserID]++
		}
	}
	// In one order, so that batches in flight together lock the budget rows in the same order
	// (unsorted, PostgreSQL finds deadlocks between them).
	slices.Sort(users)
	if len(users) > 0 {
		cargs := []any{}
		for _, u := range users {
			cargs = append(cargs, u, perUser[u])
		}
		cargs = append(cargs, models.BudgetDay(now), p.limit, p.limit)
		s, err := p.stmt(ctx, p.db, `WITH v(user_id, n) AS (VALUES `+values(len(users), "bigint", "bigint")+`)
			INSERT INTO budgets (user_id, day, spent)
			SELECT v.user_id, CAST(? AS text), v.n FROM v
			WHERE v.n <= COALESCE((SELECT daily_limit FROM users WHERE id = v.user_id), CAST(? AS bigint))
			ON CONFLICT (user_id, day) DO UPDATE SET spent = budgets.spent + excluded.spent
			WHERE budgets.spent + excluded.spent <= COALESCE((SELECT daily_limit FROM users WHERE id = budgets.user_id), CAST(? AS bigint))
			RETURNING user_id`)
		if err != nil {
			return err
		}
		rows, err := s.QueryContext(ctx, cargs...)
		if err != nil {
			return fmt.Errorf("charge: %w", err)
		}
		charged := 0
		for rows.Next() {
			charged++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if charged != len(users) {
			return fmt.Errorf("prototype: a charge was refused (not measured here)")
		}
	}

	// The model, asked for the whole batch at once.
	var wg sync.WaitGroup
	for _, j := range jobs {
		if j.present {
			wg.Go(func() {
				j.reply = p.model.Screen(ctx, modelclient.ScreenRequest{Kind: string(j.job.Kind), Subject: modelclient.Subject{Text: j.text}})
			})
		}
	}
	wg.Wait()

	// The verdicts and their events, in one transaction: the verdicts' trigger settles the jobs.
	var vargs []any
	var answered []*protoJob
	at := time.Now().UnixMilli()
	for _, j := range jobs {
		if !j.present {
			continue
		}
		if j.reply.Why != "" || j.reply.Verdict == nil {
			return fmt.Errorf("prototype: model said %q (not measured here)", j.reply.Why)
		}
		answered = append(answered, j)
		vargs = append(vargs, j.job.Kind, j.job.ItemID, j.reply.Verdict.Verdict, j.reply.Verdict.Confidence, at)
	}
	if len(answered) == 0 {
		return nil
	}
	ins, err := p.stmt(ctx, p.db, `WITH v(kind, item_id, verdict, confidence, at) AS (VALUES `+values(len(answered), "text", "bigint", "text", "double precision", "bigint")+`)
		INSERT INTO screens (kind, item_id, verdict, confidence, screened_at)
		SELECT v.kind, v.item_id, v.verdict, v.confidence, v.at
		FROM v WHERE EXISTS (SELECT 1 FROM pitches p WHERE p.id = v.item_id)
		ON CONFLICT (kind, item_id) DO NOTHING RETURNING item_id`)
	if err != nil {
		return err
	}
	// Prepared before the transaction: on SQLite, the transaction holds the one writer
	// connection that preparing would wait for.
	evQuery := func(n int) string {
		return `INSERT INTO events (at, event, kind, item_id, user_id, outcome, why, status, upstream_ms, attempt,
			confidence, art, request_bytes, runs) VALUES ` + values(n, "bigint", "text", "text", "bigint", "bigint", "text", "text",
			"integer", "bigint", "integer", "double precision", "double precision", "bigint", "integer")
	}
	ev, err := p.stmt(ctx, p.db, evQuery(len(answered)))
	if err != nil {
		return err
	}
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	rows, err = tx.StmtContext(ctx, ins).QueryContext(ctx, vargs...)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	var recorded []*protoJob
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		recorded = append(recorded, byID[id])
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(recorded) > 0 {
		var eargs []any
		for _, j := range recorded {
			status, ms, bytes := j.reply.Status, j.reply.UpstreamMs, int64(j.reply.RequestBytes)
			eargs = append(eargs, at, models.TaskScreen, j.job.Kind, j.job.ItemID, j.job.UserID, j.reply.Verdict.Verdict, nil, status,
				ms, j.job.Attempts, j.reply.Verdict.Confidence, nil, bytes, nil)
		}
		if len(recorded) == len(answered) {
			_, err = tx.StmtContext(ctx, ev).ExecContext(ctx, eargs...)
		} else {
			_, err = tx.ExecContext(ctx, harness.Placeholders(p.dialect, evQuery(len(recorded))), eargs...)
		}
		if err != nil {
			return fmt.Errorf("events: %w", err)
		}
	}
	return tx.Commit()
}
