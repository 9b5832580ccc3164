package models_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// keptFresh is what the kept rows must agree with, computed afresh from the tables: per author
// everything their view shows (and their jobs' count and earliest due time), and the jobs per
// (task, why).
type keptFresh struct {
	view   map[int64]string // per author: a print of every row their view is made of
	jobs   map[int64]int64
	due    map[int64]int64
	counts map[[2]string]int64
	held   string
}

func (f *fixture) fresh() keptFresh {
	f.t.Helper()
	k := keptFresh{view: map[int64]string{}, jobs: map[int64]int64{}, due: map[int64]int64{}, counts: map[[2]string]int64{}}
	add := func(user int64, what string, row any) {
		b, err := json.Marshal(row)
		if err != nil {
			f.t.Fatal(err)
		}
		k.view[user] += what + string(b) + ";"
	}
	scan := func(dest any, q string) {
		f.t.Helper()
		if err := f.store.RawScan(f.ctx, dest, q); err != nil {
			f.t.Fatalf("%s: %v", q, err)
		}
	}
	type itemRow struct {
		UserID    int64   `gorm:"column:user_id"`
		ID        int64   `gorm:"column:id"`
		SongID    *int64  `gorm:"column:song_id"`
		Text      string  `gorm:"column:text"`
		CreatedAt int64   `gorm:"column:created_at"`
		Verdict   *string `gorm:"column:verdict"`
		Conf      *float64
		Art       *float64 `gorm:"column:art"`
		Runs      *string  `gorm:"column:art_runs"`
		Crit      *string  `gorm:"column:criteria"`
		Model     *string  `gorm:"column:model"`
		Rubric    *string  `gorm:"column:rubric"`
	}
	for _, q := range []string{
		`SELECT r.user_id, r.id, r.song_id, r.title AS text, r.created_at, s.verdict, s.confidence AS conf, sc.art, sc.art_runs, sc.criteria, sc.model, sc.rubric
			FROM revisions r LEFT JOIN screens s ON s.kind = 'revision' AND s.item_id = r.id LEFT JOIN scores sc ON sc.revision_id = r.id ORDER BY r.id`,
		`SELECT c.user_id, c.id, c.song_id, c.body AS text, c.created_at, s.verdict, s.confidence AS conf FROM comments c LEFT JOIN screens s ON s.kind = 'comment' AND s.item_id = c.id ORDER BY c.id`,
		`SELECT p.user_id, p.id, p.body AS text, p.created_at, s.verdict, s.confidence AS conf FROM pitches p LEFT JOIN screens s ON s.kind = 'pitch' AND s.item_id = p.id ORDER BY p.id`,
	} {
		var rows []itemRow
		scan(&rows, q)
		for _, r := range rows {
			r2 := r
			add(r.UserID, q[7:9], r2)
			if r.SongID != nil {
				add(r.UserID, "song", *r.SongID)
			}
		}
	}
	var jobs []struct {
		ID       int64   `gorm:"column:id"`
		Task     string  `gorm:"column:task"`
		Kind     string  `gorm:"column:kind"`
		ItemID   int64   `gorm:"column:item_id"`
		UserID   int64   `gorm:"column:user_id"`
		DueAt    int64   `gorm:"column:due_at"`
		Attempts int     `gorm:"column:attempts"`
		Why      *string `gorm:"column:why"`
	}
	scan(&jobs, `SELECT id, task, kind, item_id, user_id, due_at, attempts, why FROM content_jobs ORDER BY id`)
	for _, j := range jobs {
		why := "none"
		if j.Why != nil {
			why = *j.Why
		}
		add(j.UserID, "job", fmt.Sprint(j.ID, j.Task, j.Kind, j.ItemID, j.DueAt, j.Attempts, why))
		k.jobs[j.UserID]++
		if d, ok := k.due[j.UserID]; !ok || j.DueAt < d {
			k.due[j.UserID] = j.DueAt
		}
		k.counts[[2]string{j.Task, why}]++
	}
	var budgets []struct {
		UserID int64  `gorm:"column:user_id"`
		Day    string `gorm:"column:day"`
		Spent  int64  `gorm:"column:spent"`
	}
	scan(&budgets, `SELECT user_id, day, spent FROM budgets ORDER BY user_id, day`)
	for _, b := range budgets {
		add(b.UserID, "budget", b)
	}
	var users []struct {
		ID    int64  `gorm:"column:id"`
		Limit *int64 `gorm:"column:daily_limit"`
	}
	scan(&users, `SELECT id, daily_limit FROM users ORDER BY id`)
	for _, u := range users {
		if u.Limit != nil {
			add(u.ID, "limit", *u.Limit)
		}
	}
	h, err := f.store.Holds(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	k.held = fmt.Sprint(h.Screen, h.Score)
	return k
}

// kept reads the kept rows: per author (and 0, the shared row) version, jobs and earliest due.
type keptRow struct {
	UserID  int64  `gorm:"column:user_id"`
	Version int64  `gorm:"column:version"`
	Jobs    int64  `gorm:"column:jobs"`
	NextDue *int64 `gorm:"column:next_due_at"`
}

func (f *fixture) kept() map[int64]keptRow {
	f.t.Helper()
	var rows []keptRow
	if err := f.store.RawScan(f.ctx, &rows, `SELECT user_id, version, jobs, next_due_at FROM mine_versions`); err != nil {
		f.t.Fatal(err)
	}
	out := map[int64]keptRow{}
	for _, r := range rows {
		out[r.UserID] = r
	}
	return out
}

// TestKeptVersionsAndCounts is a property test: after each of a long run of random changes —
// through the store and by raw SQL, inserts, updates and deletes, claims, charges, limits,
// holds, the retention's pruning — every author whose view changed has a new version (and
// nobody's version goes back), the shared version moves with the holds, and the kept job
// counts (per author, per task and why) equal a fresh count, and the kept bound on the
// earliest due time never passes it.
func TestKeptVersionsAndCounts(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		authors := []int64{f.User("ann"), f.User("bob"), f.User("cy")}
		rng := rand.New(rand.NewPCG(25, 1))
		ids := func(q string, args ...any) []int64 {
			t.Helper()
			var out []int64
			if err := f.store.RawScan(f.ctx, &out, q, args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			return out
		}
		one := func(q string, args ...any) (int64, bool) {
			l := ids(q, args...)
			if len(l) == 0 {
				return 0, false
			}
			return l[rng.IntN(len(l))], true
		}
		ev := func(event, outcome string) models.Event {
			return models.Event{Event: models.Task(event), Outcome: models.EventOutcome(outcome)}
		}
		var claimed []models.Job
		type op struct {
			name string
			do   func(u int64) error
		}
		ops := []op{
			{"create song", func(u int64) error { _, _, err := f.store.CreateSong(f.ctx, u, "s", "c"); return err }},
			{"create revision", func(u int64) error {
				if s, ok := one(`SELECT id FROM songs WHERE user_id = ?`, u); ok {
					_, err := f.store.CreateRevision(f.ctx, u, s, "r", "c")
					return err
				}
				return nil
			}},
			{"create comment", func(u int64) error {
				if s, ok := one(`SELECT id FROM songs`); ok {
					_, err := f.store.CreateComment(f.ctx, u, s, "hi")
					return err
				}
				return nil
			}},
			{"create pitch", func(u int64) error { _, err := f.store.CreatePitch(f.ctx, u, "p"); return err }},
			{"raw pitch", func(u int64) error {
				_, err := f.store.RawExec(f.ctx, `INSERT INTO pitches (user_id, body, created_at) VALUES (?, 'raw', ?)`, u, f.NowMs())
				return err
			}},
			{"record screen", func(u int64) error {
				if id, ok := one(`SELECT item_id FROM content_jobs WHERE task = 'screen' AND kind = 'revision'`); ok {
					v := []models.Verdict{models.VerdictAllow, models.VerdictBlock}[rng.IntN(2)]
					_, err := f.store.RecordScreen(f.ctx, models.KindRevision, id, v, 0.9, ev("screen", string(v)))
					return err
				}
				return nil
			}},
			{"record screen of a pitch", func(u int64) error {
				if id, ok := one(`SELECT item_id FROM content_jobs WHERE task = 'screen' AND kind = 'pitch'`); ok {
					_, err := f.store.RecordScreen(f.ctx, models.KindPitch, id, models.VerdictAllow, 0.8, ev("screen", "allow"))
					return err
				}
				return nil
			}},
			{"raw screen", func(u int64) error {
				if id, ok := one(`SELECT id FROM comments`); ok {
					_, err := f.store.RawExec(f.ctx, `INSERT INTO screens (kind, item_id, verdict, confidence, screened_at) VALUES ('comment', ?, 'block', 0.5, ?)
						ON CONFLICT (kind, item_id) DO UPDATE SET confidence = screens.confidence / 2`, id, f.NowMs())
					return err
				}
				return nil
			}},
			{"record screens at once", func(u int64) error {
				// Concurrent verdicts share a batch: one statement records many items of
				// several authors and kinds (the screens_settle trigger runs once for them).
				var jobs []struct {
					Kind   models.Kind `gorm:"column:kind"`
					ItemID int64       `gorm:"column:item_id"`
				}
				if err := f.store.RawScan(f.ctx, &jobs, `SELECT kind, item_id FROM content_jobs WHERE task = 'screen'`); err != nil {
					return err
				}
				errs := make([]error, len(jobs))
				var wg sync.WaitGroup
				for i, j := range jobs {
					v := []models.Verdict{models.VerdictAllow, models.VerdictBlock}[rng.IntN(2)]
					wg.Go(func() {
						_, errs[i] = f.store.RecordScreen(f.ctx, j.Kind, j.ItemID, v, 0.7, ev("screen", string(v)))
					})
				}
				wg.Wait()
				return errors.Join(errs...)
			}},
			{"raw screens in one statement", func(u int64) error {
				// Every pending screen of several authors and kinds settled by one INSERT,
				// half of them allowed revisions, which owe their scores.
				_, err := f.store.RawExec(f.ctx, `INSERT INTO screens (kind, item_id, verdict, confidence, screened_at)
					SELECT kind, item_id, CASE WHEN item_id % 2 = 0 THEN 'allow' ELSE 'block' END, 0.6, ? FROM content_jobs
					WHERE task = 'screen' ON CONFLICT (kind, item_id) DO NOTHING`, f.NowMs())
				return err
			}},
			{"record scores at once", func(u int64) error {
				var ids []int64
				if err := f.store.RawScan(f.ctx, &ids, `SELECT item_id FROM content_jobs WHERE task = 'score'`); err != nil {
					return err
				}
				errs := make([]error, len(ids))
				var wg sync.WaitGroup
				for i, id := range ids {
					art := rng.Float64()
					wg.Go(func() {
						_, errs[i] = f.store.RecordScore(f.ctx, models.Score{RevisionID: id, Art: art, ArtRuns: []float64{0.1, 0.2, 0.3},
							Criteria: map[string]float64{"x": 1}, Model: "m", Rubric: "r"}, ev("score", "scored"))
					})
				}
				wg.Wait()
				return errors.Join(errs...)
			}},
			{"raw scores in one statement", func(u int64) error {
				_, err := f.store.RawExec(f.ctx, `INSERT INTO scores (revision_id, song_id, art, art_runs, criteria, model, rubric, scored_at)
					SELECT r.id, r.song_id, 0.5, '[0.5]', '{}', 'm', 'r', ? FROM content_jobs j JOIN revisions r ON r.id = j.item_id
					WHERE j.task = 'score' ON CONFLICT (revision_id) DO NOTHING`, f.NowMs())
				return err
			}},
			{"record score", func(u int64) error {
				if id, ok := one(`SELECT item_id FROM content_jobs WHERE task = 'score'`); ok {
					_, err := f.store.RecordScore(f.ctx, models.Score{RevisionID: id, Art: rng.Float64(), ArtRuns: []float64{0.1, 0.2, 0.3},
						Criteria: map[string]float64{"x": 1}, Model: "m", Rubric: "r"}, ev("score", "scored"))
					return err
				}
				return nil
			}},
			{"raw score delete", func(u int64) error {
				if id, ok := one(`SELECT revision_id FROM scores`); ok {
					_, err := f.store.RawExec(f.ctx, `DELETE FROM scores WHERE revision_id = ?`, id)
					return err
				}
				return nil
			}},
			{"raw screen delete", func(u int64) error {
				if id, ok := one(`SELECT item_id FROM screens`); ok {
					_, err := f.store.RawExec(f.ctx, `DELETE FROM screens WHERE item_id = ?`, id)
					return err
				}
				return nil
			}},
			{"claim", func(u int64) error {
				jobs, err := f.store.ClaimDue(f.ctx, 3, time.Minute, "w", u)
				claimed = append(claimed, jobs...)
				return err
			}},
			{"reschedule", func(u int64) error {
				if len(claimed) == 0 {
					return nil
				}
				j := claimed[0]
				claimed = claimed[1:]
				// the whys an attempt stores (held, breaker and unavailable are only shown)
				stored := []models.Why{models.WhyUnreachable, models.WhyUpstream, models.WhyUnanswered, models.WhyBudget, models.WhyBudgetUnavailable}
				why := stored[rng.IntN(len(stored))]
				_, err := f.store.Reschedule(f.ctx, j, f.clk.Now().Add(time.Duration(rng.IntN(120))*time.Minute), why, nil, ev(string(j.Task), "pending"))
				return err
			}},
			{"retry all", func(u int64) error { _, err := f.store.RetryJobs(f.ctx, models.JobFilter{}); return err }},
			{"charge", func(u int64) error {
				_, _, err := f.store.Charge(f.ctx, u, int64(1+rng.IntN(3)), f.clk.Now())
				return err
			}},
			{"daily limit", func(u int64) error {
				var l *int64
				if rng.IntN(3) > 0 {
					n := int64(rng.IntN(50))
					l = &n
				}
				_, err := f.store.SetDailyLimit(f.ctx, u, l)
				return err
			}},
			{"raw daily limit", func(u int64) error {
				_, err := f.store.RawExec(f.ctx, `UPDATE users SET daily_limit = ? WHERE id = ?`, rng.IntN(4), u)
				return err
			}},
			{"holds", func(u int64) error {
				return f.store.SetHolds(f.ctx, models.Holds{Screen: rng.IntN(2) == 0, Score: rng.IntN(3) == 0}, authors[0])
			}},
			{"delete item", func(u int64) error {
				if id, ok := one(`SELECT id FROM pitches WHERE user_id = ?`, u); ok {
					return f.store.DeleteItem(f.ctx, u, models.KindPitch, id)
				}
				return nil
			}},
			{"delete revision", func(u int64) error {
				if id, ok := one(`SELECT id FROM revisions WHERE user_id = ?`, u); ok {
					_, err := f.store.RawExec(f.ctx, `DELETE FROM revisions WHERE id = ?`, id)
					return err
				}
				return nil
			}},
			{"raw song delete", func(u int64) error {
				if id, ok := one(`SELECT id FROM songs`); ok {
					_, err := f.store.RawExec(f.ctx, `DELETE FROM songs WHERE id = ?`, id)
					return err
				}
				return nil
			}},
			{"raw job delete", func(u int64) error {
				if id, ok := one(`SELECT id FROM content_jobs`); ok {
					_, err := f.store.RawExec(f.ctx, `DELETE FROM content_jobs WHERE id = ?`, id)
					return err
				}
				return nil
			}},
			{"raw job due", func(u int64) error {
				if id, ok := one(`SELECT id FROM content_jobs`); ok {
					_, err := f.store.RawExec(f.ctx, `UPDATE content_jobs SET due_at = due_at + ? WHERE id = ?`, rng.IntN(7200000)-3600000, id)
					return err
				}
				return nil
			}},
			{"raw job why", func(u int64) error {
				if id, ok := one(`SELECT id FROM content_jobs`); ok {
					_, err := f.store.RawExec(f.ctx, `UPDATE content_jobs SET why = 'upstream', attempts = attempts + 1 WHERE id = ?`, id)
					return err
				}
				return nil
			}},
			{"raw job moves author", func(u int64) error {
				if id, ok := one(`SELECT id FROM content_jobs WHERE user_id <> ?`, u); ok {
					_, err := f.store.RawExec(f.ctx, `UPDATE content_jobs SET user_id = ? WHERE id = ?`, u, id)
					return err
				}
				return nil
			}},
			{"raw job moves item", func(u int64) error {
				// A revision's job to another revision that owes nothing for its task (the same
				// author's or not).
				id, ok := one(`SELECT id FROM content_jobs WHERE kind = 'revision'`)
				if !ok {
					return nil
				}
				if to, ok := one(`SELECT r.id FROM revisions r, content_jobs j WHERE j.id = ? AND NOT EXISTS (SELECT 1 FROM content_jobs o
					WHERE o.task = j.task AND o.kind = 'revision' AND o.item_id = r.id)`, id); ok {
					_, err := f.store.RawExec(f.ctx, `UPDATE content_jobs SET item_id = ? WHERE id = ?`, to, id)
					return err
				}
				return nil
			}},
			{"raw job id", func(u int64) error {
				// A job's id never changes (migration 0029): the write is refused, on both
				// databases, and nothing it would have moved may move.
				if id, ok := one(`SELECT id FROM content_jobs`); ok {
					_, err := f.store.RawExec(f.ctx, `UPDATE content_jobs SET id = (SELECT MAX(id) + 1 FROM content_jobs) WHERE id = ?`, id)
					if err == nil {
						return fmt.Errorf("job %d's id changed", id)
					}
					if !strings.Contains(err.Error(), "content_jobs.id cannot change") {
						return err
					}
				}
				return nil
			}},
			{"raw job insert", func(u int64) error {
				// A score owed for one of the author's revisions that owes none, as raw SQL may write it.
				_, err := f.store.RawExec(f.ctx, `INSERT INTO content_jobs (task, kind, item_id, user_id, due_at, attempts, why)
					SELECT 'score', 'revision', r.id, r.user_id, ?, 2, 'budget' FROM revisions r
					WHERE r.user_id = ? AND NOT EXISTS (SELECT 1 FROM content_jobs o WHERE o.task = 'score' AND o.kind = 'revision' AND o.item_id = r.id)
						AND NOT EXISTS (SELECT 1 FROM scores sc WHERE sc.revision_id = r.id)
					ORDER BY r.id LIMIT 1`, f.NowMs()+60000, u)
				return err
			}},
			{"raw lease", func(u int64) error {
				// A lease alone is not in the view: no version needs to move.
				_, err := f.store.RawExec(f.ctx, `UPDATE content_jobs SET lease_until = ?, lease_owner = 'x' WHERE user_id = ?`, f.NowMs()+1000, u)
				return err
			}},
			{"raw title", func(u int64) error {
				_, err := f.store.RawExec(f.ctx, `UPDATE revisions SET title = title || 'x' WHERE user_id = ?`, u)
				return err
			}},
			{"raw created_at", func(u int64) error {
				// An item's time is in the view's order: the item moves.
				_, err := f.store.RawExec(f.ctx, `UPDATE pitches SET created_at = created_at - 1000 WHERE user_id = ?`, u)
				return err
			}},
			{"raw comment moves author", func(u int64) error {
				if id, ok := one(`SELECT id FROM comments WHERE user_id <> ?`, u); ok {
					_, err := f.store.RawExec(f.ctx, `UPDATE comments SET user_id = ? WHERE id = ?`, u, id)
					return err
				}
				return nil
			}},
			{"raw id change", func(u int64) error {
				// On SQLite through the rowid's other name, which an UPDATE OF id trigger misses;
				// on PostgreSQL to the sequence's next id, so that later inserts do not collide.
				set := `rowid = (SELECT MAX(id) + 1 FROM pitches)`
				if strings.HasPrefix(db, "postgres") {
					set = `id = nextval(pg_get_serial_sequence('pitches', 'id'))`
				}
				if id, ok := one(`SELECT id FROM pitches WHERE user_id = ?`, u); ok {
					_, err := f.store.RawExec(f.ctx, `UPDATE pitches SET `+set+` WHERE id = ?`, id)
					return err
				}
				return nil
			}},
			{"raw replace", func(u int64) error {
				// SQLite's INSERT OR REPLACE deletes the row it replaces: here another author's
				// pitch becomes u's, later (PostgreSQL has no REPLACE: an upsert that moves it).
				id, ok := one(`SELECT id FROM pitches WHERE user_id <> ?`, u)
				if !ok {
					return nil
				}
				q := `INSERT OR REPLACE INTO pitches (id, user_id, body, created_at) VALUES (?, ?, 'replaced', ?)`
				if strings.HasPrefix(db, "postgres") {
					q = `INSERT INTO pitches (id, user_id, body, created_at) VALUES (?, ?, 'replaced', ?)
						ON CONFLICT (id) DO UPDATE SET user_id = excluded.user_id, body = excluded.body, created_at = excluded.created_at`
				}
				_, err := f.store.RawExec(f.ctx, q, id, u, f.NowMs()+5)
				return err
			}},
			{"raw score update", func(u int64) error {
				if id, ok := one(`SELECT revision_id FROM scores`); ok {
					_, err := f.store.RawExec(f.ctx, `UPDATE scores SET art = art / 2, model = model || 'x' WHERE revision_id = ?`, id)
					return err
				}
				return nil
			}},
			{"raw verdict update", func(u int64) error {
				if id, ok := one(`SELECT item_id FROM screens WHERE kind = 'pitch'`); ok {
					_, err := f.store.RawExec(f.ctx, `UPDATE screens SET verdict = CASE verdict WHEN 'allow' THEN 'block' ELSE 'allow' END WHERE kind = 'pitch' AND item_id = ?`, id)
					return err
				}
				return nil
			}},
			{"prune", func(u int64) error {
				if _, err := f.store.Prune(f.ctx, f.clk.Now(), models.Retention{Events: time.Hour, Deliveries: time.Hour}, 0); err != nil {
					return err
				}
				_, err := f.store.PruneBudgets(f.ctx, f.clk.Now())
				return err
			}},
			{"time", func(u int64) error { f.clk.Advance(time.Duration(rng.IntN(8)) * time.Hour); return nil }},
		}
		steps := 400
		if strings.HasPrefix(db, "postgres") {
			steps = 250
		}
		before, beforeKept := f.fresh(), f.kept()
		seen := map[string]bool{}
		for step := range steps {
			o := ops[rng.IntN(len(ops))]
			u := authors[rng.IntN(len(authors))]
			if err := o.do(u); err != nil && !errors.Is(err, models.ErrNotFound) && !errors.Is(err, models.ErrForbidden) {
				t.Fatalf("step %d %s: %v", step, o.name, err)
			}
			after, afterKept := f.fresh(), f.kept()
			for _, a := range authors {
				b, k := beforeKept[a], afterKept[a]
				if k.Version < b.Version {
					t.Fatalf("step %d %s: author %d's version went back: %d -> %d", step, o.name, a, b.Version, k.Version)
				}
				if after.view[a] != before.view[a] {
					seen[o.name] = true
					if k.Version == b.Version {
						t.Fatalf("step %d %s: author %d's view changed, version stayed %d\nbefore %s\nafter  %s", step, o.name, a, k.Version, before.view[a], after.view[a])
					}
				}
				if k.Jobs != after.jobs[a] {
					t.Fatalf("step %d %s: author %d: kept %d jobs, counted %d", step, o.name, a, k.Jobs, after.jobs[a])
				}
				var due *int64
				if d, ok := after.due[a]; ok {
					due = &d
				}
				// A bound: no later than the earliest due time, and none when nothing is owed.
				if (due == nil) != (k.NextDue == nil) || (due != nil && *due < *k.NextDue) {
					t.Fatalf("step %d %s: author %d: kept bound on the earliest due %v, counted %v", step, o.name, a, k.NextDue, due)
				}
				// What the view reads: whether a job may be due, else when one may come due.
				v, err := f.store.MineVersion(f.ctx, a, f.clk.Now())
				if err != nil {
					t.Fatal(err)
				}
				now := f.clk.Now()
				if w := v.WakeAt(now); due != nil && !v.Due(now) && (w.IsZero() || w.UnixMilli() > *due) {
					t.Fatalf("step %d %s: author %d: next due at %d, view wakes at %v", step, o.name, a, *due, w)
				}
			}
			if after.held != before.held && afterKept[0].Version == beforeKept[0].Version {
				t.Fatalf("step %d %s: holds changed, shared version stayed", step, o.name)
			}
			// A verdict or a score settles its job, however many one statement records.
			if left := ids(`SELECT j.id FROM content_jobs j WHERE (j.task = 'screen' AND EXISTS (SELECT 1 FROM screens s
				WHERE s.kind = j.kind AND s.item_id = j.item_id)) OR (j.task = 'score' AND EXISTS (SELECT 1 FROM scores s WHERE s.revision_id = j.item_id))`); len(left) > 0 {
				t.Fatalf("step %d %s: jobs %v stayed owed after their verdicts or scores", step, o.name, left)
			}
			counts, err := f.store.JobsByTaskWhy(f.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(counts, after.counts) {
				t.Fatalf("step %d %s: kept counts %v, counted %v", step, o.name, counts, after.counts)
			}
			before, beforeKept = after, afterKept
		}
		changed := slices.Sorted(maps.Keys(seen))
		if len(changed) < 15 {
			t.Errorf("only %d kinds of change changed a view: %v", len(changed), changed)
		}
	})
}

// TestCountJobsAnswersFromTheKeptCounts: the admin's totals by task and by author are the kept
// counts, not a count of the job table (a kept row set off by hand shows in them, and only in
// them: a filter the kept counts do not follow counts the table); and on PostgreSQL, whose
// triggers append a row per change, a read past jobCountsFold rows folds them into one per
// (task, why) with the same sums.
func TestCountJobsAnswersFromTheKeptCounts(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann, bob := f.User("ann"), f.User("bob")
		f.bulkPitches(ann, 300)
		f.bulkPitches(bob, 2)
		rows := func() int64 { return f.Count(`SELECT COUNT(*) FROM job_counts`) }
		before := rows()
		got, err := f.store.JobsByTaskWhy(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		fresh := f.fresh().counts
		if fmt.Sprint(got) != fmt.Sprint(fresh) {
			t.Fatalf("kept counts %v, fresh %v", got, fresh)
		}
		if after := rows(); after != int64(len(fresh)) || (strings.HasPrefix(db, "postgres") && before <= 256) {
			t.Errorf("job_counts rows: %d before the read, %d after; want them folded to %d", before, after, len(fresh))
		}
		if again, err := f.store.JobsByTaskWhy(f.ctx); err != nil || fmt.Sprint(again) != fmt.Sprint(fresh) {
			t.Errorf("read after the fold: %v, %v", again, err)
		}

		// Set the kept rows off by hand: the totals the kept counts answer show it.
		f.Exec(`UPDATE job_counts SET n = n + 1000 WHERE task = 'screen'`)
		f.Exec(`UPDATE mine_versions SET jobs = jobs + 7 WHERE user_id = ?`, bob)
		count := func(what string, filter models.JobFilter, want int64) {
			t.Helper()
			if n, err := f.store.CountJobs(f.ctx, filter); err != nil || n != want {
				t.Errorf("%s: %d, %v; want %d", what, n, err, want)
			}
		}
		count("by task (kept)", models.JobFilter{Task: models.TaskScreen}, 302+1000)
		count("all (kept)", models.JobFilter{}, 302+1000)
		count("by author (kept)", models.JobFilter{UserID: bob}, 2+7)
		count("by task and kind (the table)", models.JobFilter{Task: models.TaskScreen, Kind: models.KindPitch}, 302)
		count("by author and task (the table)", models.JobFilter{UserID: bob, Task: models.TaskScreen}, 2)
		count("by author with no kept row", models.JobFilter{UserID: 9999}, 0)
		count("by why (kept)", models.JobFilter{Why: "none"}, 302+1000)
		count("held (kept)", models.JobFilter{Why: models.WhyHeld}, 0)
		// The open breaker's put-off jobs are told apart by time, which no kept count follows.
		earlier := f.clk.Now().Add(-time.Hour)
		// (untried jobs with no why of their own show why breaker then)
		count("by why while the breaker puts jobs off (the table)", models.JobFilter{Why: "none", Deferred: &earlier}, 0)
		count("put off by the breaker (the table)", models.JobFilter{Why: models.WhyBreaker, Deferred: &earlier}, 302)
		count("held while the breaker puts jobs off (kept)", models.JobFilter{Why: models.WhyHeld, Deferred: &earlier}, 0)
		job := f.MustJob(models.TaskScreen, models.KindPitch, f.Count(`SELECT MIN(id) FROM pitches WHERE user_id = ?`, bob))
		count("one job (the table)", models.JobFilter{ID: job.ID}, 1)
		count("by item (the table)", models.JobFilter{ItemID: job.ItemID}, 1)
		count("by state (the table)", models.JobFilter{State: models.JobDue}, 302)
	})
}

// TestOldestDue: the due time of the longest-waiting job due by now, or nil when none is.
func TestOldestDue(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		if at, err := f.store.OldestDue(f.ctx, f.clk.Now()); err != nil || at != nil {
			t.Errorf("no jobs: %v, %v; want nil", at, err)
		}
		first := f.clk.Now()
		f.bulkPitches(f.User("ann"), 2)
		f.clk.Advance(time.Minute)
		f.bulkPitches(f.User("bob"), 1)
		if at, err := f.store.OldestDue(f.ctx, f.clk.Now()); err != nil || at == nil || !at.Equal(first) {
			t.Errorf("oldest due = %v, %v; want %v", at, err, first)
		}
		if at, err := f.store.OldestDue(f.ctx, first.Add(-time.Millisecond)); err != nil || at != nil {
			t.Errorf("as of before any job was due: %v, %v; want nil", at, err)
		}
	})
}
