package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"
)

// DefaultLease is how long a claim holds a leased row (a content job, a webhook delivery, the
// backfill queue) unless OWED_LEASE says otherwise: long enough for one attempt, short enough
// that the work of a process that died is soon due again.
const DefaultLease = 2 * time.Minute

// errStarted is Start called on a runner that was already started or stopped.
var errStarted = errors.New("already started or stopped")

// runner is the lifecycle every background service of the scheduler shares (content jobs,
// webhook deliveries, the backfill), after River's startstop services:
//
//   - start runs its loops; each makes a pass at once, then whenever woken (by work made due
//     now, or by its entry on the process's Schedule: robfig/cron), until the start context
//     ends or the runner stops;
//   - Go runs work in the background under the runner's lifetime (tracked, so Stop waits for
//     it);
//   - Stop claims nothing more (quit is closed; passes and loops return once what they run has
//     finished), waits for the loops and the tracked work until its context ends, then cancels
//     what is still running, and at last frees every lease the process still holds (release),
//     so another replica takes that work at once instead of when the leases run out.
//
// The lease owner is the process's, one for every runner (see App): a lease names the process
// that holds it, and each runner releases only the rows of its own table.
type runner struct {
	name    string
	log     *slog.Logger
	release func(ctx context.Context) (int64, error) // frees the owner's leases; nil: none

	mu       sync.Mutex
	started  bool
	stopping bool
	quit     chan struct{}   // closed by Stop: claim nothing more
	base     context.Context // work runs under it; cancelled when Stop's grace ends
	cancel   context.CancelFunc
	// stopLoops cancels the loops' context (set by start). It is cancelled before base, so a
	// loop whose pass fails because its work was cut short sees its own context ended first.
	stopLoops context.CancelFunc
	wg        sync.WaitGroup // loops and tracked work
}

func newRunner(name string, log *slog.Logger, release func(ctx context.Context) (int64, error)) *runner {
	base, cancel := context.WithCancel(context.Background())
	return &runner{name: name, log: log, release: release, quit: make(chan struct{}), base: base, cancel: cancel}
}

// start runs loops in the background until ctx ends or Stop; it refuses a second start, and a
// start after Stop.
func (r *runner) start(ctx context.Context, loops ...*loop) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.stopping {
		return fmt.Errorf("%s: %w", r.name, errStarted)
	}
	r.started = true
	ctx, cancel := context.WithCancel(ctx)
	r.stopLoops = cancel
	unlink := context.AfterFunc(r.base, cancel)
	var running sync.WaitGroup
	for _, l := range loops {
		r.wg.Add(1)
		running.Add(1)
		go func() {
			defer r.wg.Done()
			defer running.Done()
			l.run(ctx, r.quit, r.log)
		}()
	}
	go func() { running.Wait(); unlink(); cancel() }()
	return nil
}

// Go runs fn in the background under the runner's lifetime, unless it is stopping; it reports
// whether fn was started. fn's context is cancelled when Stop's grace ends.
func (r *runner) Go(fn func(ctx context.Context)) bool {
	ctx, done, ok := r.join(r.base)
	if !ok {
		return false
	}
	go func() {
		defer done()
		fn(ctx)
	}()
	return true
}

// join is the one way into a runner for work that is not one of its loops (Go, and a pass a
// caller runs itself, as Deliveries.RunDue): it counts the work as something Stop waits for,
// unless the runner is stopping (ok false), and returns ctx cut short when Stop's grace ends.
// The caller calls done, once, when the work is over.
func (r *runner) join(ctx context.Context) (run context.Context, done func(), ok bool) {
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		return nil, nil, false
	}
	r.wg.Add(1)
	r.mu.Unlock()
	run, cancel := context.WithCancel(ctx)
	unlink := context.AfterFunc(r.base, cancel)
	return run, func() { unlink(); cancel(); r.wg.Done() }, true
}

// cutShort cancels the work under way without waiting for it (a runner whose work resumes
// anywhere from where its rows stand, as the backfill's batches do, stops this way).
func (r *runner) cutShort() { r.cancelAll() }

// cancelAll cancels the loops' context, then the work's. The loops' is also cancelled when
// base is, but by context.AfterFunc in a goroutine of its own, which a pass that fails at
// once (its attempt cut short) could outrun and report a stop as a failure.
func (r *runner) cancelAll() {
	r.mu.Lock()
	stop := r.stopLoops
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
	r.cancel()
}

// Stop claims nothing more, lets the loops and the work in flight finish until ctx ends, then
// cancels what is left and waits for it, and frees every lease this process still holds on
// the runner's table. It may be called more than once, and without start.
func (r *runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	if !r.stopping {
		r.stopping = true
		close(r.quit)
	}
	r.mu.Unlock()
	finished := make(chan struct{})
	go func() { r.wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		r.cancelAll()
		<-finished
	}
	r.cancelAll()
	defer r.log.Debug("runner stopped", "runner", r.name) // the shutdown's order, as it ran
	if r.release == nil {
		return nil
	}
	n, err := r.release(context.WithoutCancel(ctx))
	if n > 0 {
		r.log.Info("released leases", "runner", r.name, "rows", n)
	}
	if err != nil {
		return fmt.Errorf("%s: release leases: %w", r.name, err)
	}
	return nil
}

// loop is one of a runner's loops. It has no timer of its own: it passes when woken, by work
// made due now (Wake) or by its entry on the process's Schedule (tick).
type loop struct {
	name    string
	pass    func(ctx context.Context) error // looks for due work and runs it
	wake    chan struct{}
	passing atomic.Bool // a pass is under way
}

func newLoop(name string, pass func(ctx context.Context) error) *loop {
	return &loop{name: name, pass: pass, wake: make(chan struct{}, 1)}
}

// Wake makes the loop pass now (or after the pass under way, or at its next start when it is
// not running yet). It never blocks.
func (l *loop) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// tick is the loop's cron entry: it wakes the loop unless a pass is under way, so a pass that
// outlasts its period is not followed by a pile of passes (cron's SkipIfStillRunning, applied
// to the pass the entry wakes rather than to the wake itself, which returns at once). A pass
// drains everything due, so a skipped tick loses nothing.
func (l *loop) tick(context.Context) {
	if !l.passing.Load() {
		l.Wake()
	}
}

// run passes at once, then whenever woken, until ctx ends or quit is closed.
func (l *loop) run(ctx context.Context, quit <-chan struct{}, log *slog.Logger) {
	for {
		l.passing.Store(true)
		err := l.pass(ctx)
		l.passing.Store(false)
		if err != nil && ctx.Err() == nil {
			log.Error(l.name, "err", err)
		}
		if !l.wait(ctx, quit) {
			return
		}
	}
}

// wait waits for a wake, and reports whether to pass again (not when ctx ended or quit was
// closed meanwhile).
func (l *loop) wait(ctx context.Context, quit <-chan struct{}) bool {
	select {
	case <-ctx.Done():
	case <-quit:
	case <-l.wake:
	}
	return ctx.Err() == nil && !isClosed(quit)
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Schedule is the process's periodic work, on robfig/cron: one entry per period, each waking a
// runner's loop (the content sweep, the backfill queue and deletes, the webhook deliveries) or
// running a chore itself (the retention pruner, the optimize). Periods are wall time whatever
// clock decides what is due: they are how often a process looks, not when work falls due.
// Work made due now need not wait for an entry: the deliveries and the backfill are also
// woken at once (Wake), and a write or an author's view claims its own content jobs.
type Schedule struct {
	cron   *cron.Cron
	base   context.Context // chores run under it; cancelled when Stop's grace ends
	cancel context.CancelFunc
	log    *slog.Logger

	mu      sync.Mutex
	entries []scheduled
}

type scheduled struct {
	name  string
	every time.Duration
	id    cron.EntryID
}

// ScheduleEntry is one entry of a Schedule as it stands: its name and period, when it runs
// next (zero until the schedule starts) and when it last ran (zero before its first run).
type ScheduleEntry struct {
	Name  string
	Every time.Duration
	Next  time.Time
	Prev  time.Time
}

// every is a cron schedule of a fixed period, to the nanosecond (cron's own @every rounds to
// whole seconds, and tests use shorter periods).
type every time.Duration

func (e every) Next(t time.Time) time.Time { return t.Add(time.Duration(e)) }

// NewSchedule makes an empty schedule; entries run only after Start. A chore still running when
// its next tick comes is skipped (cron's SkipIfStillRunning), and a panic in one is logged.
func NewSchedule(log *slog.Logger) *Schedule {
	if log == nil {
		log = slog.Default()
	}
	cl := cronLog{log}
	base, cancel := context.WithCancel(context.Background())
	return &Schedule{cron: cron.New(cron.WithLogger(cl), cron.WithChain(cron.Recover(cl), cron.SkipIfStillRunning(cl))),
		base: base, cancel: cancel, log: log}
}

// Every adds an entry that runs job every period (the first one period after Start); job's
// context is cancelled when Stop's grace ends.
func (s *Schedule) Every(name string, period time.Duration, job func(ctx context.Context)) error {
	if period <= 0 {
		return fmt.Errorf("schedule %s: period %s is not positive", name, period)
	}
	id := s.cron.Schedule(every(period), cron.FuncJob(func() { job(s.base) }))
	s.mu.Lock()
	s.entries = append(s.entries, scheduled{name: name, every: period, id: id})
	s.mu.Unlock()
	return nil
}

// Start runs the entries in the background.
func (s *Schedule) Start() { s.cron.Start() }

// Stop runs no entry more and waits for the chores running until ctx ends, then cancels them
// and waits for them to return. It may be called more than once, and without Start.
func (s *Schedule) Stop(ctx context.Context) error {
	done := s.cron.Stop().Done()
	select {
	case <-done:
	case <-ctx.Done():
		s.cancel()
		<-done
	}
	s.cancel()
	s.log.Debug("schedule stopped") // the shutdown's order, as it ran
	return nil
}

// Entries lists the entries in the order they were added, each with its next and last run.
func (s *Schedule) Entries() []ScheduleEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ScheduleEntry, 0, len(s.entries))
	for _, e := range s.entries {
		ce := s.cron.Entry(e.id)
		out = append(out, ScheduleEntry{Name: e.name, Every: e.every, Next: ce.Next, Prev: ce.Prev})
	}
	return out
}

// cronLog sends cron's own log lines to slog: its errors (a panic in a chore) as errors, the
// rest (each tick, each skip) at debug.
type cronLog struct{ log *slog.Logger }

func (l cronLog) Info(msg string, kv ...any) { l.log.Debug("cron: "+msg, kv...) }
func (l cronLog) Error(err error, msg string, kv ...any) {
	l.log.Error("cron: "+msg, append(kv, "err", err)...)
}

// pool claims rows of one leased table into its free slots and runs each claimed row in its
// own goroutine, after River's producer: every claim asks for as many rows as slots are free,
// so a claim never takes a row that would only wait here for a slot (another replica with room
// takes it instead), and a row that finishes frees its slot for the next claim at once.
type pool[T any] struct {
	slots int             // rows run at once, at most
	quit  <-chan struct{} // closed: claim nothing more (what runs finishes)
	// idle, when set, is asked before a claim while nothing runs; false ends the pass without
	// the claim (a read is cheaper than a claim's write).
	idle func(ctx context.Context) (bool, error)
	// claim leases up to free due rows and returns those to run; claimed is how many rows it
	// took (a row it took and let go at once is not run): zero means none was due.
	claim func(ctx context.Context, free int) (run []T, claimed int, err error)
	run   func(ctx context.Context, row T) // runs one claimed row to its end
}

// drain claims and runs due rows until none is due (or ctx ends, or quit is closed), and waits
// for the rows it runs; it returns how many it ran. Rows its work makes due are run too; rows it
// puts off are not due again within the pass, so it ends.
func (p pool[T]) drain(ctx context.Context) (int, error) {
	finished := make(chan struct{}, p.slots)
	running, ran := 0, 0
	defer func() {
		for ; running > 0; running-- {
			<-finished
		}
	}()
	for ctx.Err() == nil {
		// Count what finished meanwhile, so the claim fills every free slot at once.
		running -= finishedSoFar(finished, running)
		if isClosed(p.quit) {
			return ran, nil // stopping: what runs finishes, nothing more is claimed
		}
		free := p.slots - running
		if free == 0 {
			<-finished
			running--
			continue
		}
		if running == 0 && p.idle != nil {
			if due, err := p.idle(ctx); err != nil || !due {
				return ran, err
			}
		}
		rows, claimed, err := p.claim(ctx, free)
		if err != nil {
			return ran, err
		}
		if claimed == 0 {
			if running == 0 {
				return ran, nil
			}
			<-finished
			running--
			continue
		}
		ran += len(rows)
		running += len(rows)
		for _, row := range rows {
			go func() {
				defer func() { finished <- struct{}{} }()
				p.run(ctx, row)
			}()
		}
	}
	return ran, ctx.Err()
}

// finishedSoFar takes, without waiting, the signals of the rows that finished (at most running).
func finishedSoFar(finished <-chan struct{}, running int) int {
	n := 0
	for ; n < running; n++ {
		select {
		case <-finished:
		default:
			return n
		}
	}
	return n
}
