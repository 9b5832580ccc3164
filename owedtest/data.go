package owedtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest/clocktest"
)

// Data is a migrated store on a test's own database with a fake clock, and the store-level
// helpers the database packages' fixtures share: users, raw SQL, and the owed jobs, events
// and budgets a test checks. Every helper fails the test on an error.
type Data struct {
	T     testing.TB
	Ctx   context.Context
	Store *models.Store
	Clock *clocktest.Fake
}

// NewData opens a store on databaseURL (see Dialects) with a fake clock at Start; configure
// may change the store's other options (the default daily limit).
func NewData(t testing.TB, databaseURL string, configure ...func(*models.Options)) *Data {
	t.Helper()
	clk := clocktest.NewFake(Start)
	return &Data{T: t, Ctx: context.Background(), Store: Store(t, databaseURL, clk, configure...), Clock: clk}
}

// DailyLimit sets the store's default daily limit (an option of NewData and Store).
func DailyLimit(n int64) func(*models.Options) { return func(o *models.Options) { o.DailyLimit = n } }

// With is d reporting to t (a subtest's).
func (d *Data) With(t testing.TB) *Data {
	c := *d
	c.T = t
	return &c
}

// NowMs is the fake clock's now in Unix milliseconds, as the tables keep times.
func (d *Data) NowMs() int64 { return d.Clock.Now().UnixMilli() }

// User makes an author and returns its id. User names are unique regardless of case: on a
// database where the name is taken (subtests that share one), the user is NAME-2, NAME-3, ….
func (d *Data) User(name string) int64 {
	d.T.Helper()
	u, _, err := d.Store.CreateUser(d.Ctx, name, models.RoleAuthor)
	for n := 2; errors.Is(err, models.ErrNameTaken) && n < 100; n++ {
		u, _, err = d.Store.CreateUser(d.Ctx, fmt.Sprintf("%s-%d", name, n), models.RoleAuthor)
	}
	if err != nil {
		d.T.Fatalf("create user %s: %v", name, err)
	}
	return u.ID
}

// Exec runs raw SQL on the writer, as any other writer of the database could, and returns the
// rows it changed.
func (d *Data) Exec(q string, args ...any) int64 {
	d.T.Helper()
	n, err := d.Store.RawExec(d.Ctx, q, args...)
	if err != nil {
		d.T.Fatalf("exec %q: %v", q, err)
	}
	return n
}

// InsertID runs a raw INSERT … RETURNING id and returns the id.
func (d *Data) InsertID(q string, args ...any) int64 {
	d.T.Helper()
	var id int64
	if err := d.Store.RawScan(d.Ctx, &id, q+" RETURNING id", args...); err != nil || id == 0 {
		d.T.Fatalf("insert %q: id %d, %v", q, id, err)
	}
	return id
}

// Count runs a COUNT-like query.
func (d *Data) Count(q string, args ...any) int64 {
	d.T.Helper()
	return Count(d.T, d.Store, q, args...)
}

// Count runs a COUNT-like query on s, failing t on an error.
func Count(t testing.TB, s *models.Store, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := s.RawScan(context.Background(), &n, q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// CountJobs counts every owed job.
func (d *Data) CountJobs() int64 {
	d.T.Helper()
	return d.Count(`SELECT COUNT(*) FROM content_jobs`)
}

// Jobs lists every owed job of an item, screen before score.
func (d *Data) Jobs(kind models.Kind, itemID int64) []models.Job {
	d.T.Helper()
	jobs, err := ListJobs(d.Ctx, d.Store, models.JobFilter{Kind: kind, ItemID: itemID}, 0, 100)
	if err != nil {
		d.T.Fatalf("list jobs: %v", err)
	}
	return jobs
}

// Job finds the one owed job of an item's task; ok is false when there is none.
func (d *Data) Job(task models.Task, kind models.Kind, itemID int64) (models.Job, bool) {
	d.T.Helper()
	jobs, err := ListJobs(d.Ctx, d.Store, models.JobFilter{Task: task, Kind: kind, ItemID: itemID}, 0, 100)
	if err != nil {
		d.T.Fatalf("list jobs: %v", err)
	}
	switch len(jobs) {
	case 0:
		return models.Job{}, false
	case 1:
		return jobs[0], true
	}
	d.T.Fatalf("%d %s jobs for %s %d, want at most one", len(jobs), task, kind, itemID)
	return models.Job{}, false
}

// MustJob is the owed job of an item's task, failing the test when there is none.
func (d *Data) MustJob(task models.Task, kind models.Kind, itemID int64) models.Job {
	d.T.Helper()
	j, ok := d.Job(task, kind, itemID)
	if !ok {
		d.T.Fatalf("no %s job for %s %d", task, kind, itemID)
	}
	return j
}

// NoJob fails the test when an item's task is still owed.
func (d *Data) NoJob(task models.Task, kind models.Kind, itemID int64) {
	d.T.Helper()
	if j, ok := d.Job(task, kind, itemID); ok {
		d.T.Fatalf("%s job for %s %d still owed: %+v", task, kind, itemID, j)
	}
}

// Events lists an item's events, newest first.
func (d *Data) Events(kind models.Kind, itemID int64) []models.Event {
	d.T.Helper()
	evs, err := d.Store.ListEvents(d.Ctx, models.EventFilter{Kind: kind, ItemID: itemID}, 0, 100)
	if err != nil {
		d.T.Fatalf("events: %v", err)
	}
	return evs
}

// LastEvent is an item's newest event, failing the test when it has none.
func (d *Data) LastEvent(kind models.Kind, itemID int64) models.Event {
	d.T.Helper()
	evs := d.Events(kind, itemID)
	if len(evs) == 0 {
		d.T.Fatalf("no event for %s %d", kind, itemID)
	}
	return evs[0]
}

// Spent is what an author has spent of today's budget (by the fake clock).
func (d *Data) Spent(userID int64) int64 {
	d.T.Helper()
	n, err := d.Store.Spent(d.Ctx, userID, d.Clock.Now())
	if err != nil {
		d.T.Fatalf("spent: %v", err)
	}
	return n
}

// ListJobs pages through owed jobs by id after the id afterID, as the admin's list reads them.
func ListJobs(ctx context.Context, s *models.Store, f models.JobFilter, afterID int64, limit int) ([]models.Job, error) {
	var after *models.JobCursor
	if afterID > 0 {
		after = &models.JobCursor{ID: afterID}
	}
	rows, err := s.ListJobRows(ctx, f, models.JobsByID, after, limit)
	jobs := make([]models.Job, len(rows))
	for i, r := range rows {
		jobs[i] = r.Job
	}
	return jobs, err
}

// Mine is an author's whole view: every item, newest first, with its owed jobs.
func Mine(ctx context.Context, s *models.Store, userID int64) ([]models.MineItem, error) {
	items, _, err := s.MinePage(ctx, userID, models.MineFilter{Limit: math.MaxInt32})
	return items, err
}
