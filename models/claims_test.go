package models_test

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

const lease = 2 * time.Minute

// bulkPitches writes n pitches of the user in one raw statement, created at the fake now.
func (f *fixture) bulkPitches(userID int64, n int) {
	f.t.Helper()
	got := f.Exec(`WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?)
		INSERT INTO pitches (user_id, body, created_at) SELECT ?, 'pitch', ? FROM seq`, n, userID, f.NowMs())
	if got != int64(n) {
		f.t.Fatalf("bulk insert wrote %d pitches, want %d", got, n)
	}
}

// Concurrent claimers never hold the same job, and between them take every due job.
func TestClaimConcurrentClaimersNeverShare(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		const jobs, claimers = 500, 8
		f.bulkPitches(f.User("ann"), jobs)

		var mu sync.Mutex
		owner := map[int64]string{}
		var shared []int64
		var wg sync.WaitGroup
		errs := make(chan error, claimers)
		for c := range claimers {
			wg.Go(func() {
				name := fmt.Sprintf("worker-%d", c)
				for {
					got, err := f.store.ClaimDue(f.ctx, 7, lease, name, 0)
					if err != nil {
						errs <- err
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, j := range got {
						if _, dup := owner[j.ID]; dup {
							shared = append(shared, j.ID)
						}
						owner[j.ID] = name
						if j.LeaseOwner == nil || *j.LeaseOwner != name || j.LeaseUntil == nil || j.LeaseUntil.UnixMilli() != f.NowMs()+lease.Milliseconds() {
							errs <- fmt.Errorf("claimed job %+v: want leased to %s until now+2m", j, name)
						}
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if len(shared) > 0 {
			t.Fatalf("%d claims of a job another claimer held, e.g. jobs %v", len(shared), shared[:min(len(shared), 10)])
		}
		if len(owner) != jobs {
			t.Fatalf("claimed %d distinct jobs, want all %d", len(owner), jobs)
		}
		// Every claim holds in the database, with the owner that got it.
		leased, err := owedtest.ListJobs(f.ctx, f.store, models.JobFilter{State: "leased"}, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(leased) != jobs {
			t.Fatalf("leased jobs = %d, want %d", len(leased), jobs)
		}
		owners := map[string]int{}
		for _, j := range leased {
			if *j.LeaseOwner != owner[j.ID] {
				t.Errorf("job %d leased to %s in the database, but %s claimed it", j.ID, *j.LeaseOwner, owner[j.ID])
			}
			owners[*j.LeaseOwner]++
		}
		if again, _ := f.store.ClaimDue(f.ctx, 1000, lease, "late", 0); len(again) != 0 {
			t.Errorf("a late claimer got %d leased jobs", len(again))
		}
		t.Logf("claims per worker: %v", owners)
	})
}

// A lease holds until it runs out; then the job is claimable again, and the worker that lost it
// can no longer reschedule or release it.
func TestClaimExpiredLeaseIsClaimableAgain(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		p, _ := f.store.CreatePitch(f.ctx, ann, "pitch")

		first, err := f.store.ClaimDue(f.ctx, 10, lease, "dead", 0)
		if err != nil || len(first) != 1 || first[0].ItemID != p.ID {
			t.Fatalf("first claim = %+v, %v", first, err)
		}
		if got, _ := f.store.ClaimDue(f.ctx, 10, lease, "other", 0); len(got) != 0 {
			t.Fatalf("claimed while leased: %+v", got)
		}
		if _, ok, _ := f.store.ClaimItem(f.ctx, models.TaskScreen, models.KindPitch, p.ID, lease, "other"); ok {
			t.Fatal("ClaimItem took a leased job")
		}
		f.clk.Advance(lease - time.Millisecond)
		if got, _ := f.store.ClaimDue(f.ctx, 10, lease, "other", 0); len(got) != 0 {
			t.Fatalf("claimed 1ms before the lease ran out: %+v", got)
		}
		f.clk.Advance(time.Millisecond)
		second, err := f.store.ClaimDue(f.ctx, 10, lease, "other", 0)
		if err != nil || len(second) != 1 || second[0].ID != first[0].ID || *second[0].LeaseOwner != "other" {
			t.Fatalf("claim after expiry = %+v, %v; want the same job for other", second, err)
		}
		if second[0].Attempts != 0 {
			t.Errorf("an expired lease counted as an attempt: %+v", second[0])
		}

		// The dead worker comes back: its reschedule and release do nothing to other's claim.
		ok, err := f.store.Reschedule(f.ctx, first[0], f.clk.Now().Add(time.Hour), models.WhyUpstream, ptr(500),
			models.Event{Event: "screen", Kind: models.KindPitch, ItemID: p.ID, UserID: ann, Outcome: "pending"})
		if err != nil || ok {
			t.Errorf("stale reschedule = %v, %v; want no effect", ok, err)
		}
		if err := f.store.ReleaseLease(f.ctx, models.LeasedJobs, first[0].ID, first[0].LeaseOwner, first[0].LeaseUntil); err != nil {
			t.Fatal(err)
		}
		j := f.MustJob(models.TaskScreen, models.KindPitch, p.ID)
		if j.LeaseOwner == nil || *j.LeaseOwner != "other" || j.Attempts != 0 || j.Why != nil {
			t.Errorf("job after stale worker = %+v, want other's lease intact", j)
		}
		if evs, _ := f.store.ListEvents(f.ctx, models.EventFilter{}, 0, 10); len(evs) != 0 {
			t.Errorf("a stale reschedule kept an event: %+v", evs)
		}

		// The holder's own release frees the job at once (its lease end is compared as the
		// column keeps it, in milliseconds).
		if err := f.store.ReleaseLease(f.ctx, models.LeasedJobs, second[0].ID, second[0].LeaseOwner, second[0].LeaseUntil); err != nil {
			t.Fatal(err)
		}
		if j := f.MustJob(models.TaskScreen, models.KindPitch, p.ID); j.LeaseOwner != nil || j.LeaseUntil != nil {
			t.Errorf("job after its holder released it = %+v, want no lease", j)
		}
	})
}

// Only due jobs are claimed, oldest first; a user's claim takes only their jobs.
func TestClaimDueOnlyAndPerUser(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann, bob := f.User("ann"), f.User("bob")
		a1, _ := f.store.CreatePitch(f.ctx, ann, "a1")
		f.clk.Advance(time.Second)
		b1, _ := f.store.CreatePitch(f.ctx, bob, "b1")
		a2, _ := f.store.CreatePitch(f.ctx, ann, "a2")

		// Put a1 off by a minute, as a failed attempt would.
		j, ok, err := f.store.ClaimItem(f.ctx, models.TaskScreen, models.KindPitch, a1.ID, lease, "w")
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		at := f.clk.Now().Add(time.Minute)
		if ok, err := f.store.Reschedule(f.ctx, j, at, models.WhyUnreachable, nil,
			models.Event{Event: "screen", Kind: models.KindPitch, ItemID: a1.ID, UserID: ann, Outcome: "pending", Why: ptr(models.WhyUnreachable)}); !ok || err != nil {
			t.Fatal(ok, err)
		}
		got := f.MustJob(models.TaskScreen, models.KindPitch, a1.ID)
		if got.DueAt.UnixMilli() != ms(at) || got.Attempts != 1 || got.Why == nil || *got.Why != models.WhyUnreachable || got.Status != nil || got.LeaseUntil != nil || got.LeaseOwner != nil {
			t.Fatalf("rescheduled job = %+v, want due at %d, attempt 1, why unreachable, lease freed", got, ms(at))
		}

		annJobs, err := f.store.ClaimDue(f.ctx, 10, lease, "w", ann)
		if err != nil {
			t.Fatal(err)
		}
		if len(annJobs) != 1 || annJobs[0].ItemID != a2.ID {
			t.Fatalf("ann's claim = %+v, want a2 only (a1 is not due, b1 is bob's)", annJobs)
		}
		rest, _ := f.store.ClaimDue(f.ctx, 10, lease, "w", 0)
		if len(rest) != 1 || rest[0].ItemID != b1.ID {
			t.Fatalf("global claim = %+v, want b1 only", rest)
		}

		f.clk.Advance(time.Minute - time.Millisecond)
		if due, _ := f.store.ClaimDue(f.ctx, 10, lease, "w", 0); len(due) != 0 {
			t.Fatalf("claimed before due: %+v", due)
		}
		f.clk.Advance(time.Millisecond)
		due, _ := f.store.ClaimDue(f.ctx, 10, lease, "w", 0)
		if len(due) != 1 || due[0].ItemID != a1.ID || due[0].Attempts != 1 {
			t.Fatalf("claim when due = %+v, want a1 with its attempt", due)
		}

		// A limit takes the oldest due first.
		f.clk.Advance(time.Hour) // every lease above has run out
		ids := []int64{}
		for {
			one, _ := f.store.ClaimDue(f.ctx, 1, lease, "x", 0)
			if len(one) == 0 {
				break
			}
			ids = append(ids, one[0].ItemID)
		}
		if want := []int64{b1.ID, a2.ID, a1.ID}; !slices.Equal(ids, want) {
			t.Errorf("claim order = %v, want by due time then id %v", ids, want)
		}
	})
}

// Releasing leases makes the jobs due again at once, for anyone.
func TestReleaseLeases(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann := f.User("ann")
		f.bulkPitches(ann, 5)
		mine, _ := f.store.ClaimDue(f.ctx, 3, lease, "me", 0)
		theirs, _ := f.store.ClaimDue(f.ctx, 2, lease, "them", 0)
		if len(mine) != 3 || len(theirs) != 2 {
			t.Fatalf("claims = %d, %d", len(mine), len(theirs))
		}
		n, err := f.store.ReleaseLeases(f.ctx, models.LeasedJobs, "me")
		if err != nil || n != 3 {
			t.Fatalf("released = %d, %v; want 3", n, err)
		}
		again, _ := f.store.ClaimDue(f.ctx, 10, lease, "next", 0)
		if len(again) != 3 {
			t.Fatalf("after release, %d claimable, want my 3 (theirs still leased)", len(again))
		}
		for _, j := range again {
			if !slices.ContainsFunc(mine, func(m models.Job) bool { return m.ID == j.ID }) {
				t.Errorf("claimed %d, which was not released", j.ID)
			}
		}
	})
}

// The admin's filters select the right jobs; retry makes waiting jobs due now, leaving leased
// ones alone.
func TestListAndRetryJobs(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		f := newFixture(t, db)
		ann, bob := f.User("ann"), f.User("bob")
		_, rev := f.rawSong(ann, "S", "c")
		pa, _ := f.store.CreatePitch(f.ctx, ann, "p")
		pb, _ := f.store.CreatePitch(f.ctx, bob, "p")
		// pa waits for the budget; pb is leased; rev is simply due.
		j, _, _ := f.store.ClaimItem(f.ctx, models.TaskScreen, models.KindPitch, pa.ID, lease, "w")
		f.store.Reschedule(f.ctx, j, models.BudgetReset(f.clk.Now()), models.WhyBudget, nil, models.Event{Event: "screen", Outcome: "pending"})
		f.store.ClaimItem(f.ctx, models.TaskScreen, models.KindPitch, pb.ID, lease, "w")

		count := func(flt models.JobFilter) []int64 {
			t.Helper()
			jobs, err := owedtest.ListJobs(f.ctx, f.store, flt, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var items []int64
			for _, j := range jobs {
				items = append(items, j.ItemID)
			}
			return items
		}
		for _, c := range []struct {
			name string
			flt  models.JobFilter
			want []int64
		}{
			{"all", models.JobFilter{}, []int64{rev, pa.ID, pb.ID}},
			{"kind", models.JobFilter{Kind: models.KindPitch}, []int64{pa.ID, pb.ID}},
			{"why budget", models.JobFilter{Why: models.WhyBudget}, []int64{pa.ID}},
			{"why none", models.JobFilter{Why: "none"}, []int64{rev, pb.ID}},
			{"user", models.JobFilter{UserID: bob}, []int64{pb.ID}},
			{"due", models.JobFilter{State: "due"}, []int64{rev}},
			{"waiting", models.JobFilter{State: "waiting"}, []int64{pa.ID}},
			{"leased", models.JobFilter{State: "leased"}, []int64{pb.ID}},
			{"task score", models.JobFilter{Task: models.TaskScore}, nil},
		} {
			if got := count(c.flt); !slices.Equal(got, c.want) {
				t.Errorf("%s: items %v, want %v", c.name, got, c.want)
			}
		}
		// Paging by id.
		first, _ := owedtest.ListJobs(f.ctx, f.store, models.JobFilter{}, 0, 2)
		next, _ := owedtest.ListJobs(f.ctx, f.store, models.JobFilter{}, first[1].ID, 2)
		if len(first) != 2 || len(next) != 1 || next[0].ItemID != pb.ID {
			t.Errorf("pages = %+v / %+v", first, next)
		}

		n, err := f.store.RetryJobs(f.ctx, models.JobFilter{Kind: models.KindPitch})
		if err != nil || n != 1 {
			t.Fatalf("retried %d, %v; want the waiting pitch only (the other is leased)", n, err)
		}
		if got := f.MustJob(models.TaskScreen, models.KindPitch, pa.ID); got.DueAt.UnixMilli() != f.NowMs() {
			t.Errorf("retried job due %d, want now %d", got.DueAt.UnixMilli(), f.NowMs())
		}
		if got := f.MustJob(models.TaskScreen, models.KindPitch, pb.ID); got.LeaseOwner == nil {
			t.Errorf("retry touched a leased job: %+v", got)
		}
	})
}

// Both claims are one statement, and a slow one is logged at warn with its placeholders and
// never its arguments (here every statement counts as slow).
func TestClaimsAreLoggedWhenSlow(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		var logs owedtest.LogBuffer
		f := newFixture(t, db, func(o *models.Options) {
			o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			o.SlowStatement = time.Nanosecond
		})
		u := f.User("ann")
		f.bulkPitches(u, 2)
		const owner = "owner-secret-7f3a"
		jobs, err := f.store.ClaimDue(f.ctx, 1, lease, owner, 0)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("ClaimDue: %v, %d jobs", err, len(jobs))
		}
		second, err := f.store.ClaimDue(f.ctx, 1, lease, "other", 0)
		if err != nil || len(second) != 1 {
			t.Fatalf("ClaimDue: %v, %d jobs", err, len(second))
		}
		if _, ok, err := f.store.ClaimItem(f.ctx, second[0].Task, second[0].Kind, second[0].ItemID, lease, owner); err != nil || ok {
			t.Fatalf("ClaimItem of a leased job: ok %v, %v", ok, err)
		}
		f.clk.Advance(lease)
		job, ok, err := f.store.ClaimItem(f.ctx, jobs[0].Task, jobs[0].Kind, jobs[0].ItemID, lease, owner)
		if err != nil || !ok || job.ID != jobs[0].ID || job.LeaseOwner == nil || *job.LeaseOwner != owner {
			t.Fatalf("ClaimItem after the lease: %+v, ok %v, %v", job, ok, err)
		}
		out := logs.String()
		if n := strings.Count(out, "level=WARN"); n < 4 {
			t.Fatalf("%d slow-statement lines for 4 claims:\n%s", n, out)
		}
		if !strings.Contains(out, "UPDATE content_jobs SET lease_until =") {
			t.Errorf("the claim's text is not logged:\n%s", out)
		}
		if strings.Contains(out, owner) {
			t.Errorf("an argument reached the log:\n%s", out)
		}
	})
}

// A claim that is its own transaction lets that commit go without waiting for the disk (a lost
// lease is a job claimed again), and a claim inside a larger transaction leaves the rest of it
// durable.
func TestPostgresClaimAloneSkipsTheDiskWait(t *testing.T) {
	t.Parallel()
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		t.Skip("needs PostgreSQL: set " + owedtest.PostgresEnv)
	}
	// One connection, so that what a claim alone leaves on its connection is what the last
	// check reads.
	f := newFixture(t, owedtest.MigratedPostgresURL(t, base), func(o *models.Options) { o.MaxConns = 1 })
	f.bulkPitches(f.User("ann"), 3)
	writer, _, err := f.store.RawPools()
	if err != nil {
		t.Fatal(err)
	}
	now := f.NowMs()
	commitMode := func(alone bool) (claimed int, mode string) {
		t.Helper()
		tx, err := writer.BeginTx(f.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		rows, err := tx.QueryContext(f.ctx, f.store.ClaimDueSQL(alone), now+lease.Milliseconds(), "test", now, now, 1)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			claimed++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if err := tx.QueryRowContext(f.ctx, `SHOW synchronous_commit`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		return claimed, mode
	}
	if n, mode := commitMode(true); n != 1 || mode != "off" {
		t.Errorf("a claim alone: %d claimed, its transaction's synchronous_commit %q; want 1 and off", n, mode)
	}
	if n, mode := commitMode(false); n != 1 || mode != "on" {
		t.Errorf("a claim in a transaction: %d claimed, synchronous_commit %q; want 1 and on", n, mode)
	}

	// Through the store: a transaction that claims commits durably, and a claim alone leaves
	// no setting behind on the connection.
	err = f.store.WithTx(f.ctx, func(tx *models.Store) error {
		if jobs, err := tx.ClaimDue(f.ctx, 1, lease, "tx", 0); err != nil || len(jobs) != 1 {
			t.Errorf("claim in a transaction = %d jobs, %v; want 1", len(jobs), err)
		}
		var mode string
		if err := tx.RawScan(f.ctx, &mode, `SHOW synchronous_commit`); err != nil || mode != "on" {
			t.Errorf("after a claim in a transaction synchronous_commit = %q, %v; want on", mode, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if jobs, err := f.store.ClaimDue(f.ctx, 10, lease, "alone", 0); err != nil || len(jobs) != 2 {
		t.Fatalf("claim alone = %d jobs, %v; want the 2 left", len(jobs), err)
	}
	var mode string
	if err := f.store.RawScan(f.ctx, &mode, `SHOW synchronous_commit`); err != nil || mode != "on" {
		t.Errorf("after a claim alone the pool's synchronous_commit = %q, %v; want on", mode, err)
	}
}
