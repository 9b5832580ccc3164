package scheduler_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/owed/owed/metrics"
	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
	"github.com/owed/owed/scheduler"
)

// rig is a content runner on a fresh database, with a fake clock at owedtest.Start and a fake
// model over real HTTP.
type rig struct {
	*owedtest.Data
	t       testing.TB
	ctx     context.Context
	store   *models.Store
	clk     *clocktest.Fake
	model   *modeltest.Fake
	content *scheduler.Content
}

type rigOption func(*rigConfig)

type rigConfig struct {
	content      scheduler.ContentConfig
	dailyLimit   int64 // the store's default daily limit (0: models.DefaultDailyLimit)
	noModel      bool
	modelTimeout time.Duration
	metrics      *metrics.Metrics
	logger       *slog.Logger
}

// withDailyLimit sets the store's default daily limit.
func withDailyLimit(n int64) rigOption { return func(c *rigConfig) { c.dailyLimit = n } }

func withConfig(f func(*scheduler.ContentConfig)) rigOption {
	return func(c *rigConfig) { f(&c.content) }
}

func withoutModel() rigOption { return func(c *rigConfig) { c.noModel = true } }

func withModelTimeout(d time.Duration) rigOption { return func(c *rigConfig) { c.modelTimeout = d } }

// withLogger gives the runner l to log to (the rig's default logs errors to the test's log).
func withLogger(l *slog.Logger) rigOption { return func(c *rigConfig) { c.logger = l } }

// withMetrics gives the runner m to count into (the rig's default is none).
func withMetrics(m *metrics.Metrics) rigOption { return func(c *rigConfig) { c.metrics = m } }

func newRig(t testing.TB, databaseURL string, opts ...rigOption) *rig {
	t.Helper()
	cfg := rigConfig{content: scheduler.ContentConfig{Owner: "test-worker"}, modelTimeout: 10 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	data := owedtest.NewData(t, databaseURL, owedtest.DailyLimit(cfg.dailyLimit))
	store, clk := data.Store, data.Clock
	model := modeltest.New(t)
	var client *modelclient.Client
	if !cfg.noModel {
		mc := model.Config()
		mc.Timeout = cfg.modelTimeout
		client = modelclient.New(mc)
	}
	logger := cfg.logger
	if logger == nil {
		logger = owedtest.Logger(t)
	}
	c := scheduler.NewContent(store, client, clk, logger, cfg.metrics, cfg.content)
	stopAtCleanup(t, c)
	return &rig{Data: data, t: t, ctx: data.Ctx, store: store, clk: clk, model: model, content: c}
}

// contentLogging is a second runner on the rig's store, clock and model, with cfg, whose log
// lines (JSON) the test reads from logs.
func (r *rig) contentLogging(cfg scheduler.ContentConfig) (c *scheduler.Content, logs *syncBuffer) {
	logs = &syncBuffer{}
	c = scheduler.NewContent(r.store, modelclient.New(r.model.Config()), r.clk, jsonLog(logs), nil, cfg)
	stopAtCleanup(r.t, c)
	return c, logs
}

// stopAtCleanup stops c when the test ends, giving its runs 5 s.
func stopAtCleanup(t testing.TB, c *scheduler.Content) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Stop(ctx)
	})
}

// jsonLog is a logger writing JSON lines to logs.
func jsonLog(logs *syncBuffer) *slog.Logger { return slog.New(slog.NewJSONHandler(logs, nil)) }

// with is the rig reporting to t (a subtest's).
func (r *rig) with(t testing.TB) *rig {
	c := *r
	c.t, c.Data = t, r.Data.With(t)
	return &c
}

// The store fixture's helpers (owedtest.Data) under the names the scheduler's tests use.

func (r *rig) nowMs() int64                         { return r.NowMs() }
func (r *rig) user(name string) int64               { r.t.Helper(); return r.User(name) }
func (r *rig) exec(q string, args ...any)           { r.t.Helper(); r.Exec(q, args...) }
func (r *rig) insertID(q string, args ...any) int64 { r.t.Helper(); return r.InsertID(q, args...) }
func (r *rig) countJobs() int64                     { r.t.Helper(); return r.CountJobs() }
func (r *rig) spent(userID int64) int64             { r.t.Helper(); return r.Spent(userID) }

func (r *rig) events(kind models.Kind, itemID int64) []models.Event {
	r.t.Helper()
	return r.Events(kind, itemID)
}

func (r *rig) lastEvent(kind models.Kind, itemID int64) models.Event {
	r.t.Helper()
	return r.LastEvent(kind, itemID)
}

func (r *rig) job(task models.Task, kind models.Kind, itemID int64) (models.Job, bool) {
	r.t.Helper()
	return r.Job(task, kind, itemID)
}

func (r *rig) mustJob(task models.Task, kind models.Kind, itemID int64) models.Job {
	r.t.Helper()
	return r.MustJob(task, kind, itemID)
}

func (r *rig) noJob(task models.Task, kind models.Kind, itemID int64) {
	r.t.Helper()
	r.NoJob(task, kind, itemID)
}

func (r *rig) pitch(userID int64, body string) int64 {
	r.t.Helper()
	p, err := r.store.CreatePitch(r.ctx, userID, body)
	if err != nil {
		r.t.Fatalf("pitch: %v", err)
	}
	return p.ID
}

func (r *rig) song(userID int64, title, code string) (songID, revID int64) {
	r.t.Helper()
	s, rev, err := r.store.CreateSong(r.ctx, userID, title, code)
	if err != nil {
		r.t.Fatalf("song: %v", err)
	}
	return s.ID, rev.ID
}

// allowedRevision makes a song whose revision is already allowed, so it owes only its score.
func (r *rig) allowedRevision(userID int64, title, code string) (songID, revID int64) {
	r.t.Helper()
	songID, revID = r.song(userID, title, code)
	r.Exec(`INSERT INTO screens (kind, item_id, verdict, confidence, screened_at) VALUES ('revision', ?, 'allow', 0.9, ?)`, revID, r.NowMs())
	return songID, revID
}

// claim leases the job of one item's task to the runner's owner, as the runner's claimers do.
func (r *rig) claim(task models.Task, kind models.Kind, itemID int64) models.Job {
	r.t.Helper()
	j, ok, err := r.store.ClaimItem(r.ctx, task, kind, itemID, r.content.Config().Lease, r.content.Config().Owner)
	if err != nil || !ok {
		r.t.Fatalf("claim %s %s %d: ok=%v err=%v", task, kind, itemID, ok, err)
	}
	return j
}

// run claims the item's job and runs it, failing the test on an error.
func (r *rig) run(task models.Task, kind models.Kind, itemID int64) scheduler.Outcome {
	r.t.Helper()
	out, err := r.content.Run(r.ctx, r.claim(task, kind, itemID))
	if err != nil {
		r.t.Fatalf("run %s %s %d: %v", task, kind, itemID, err)
	}
	return out
}

// wantPending checks a rescheduled job: why, attempts, due time and status recorded, lease freed.
func wantPending(t testing.TB, j models.Job, why models.Why, attempts int, dueAt time.Time, status *int) {
	t.Helper()
	if j.Why == nil || *j.Why != why {
		t.Errorf("job why = %v, want %s", str(j.Why), why)
	}
	if j.Attempts != attempts {
		t.Errorf("job attempts = %d, want %d", j.Attempts, attempts)
	}
	if j.DueAt.UnixMilli() != dueAt.UnixMilli() {
		t.Errorf("job due at %v, want %v", j.DueAt.UTC(), dueAt.UTC())
	}
	if !eqPtr(j.Status, status) {
		t.Errorf("job status = %v, want %v", num(j.Status), num(status))
	}
	if j.LeaseUntil != nil || j.LeaseOwner != nil {
		t.Errorf("job lease not freed: until %v, owner %v", j.LeaseUntil, str(j.LeaseOwner))
	}
}

// wantEvent checks an attempt's event against the fields that must be set; nil pointers in want
// must be null in got.
func wantEvent(t testing.TB, got, want models.Event) {
	t.Helper()
	ok := got.Event == want.Event && got.Kind == want.Kind && got.ItemID == want.ItemID && got.UserID == want.UserID &&
		got.Outcome == want.Outcome && eqPtr(got.Why, want.Why) && eqPtr(got.Status, want.Status) &&
		got.Attempt == want.Attempt && eqPtr(got.Confidence, want.Confidence) && eqPtr(got.Art, want.Art) &&
		eqPtr(got.RequestBytes, want.RequestBytes) && eqPtr(got.Runs, want.Runs) && (want.At.IsZero() || got.At.Equal(want.At))
	if !ok {
		t.Errorf("event =\n  %s\nwant\n  %s", fmtEvent(got), fmtEvent(want))
	}
}

func fmtEvent(e models.Event) string {
	return "event=" + string(e.Event) + " kind=" + string(e.Kind) + " item=" + itoa(e.ItemID) + " user=" + itoa(e.UserID) +
		" outcome=" + string(e.Outcome) + " why=" + str(e.Why) + " status=" + num(e.Status) + " attempt=" + itoa(int64(e.Attempt)) +
		" confidence=" + num(e.Confidence) + " art=" + num(e.Art) + " requestBytes=" + num(e.RequestBytes) +
		" runs=" + num(e.Runs) + " upstreamMs=" + num(e.UpstreamMs) + " at=" + itoa(e.At.UnixMilli())
}

func eqPtr[T comparable](a, b *T) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func ptr[T any](v T) *T { return &v }

func str[T ~string](p *T) string {
	if p == nil {
		return "null"
	}
	return string(*p)
}

func num[T int | int64 | float64](p *T) string {
	if p == nil {
		return "null"
	}
	return fmtAny(*p)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func fmtAny(v any) string { return fmt.Sprint(v) }
