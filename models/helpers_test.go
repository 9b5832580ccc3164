package models_test

import (
	"context"
	"testing"
	"time"

	"github.com/owed/owed/clock"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// fixture is a store on a fresh database with a fake clock at owedtest.Start.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	store *models.Store
	clk   *clock.Fake
}

func newFixture(t *testing.T, databaseURL string, configure ...func(*models.Options)) *fixture {
	t.Helper()
	clk := clock.NewFake(owedtest.Start)
	return &fixture{t: t, ctx: context.Background(), store: owedtest.Store(t, databaseURL, clk, configure...), clk: clk}
}

// dailyLimit sets the store's default daily limit.
func dailyLimit(n int64) func(*models.Options) { return func(o *models.Options) { o.DailyLimit = n } }

func (f *fixture) nowMs() int64 { return f.clk.Now().UnixMilli() }

// user makes an author and returns its id.
func (f *fixture) user(name string) int64 {
	f.t.Helper()
	u, _, err := f.store.CreateUser(f.ctx, name, models.RoleAuthor)
	if err != nil {
		f.t.Fatalf("create user: %v", err)
	}
	return u.ID
}

// exec runs raw SQL on the writer, as any other writer of the database could.
func (f *fixture) exec(q string, args ...any) int64 {
	f.t.Helper()
	n, err := f.store.RawExec(f.ctx, q, args...)
	if err != nil {
		f.t.Fatalf("exec %q: %v", q, err)
	}
	return n
}

// insertID runs a raw INSERT … RETURNING id.
func (f *fixture) insertID(q string, args ...any) int64 {
	f.t.Helper()
	var id int64
	if err := f.store.RawScan(f.ctx, &id, q+" RETURNING id", args...); err != nil {
		f.t.Fatalf("insert %q: %v", q, err)
	}
	if id == 0 {
		f.t.Fatalf("insert %q: no id", q)
	}
	return id
}

// rawSong inserts a song and a revision by raw SQL at the fake now.
func (f *fixture) rawSong(userID int64, title, code string) (songID, revID int64) {
	f.t.Helper()
	songID = f.insertID(`INSERT INTO songs (user_id, title, created_at) VALUES (?, ?, ?)`, userID, title, f.nowMs())
	revID = f.rawRevision(userID, songID, title, code)
	return songID, revID
}

func (f *fixture) rawRevision(userID, songID int64, title, code string) int64 {
	f.t.Helper()
	return f.insertID(`INSERT INTO revisions (song_id, user_id, title, code, created_at) VALUES (?, ?, ?, ?, ?)`,
		songID, userID, title, code, f.nowMs())
}

// jobsOf lists every owed job of an item, screen before score.
func (f *fixture) jobsOf(kind models.Kind, itemID int64) []models.Job {
	f.t.Helper()
	jobs, err := f.store.ListJobs(f.ctx, models.JobFilter{Kind: kind, ItemID: itemID}, 0, 100)
	if err != nil {
		f.t.Fatalf("list jobs: %v", err)
	}
	return jobs
}

// job finds the one job of an item's task; ok is false when there is none.
func (f *fixture) job(task models.Task, kind models.Kind, itemID int64) (models.Job, bool) {
	f.t.Helper()
	jobs, err := f.store.ListJobs(f.ctx, models.JobFilter{Task: task, Kind: kind, ItemID: itemID}, 0, 100)
	if err != nil {
		f.t.Fatalf("list jobs: %v", err)
	}
	switch len(jobs) {
	case 0:
		return models.Job{}, false
	case 1:
		return jobs[0], true
	}
	f.t.Fatalf("%d %s jobs for %s %d, want at most one", len(jobs), task, kind, itemID)
	return models.Job{}, false
}

func (f *fixture) mustJob(task models.Task, kind models.Kind, itemID int64) models.Job {
	f.t.Helper()
	j, ok := f.job(task, kind, itemID)
	if !ok {
		f.t.Fatalf("no %s job for %s %d", task, kind, itemID)
	}
	return j
}

func (f *fixture) noJob(task models.Task, kind models.Kind, itemID int64) {
	f.t.Helper()
	if j, ok := f.job(task, kind, itemID); ok {
		f.t.Fatalf("%s job for %s %d still owed: %+v", task, kind, itemID, j)
	}
}

// countJobs counts every owed job.
func (f *fixture) countJobs() int64 {
	f.t.Helper()
	var n int64
	if err := f.store.RawScan(f.ctx, &n, `SELECT COUNT(*) FROM content_jobs`); err != nil {
		f.t.Fatalf("count jobs: %v", err)
	}
	return n
}

// song reads a song's maintained public flag and art.
func (f *fixture) song(id int64) models.Song {
	f.t.Helper()
	s, err := f.store.SongByID(f.ctx, id)
	if err != nil {
		f.t.Fatalf("song %d: %v", id, err)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func ms(t time.Time) int64 { return t.UnixMilli() }
