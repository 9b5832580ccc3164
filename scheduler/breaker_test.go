package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
	"github.com/owed/owed/owedtest/wait"
	"github.com/owed/owed/scheduler"
)

// outageModel is a fake model's hook: while down it answers 503 to every call, counting how
// many it is answering at once; it always counts the calls made for each author (the pitch's
// text starts with "a<author index> ").
type outageModel struct {
	down       atomic.Bool
	inFlight   atomic.Int64
	maxDown    atomic.Int64 // most calls answered at once while down, since the last resetMax
	downCalls  atomic.Int64
	mu         sync.Mutex
	perAuthor  map[string]int64
	retryAfter string
}

func newOutageModel(f *modeltest.Fake) *outageModel {
	o := &outageModel{perAuthor: map[string]int64{}}
	f.Handle(o.handle)
	return o
}

func (o *outageModel) handle(w http.ResponseWriter, r *http.Request) bool {
	body, _ := io.ReadAll(r.Body)
	var req struct{ Subject struct{ Text string } }
	json.Unmarshal(body, &req)
	author, _, _ := strings.Cut(req.Subject.Text, " ")
	o.mu.Lock()
	o.perAuthor[author]++
	o.mu.Unlock()
	if !o.down.Load() {
		return false
	}
	n := o.inFlight.Add(1)
	defer o.inFlight.Add(-1)
	for m := o.maxDown.Load(); n > m && !o.maxDown.CompareAndSwap(m, n); m = o.maxDown.Load() {
	}
	o.downCalls.Add(1)
	time.Sleep(time.Millisecond) // long enough for a second probe, were there one, to overlap
	if o.retryAfter != "" {
		w.Header().Set("Retry-After", o.retryAfter)
	}
	http.Error(w, `{"error":"down"}`, http.StatusServiceUnavailable)
	return true
}

func (o *outageModel) calls(author string) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.perAuthor[author]
}

// maxProbes is how many probes fit in d after the breaker opens: the first after 5 s, then
// doubling to 5 minutes apart.
func maxProbes(d time.Duration) int {
	n, at, wait := 0, time.Duration(0), 5*time.Second
	for at+wait <= d {
		at += wait
		n++
		wait = min(2*wait, 5*time.Minute)
	}
	return n
}

func spentTotal(t testing.TB, s *models.Store) int64 {
	t.Helper()
	var n int64
	if err := s.RawScan(context.Background(), &n, `SELECT COALESCE(SUM(spent), 0) FROM budgets`); err != nil {
		t.Fatal(err)
	}
	return n
}

func modelState(t testing.TB, c *scheduler.Content) scheduler.ModelState {
	t.Helper()
	st, err := c.ModelState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// An outage of 30 simulated minutes with 500 jobs due: once the breaker opens, the model is
// asked only by the probes, one at a time, and nobody is charged for a call not made; the jobs
// put off keep the why of the failure that opened it, with no attempt added. When the model
// answers again the first probe closes the breaker, the backlog drains, every job settles, and
// each author's spend is exactly the calls made for them.
func TestBreakerOutageCostsOnlyTheProbes(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		const items, nAuthors, threshold, slots = 500, 10, 10, 16
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) {
			c.ModelConcurrency, c.ModelBreaker = slots, threshold
		}), withDailyLimit(1000))
		om := newOutageModel(r.model)
		if _, err := r.store.CreateWebhook(r.ctx, "https://hooks.example/model", []string{models.EventModelBreaker}, "whsec_x"); err != nil {
			t.Fatal(err)
		}
		authors := make([]int64, nAuthors)
		for i := range authors {
			authors[i] = r.user(fmt.Sprintf("author-%d", i))
		}
		for n := range items {
			r.pitch(authors[n%nAuthors], fmt.Sprintf("a%d pitch %d", n%nAuthors, n))
		}

		// The model goes down: the first sweep's failures open the breaker.
		om.down.Store(true)
		outageStart := r.clk.Now()
		if _, err := r.content.Sweep(r.ctx, 0); err != nil {
			t.Fatal(err)
		}
		st := modelState(t, r.content)
		atOpen := int64(r.model.Calls())
		if st.State != models.BreakerOpen || st.Failures < threshold || st.NextProbeAt == nil ||
			st.NextProbeAt.UnixMilli() != r.clk.Now().Add(5*time.Second).UnixMilli() {
			t.Fatalf("after %d failed calls the breaker is %+v, want open with its probe in 5 s", atOpen, st)
		}
		if atOpen < threshold || atOpen > threshold+slots {
			t.Fatalf("%d calls before the breaker opened, want %d failures in a row and at most the %d in flight", atOpen, threshold, slots)
		}
		if n := r.countJobs(); n != items {
			t.Fatalf("%d jobs owed, want %d", n, items)
		}
		var notTried int64
		r.store.RawScan(r.ctx, &notTried, `SELECT COUNT(*) FROM content_jobs WHERE attempts = 0 AND why IS NULL AND status IS NULL AND due_at = ?`,
			st.NextProbeAt.UnixMilli())
		if notTried != items-atOpen {
			t.Fatalf("%d jobs put off until the probe, untried (no why of their own), want %d", notTried, items-atOpen)
		}

		// 30 minutes of outage: the periodic sweep every 5 s, an author's view and a write every minute.
		om.maxDown.Store(0)
		written := items
		for step := 1; r.clk.Now().Sub(outageStart) < 30*time.Minute; step++ {
			r.clk.Advance(5 * time.Second)
			if _, err := r.content.Sweep(r.ctx, 0); err != nil {
				t.Fatal(err)
			}
			if step%12 == 0 {
				a := step / 12 % nAuthors
				if _, err := r.content.Sweep(r.ctx, authors[a]); err != nil {
					t.Fatal(err)
				}
				id := r.pitch(authors[a], fmt.Sprintf("a%d written in the outage %d", a, step))
				written++
				if out := <-r.content.RunItem(models.TaskScreen, models.KindPitch, id); out != scheduler.Pending {
					t.Fatalf("a write during the outage: %s, want pending", out)
				}
				j := r.mustJob(models.TaskScreen, models.KindPitch, id)
				if j.Attempts != 0 && !(j.Why != nil && *j.Why == models.WhyUpstream) {
					t.Fatalf("a write during the outage left its job %+v", j)
				}
			}
		}
		probes := int64(r.model.Calls()) - atOpen
		if limit := maxProbes(30 * time.Minute); probes < 5 || probes > int64(limit) {
			t.Fatalf("%d probes in 30 minutes, want between 5 and %d", probes, limit)
		}
		if m := om.maxDown.Load(); m != 1 {
			t.Fatalf("%d probes at once, want one at a time", m)
		}
		calls := int64(r.model.Calls())
		if spent := spentTotal(t, r.store); spent != calls {
			t.Fatalf("budget spent %d, the model received %d calls", spent, calls)
		}
		var attempts int64
		r.store.RawScan(r.ctx, &attempts, `SELECT COALESCE(SUM(attempts), 0) FROM content_jobs`)
		if attempts != calls {
			t.Fatalf("%d attempts counted, %d calls made", attempts, calls)
		}
		t.Logf("outage of 30 min, %d jobs: %d calls to open the breaker, %d probes; %d budget spent", written, atOpen, probes, calls)

		// The model answers again: the next probe closes the breaker and the backlog drains.
		om.down.Store(false)
		returned := r.clk.Now()
		for i := 0; r.countJobs() > 0; i++ {
			if i > 200 {
				t.Fatalf("%d jobs still owed %s after the model came back", r.countJobs(), r.clk.Now().Sub(returned))
			}
			r.clk.Advance(5 * time.Second)
			if _, err := r.content.Sweep(r.ctx, 0); err != nil {
				t.Fatal(err)
			}
		}
		if st := modelState(t, r.content); st.State != models.BreakerClosed || st.Failures != 0 || st.NextProbeAt != nil {
			t.Fatalf("after the model came back the breaker is %+v", st)
		}
		var screened int64
		r.store.RawScan(r.ctx, &screened, `SELECT COUNT(*) FROM screens`)
		if screened != int64(written) {
			t.Fatalf("%d verdicts for %d items", screened, written)
		}
		for i, id := range authors {
			if spent, calls := r.spent(id), om.calls(fmt.Sprintf("a%d", i)); spent != calls {
				t.Errorf("author %d spent %d for %d calls made for them", i, spent, calls)
			}
		}
		if spent, calls := spentTotal(t, r.store), int64(r.model.Calls()); spent != calls {
			t.Errorf("budget spent %d, the model received %d calls", spent, calls)
		}
		var events []string
		r.store.RawScan(r.ctx, &events, `SELECT payload FROM webhook_deliveries WHERE event = 'model.breaker' ORDER BY id`)
		if len(events) != 2 || !strings.Contains(events[0], `"state":"open"`) || !strings.Contains(events[0], `"why":"upstream"`) ||
			!strings.Contains(events[1], `"state":"closed"`) {
			t.Errorf("model.breaker deliveries %q, want one for opening and one for closing", events)
		}
		t.Logf("settled %s of fake clock after the model came back; %d calls and %d spent in all",
			r.clk.Now().Sub(returned), r.model.Calls(), spentTotal(t, r.store))
	})
}

// A probe that fails puts the next one off on the doubling backoff, or as long as the model's
// Retry-After asks; a probe whose author's budget refuses the charge makes no call and leaves
// the probe to the next job.
func TestBreakerProbeBackoffAndRetryAfter(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelBreaker, c.ModelConcurrency = 2, 3 }))
		om := newOutageModel(r.model)
		ann := r.user("ann")
		var pitches []int64
		for n := range 10 {
			pitches = append(pitches, r.pitch(ann, fmt.Sprintf("a0 %d", n)))
		}
		om.down.Store(true)
		r.content.Sweep(r.ctx, 0)
		st := modelState(t, r.content)
		if st.State != models.BreakerOpen {
			t.Fatalf("breaker %+v, want open", st)
		}
		calls := r.model.Calls()
		// Due jobs before the probe is due are put off, nothing asked.
		r.clk.Advance(4 * time.Second)
		r.content.Sweep(r.ctx, 0)
		if r.model.Calls() != calls {
			t.Fatalf("asked before the probe was due")
		}
		// The first probe at 5 s fails: the next in 10 s.
		r.clk.Advance(time.Second)
		r.content.Sweep(r.ctx, 0)
		st = modelState(t, r.content)
		if r.model.Calls() != calls+1 || st.State != models.BreakerOpen || st.NextProbeAt.UnixMilli() != r.clk.Now().Add(10*time.Second).UnixMilli() {
			t.Fatalf("after the first probe: %d calls, %+v; want one call, the next probe in 10 s", r.model.Calls()-calls, st)
		}
		// The model asks for 2 minutes: the probe after waits that long.
		om.retryAfter = "120"
		r.clk.Advance(10 * time.Second)
		r.content.Sweep(r.ctx, 0)
		st = modelState(t, r.content)
		if r.model.Calls() != calls+2 || st.NextProbeAt.UnixMilli() != r.clk.Now().Add(2*time.Minute).UnixMilli() {
			t.Fatalf("after a probe answered Retry-After 120: %d calls, %+v", r.model.Calls()-calls, st)
		}
		// A prober whose budget is spent makes no call; the next job probes.
		om.retryAfter = ""
		bob := r.user("bob")
		r.exec(`INSERT INTO budgets (user_id, day, spent) VALUES (?, ?, 100) ON CONFLICT (user_id, day) DO UPDATE SET spent = 100`,
			ann, models.BudgetDay(r.clk.Now()))
		bp := r.pitch(bob, "a1 bob's")
		r.clk.Advance(2 * time.Minute)
		r.exec(`UPDATE content_jobs SET due_at = ?`, r.nowMs())
		om.down.Store(false)
		annCalls := om.calls("a0")
		if out := r.run(models.TaskScreen, models.KindPitch, pitches[0]); out != scheduler.Pending || om.calls("a0") != annCalls {
			t.Fatalf("ann's probe with her budget spent: %s, %d calls", out, om.calls("a0")-annCalls)
		}
		if st := modelState(t, r.content); st.State != models.BreakerOpen {
			t.Fatalf("the breaker is %+v after a probe that made no call, want open", st)
		}
		if out := r.run(models.TaskScreen, models.KindPitch, bp); out != scheduler.Done {
			t.Fatalf("bob's probe: %s", out)
		}
		if st := modelState(t, r.content); st.State != models.BreakerClosed {
			t.Fatalf("the breaker is %+v after bob's probe", st)
		}
		if om.calls("a1") != 1 || r.spent(bob) != 1 {
			t.Fatalf("bob's probe: %d calls, %d spent", om.calls("a1"), r.spent(bob))
		}
	})
}

// An answer that is not the expected JSON is the item's problem: it never opens the breaker.
func TestBreakerIgnoresUnansweredAndResetsOnSuccess(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelBreaker = 3 }))
		ann := r.user("ann")
		for n := range 8 {
			r.pitch(ann, fmt.Sprintf("p %d", n))
		}
		r.model.Garbage()
		r.content.Sweep(r.ctx, 0)
		if st := modelState(t, r.content); st.State != models.BreakerClosed || st.Failures != 0 || r.model.Calls() != 8 {
			t.Fatalf("after 8 unanswered: %+v, %d calls", st, r.model.Calls())
		}
		// Two failures, then an answer: the count starts again.
		r.model.Reset()
		r.model.FailNext(2, 503, nil)
		p := r.pitch(ann, "q")
		for range 2 {
			r.clk.Advance(time.Hour)
			r.exec(`UPDATE content_jobs SET due_at = ?`, r.nowMs())
			r.run(models.TaskScreen, models.KindPitch, p)
		}
		if st := modelState(t, r.content); st.Failures != 2 {
			t.Fatalf("after two failures: %+v", st)
		}
		r.clk.Advance(time.Hour)
		r.exec(`UPDATE content_jobs SET due_at = ?`, r.nowMs())
		r.run(models.TaskScreen, models.KindPitch, p)
		if st := modelState(t, r.content); st.State != models.BreakerClosed || st.Failures != 0 {
			t.Fatalf("after an answer: %+v", st)
		}
	})
}

// Three replicas on one PostgreSQL database share the breaker: while the model is down they
// send one probe at a time between them, and when it returns every job settles.
func TestBreakerReplicasSendOneProbeAtATime(t *testing.T) {
	t.Parallel()
	base := os.Getenv(owedtest.PostgresEnv)
	if base == "" {
		t.Skip("needs " + owedtest.PostgresEnv + ": replicas share a PostgreSQL database")
	}
	const items, slots, threshold = 300, 16, 10
	url := owedtest.PostgresURL(t, base)
	clk := clocktest.NewFake(owedtest.Start)
	model := modeltest.New(t)
	om := newOutageModel(model)
	var stores []*models.Store
	var replicas []*scheduler.Content
	for i := range 3 {
		s := owedtest.Store(t, url, clk, func(o *models.Options) { o.DailyLimit = 1000 })
		mc := model.Config()
		mc.Timeout = 10 * time.Second
		c := scheduler.NewContent(s, modelclient.New(mc), clk, owedtest.Logger(t), nil, scheduler.ContentConfig{
			Owner: fmt.Sprintf("replica-%d", i), ModelConcurrency: slots, ModelBreaker: threshold})
		stopAtCleanup(t, c)
		stores, replicas = append(stores, s), append(replicas, c)
	}
	ctx := context.Background()
	var authors []int64
	for i := range 4 {
		u, _, err := stores[0].CreateUser(ctx, fmt.Sprintf("author-%d", i), models.RoleAuthor)
		if err != nil {
			t.Fatal(err)
		}
		authors = append(authors, u.ID)
	}
	for n := range items {
		if _, err := stores[0].CreatePitch(ctx, authors[n%4], fmt.Sprintf("a%d %d", n%4, n)); err != nil {
			t.Fatal(err)
		}
	}
	sweepAll := func() {
		var wg sync.WaitGroup
		for _, c := range replicas {
			wg.Go(func() {
				if _, err := c.Sweep(ctx, 0); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}

	om.down.Store(true)
	sweepAll()
	atOpen := int64(model.Calls())
	if st := modelState(t, replicas[2]); st.State != models.BreakerOpen {
		t.Fatalf("after %d failed calls the breaker is %+v", atOpen, st)
	}
	if atOpen > 3*(threshold+slots) {
		t.Fatalf("%d calls before the breaker opened", atOpen)
	}
	om.maxDown.Store(0)
	start := clk.Now()
	for clk.Now().Sub(start) < 30*time.Minute {
		clk.Advance(5 * time.Second)
		sweepAll()
	}
	probes := int64(model.Calls()) - atOpen
	if limit := maxProbes(30 * time.Minute); probes < 5 || probes > int64(limit) {
		t.Fatalf("three replicas sent %d probes in 30 minutes, want between 5 and %d", probes, limit)
	}
	if m := om.maxDown.Load(); m != 1 {
		t.Fatalf("%d probes at once from three replicas, want one at a time", m)
	}
	om.down.Store(false)
	var owed int64
	for i := 0; ; i++ {
		clk.Advance(5 * time.Second)
		sweepAll()
		stores[0].RawScan(ctx, &owed, `SELECT COUNT(*) FROM content_jobs`)
		if owed == 0 {
			break
		}
		if i > 200 {
			t.Fatalf("%d jobs still owed after the model came back", owed)
		}
	}
	for i, c := range replicas {
		if st := modelState(t, c); st.State != models.BreakerClosed {
			t.Errorf("replica %d sees the breaker %+v", i, st)
		}
	}
	if spent, calls := spentTotal(t, stores[0]), int64(model.Calls()); spent != calls {
		t.Errorf("budget spent %d, the model received %d calls", spent, calls)
	}
	t.Logf("three replicas: %d calls to open the breaker, %d probes in 30 minutes, %d calls in all", atOpen, probes, model.Calls())
}

// A burst of 1,000 inline writes (songs, whose scores follow, and pitches) by 20 authors, with
// their views sweeping their jobs and periodic sweeps running all the while: the model never has
// more calls in flight than OWED_MODEL_CONCURRENCY, a score counting as its three, and every
// job settles.
func TestModelCapHoldsUnderABurst(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		const slots, writes, writers, nAuthors = 8, 1000, 32, 20
		env := owedtest.NewEnv(t, db, func(c *app.Config) { c.ModelConcurrency, c.DailyBudget = slots, 10_000 })
		env.Model.Delay(2 * time.Millisecond) // calls overlap, as a real model's do
		env.Model.KeepRequests(false)
		tokens := make([]string, nAuthors)
		for i := range tokens {
			_, tokens[i] = env.User(fmt.Sprintf("author-%d", i), models.RoleAuthor)
		}
		ctx := context.Background()
		var wg sync.WaitGroup
		var failed atomic.Int64
		work := make(chan int, writes)
		for i := range writes {
			work <- i
		}
		close(work)
		for range writers {
			wg.Go(func() {
				for i := range work {
					path, body := "/api/listeners/pitches", map[string]string{"body": fmt.Sprintf("pitch %d", i)}
					if i%4 == 0 {
						path, body = "/api/listeners/songs", map[string]string{"title": fmt.Sprintf("Song %d", i), "code": fmt.Sprintf("s(%d)", i)}
					}
					r := env.Do(http.MethodPost, path, tokens[i%nAuthors], body)
					if r.Status != http.StatusCreated {
						failed.Add(1)
					}
					if i%10 == 0 {
						env.Do(http.MethodGet, "/api/listeners/mine", tokens[i%nAuthors], nil)
					}
				}
			})
		}
		done := make(chan struct{})
		var sweeps sync.WaitGroup
		sweeps.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := env.App.Content.Sweep(ctx, 0); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
		wg.Wait()
		close(done)
		sweeps.Wait()
		if failed.Load() > 0 {
			t.Fatalf("%d writes failed", failed.Load())
		}
		// What the background still runs (scores after writes, authors' sweeps) ends; the sweeps
		// take whatever was left due.
		var owed int64
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := env.App.Content.Sweep(ctx, 0); err != nil {
				t.Fatal(err)
			}
			env.App.Store.RawScan(ctx, &owed, `SELECT COUNT(*) FROM content_jobs`)
			if owed == 0 {
				break
			}
			if time.Now().After(deadline) {
				var rows []struct {
					Task, Why  *string
					Attempts   int
					DueAt      int64  `gorm:"column:due_at"`
					LeaseUntil *int64 `gorm:"column:lease_until"`
				}
				env.App.Store.RawScan(ctx, &rows, `SELECT task, why, attempts, due_at, lease_until FROM content_jobs LIMIT 5`)
				for _, r := range rows {
					t.Logf("owed: %s why=%v attempts=%d due=%v lease=%v now=%v", *r.Task, str(r.Why), r.Attempts, r.DueAt, num(r.LeaseUntil), env.Clock.Now().UnixMilli())
				}
				t.Fatalf("%d jobs still owed after the burst", owed)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if m := env.Model.MaxInFlight(); m > slots || m < slots/2 {
			t.Errorf("at most %d model calls were in flight at once; want the cap %d reached but never passed", m, slots)
		}
		t.Logf("%d writes: %d model calls, at most %d in flight (cap %d)", writes, env.Model.Calls(), env.Model.MaxInFlight(), slots)
	})
}

// A sweep claims no more jobs than there are model slots free: the rest stay unclaimed for
// another replica, not leased here waiting, and nothing is charged before its slot.
func TestSweepClaimsOnlyWhatItCanAsk(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		const slots = 4
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelConcurrency = slots }))
		ann := r.user("ann")
		for n := range 20 {
			r.pitch(ann, fmt.Sprintf("p%d", n))
		}
		release := make(chan struct{})
		r.model.Handle(func(w http.ResponseWriter, req *http.Request) bool {
			<-release
			return false
		})
		done := make(chan error, 1)
		go func() {
			_, err := r.content.Sweep(r.ctx, 0)
			done <- err
		}()
		wait.Until(t, "the model to hold the cap's calls", func() bool { return r.model.InFlight() == slots })
		var leased int64
		r.store.RawScan(r.ctx, &leased, `SELECT COUNT(*) FROM content_jobs WHERE lease_owner IS NOT NULL`)
		if leased != slots || r.spent(ann) != slots {
			t.Errorf("with %d calls in flight the sweep leased %d jobs and charged %d", slots, leased, r.spent(ann))
		}
		if st := modelState(t, r.content); st.InFlight != slots || st.Cap != slots {
			t.Errorf("model state %+v, want %d of %d in flight", st, slots, slots)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if r.countJobs() != 0 || r.spent(ann) != 20 || r.model.MaxInFlight() != slots {
			t.Errorf("after the sweep: %d jobs, %d spent, at most %d in flight", r.countJobs(), r.spent(ann), r.model.MaxInFlight())
		}
	})
}

// An admin's test call (ProbeModel) that gets an answer closes the open breaker, makes the
// jobs it put off due now and wakes the sweep so they run at once; one that finds the model
// still down keeps the breaker open and wakes nothing. (The runner is not started here, so
// the wake waits in the sweep's loop for the test to see.)
func TestAdminProbeWakesTheSweepWhenItClosesTheBreaker(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelBreaker, c.ModelConcurrency = 2, 2 }))
		om := newOutageModel(r.model)
		ann := r.user("ann")
		for n := range 10 {
			r.pitch(ann, fmt.Sprintf("a0 %d", n))
		}
		om.down.Store(true)
		r.content.Sweep(r.ctx, 0)
		if st := modelState(t, r.content); st.State != models.BreakerOpen {
			t.Fatalf("breaker %+v, want open", st)
		}
		putOff := 10 - int(om.downCalls.Load()) // the pitches not tried before it opened
		r.content.TakeSweepWake()               // whatever woke it so far

		p, err := r.content.ProbeModel(r.ctx, nil)
		if err != nil || p.Answered || p.Closed || p.Status != http.StatusServiceUnavailable {
			t.Fatalf("a test call while the model is down: %+v, %v", p, err)
		}
		if r.content.TakeSweepWake() {
			t.Error("a test call that found the model down woke the sweep")
		}
		if _, err := r.content.ProbeModel(r.ctx, nil); !errors.As(err, new(*scheduler.TooSoonError)) {
			t.Errorf("a second test call within 5 s: %v, want too soon", err)
		}

		om.down.Store(false)
		r.clk.Advance(scheduler.ManualProbeGap)
		p, err = r.content.ProbeModel(r.ctx, nil)
		if err != nil || !p.Answered || !p.Closed || p.Why != "" || p.Error != "" {
			t.Fatalf("a test call once the model is back: %+v, %v", p, err)
		}
		if st := modelState(t, r.content); st.State != models.BreakerClosed {
			t.Errorf("breaker %+v after the answer, want closed", st)
		}
		if !r.content.TakeSweepWake() {
			t.Error("closing the breaker did not wake the sweep: the put-off jobs wait for its next entry")
		}
		if n, err := r.content.Sweep(r.ctx, 0); err != nil || n != putOff || putOff == 0 {
			t.Errorf("the woken sweep ran %d jobs (%v), want the %d put off", n, err, putOff)
		}
	})
}

// "In flight" counts the model calls jobs are asking, not the slots claimers hold: slots taken
// before a claim that finds nothing (every sweep and poll under a hold or an outage) are no
// call, so the figure never says "4 of 4 in flight" beside no leased job. A call that is asked
// is one leased job's.
func TestInFlightCountsCallsNotReservedSlots(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		const slots = 4
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.ModelConcurrency = slots }))
		ann := r.user("ann")
		r.pitch(ann, "p")
		release, err := r.content.Reserve(r.ctx, slots)
		if err != nil {
			t.Fatal(err)
		}
		if st := modelState(t, r.content); st.InFlight != 0 || st.Cap != slots {
			t.Errorf("with every slot reserved and no call made: %d of %d in flight, want 0", st.InFlight, st.Cap)
		}
		release()
		answer := make(chan struct{})
		r.model.Handle(func(w http.ResponseWriter, req *http.Request) bool {
			<-answer
			return false
		})
		done := make(chan error, 1)
		go func() {
			_, err := r.content.Sweep(r.ctx, 0)
			done <- err
		}()
		wait.Until(t, "the model to hold the call", func() bool { return r.model.InFlight() == 1 })
		var leased int64
		r.store.RawScan(r.ctx, &leased, `SELECT COUNT(*) FROM content_jobs WHERE lease_owner IS NOT NULL`)
		if st := modelState(t, r.content); st.InFlight != 1 || leased != 1 {
			t.Errorf("one screen asking: %d in flight, %d leased; want 1 and 1", st.InFlight, leased)
		}
		close(answer)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if st := modelState(t, r.content); st.InFlight != 0 {
			t.Errorf("after the answer: %d in flight", st.InFlight)
		}
	})
}
