package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/owed/owed/clock"
	"github.com/owed/owed/models"
	"github.com/robfig/cron/v3"
)

// DefaultLease is how long a claim holds a leased row unless OWED_LEASE says otherwise.
const DefaultLease = 2 * time.Minute

// orDefaults is clk and log, with clock.Real and slog.Default for nil.
func orDefaults(clk clock.Clock, log *slog.Logger) (clock.Clock, *slog.Logger) {
	return cmp.Or[clock.Clock](clk, clock.Real{}), cmp.Or(log, slog.Default())
}

// positive is v, or def when v is not positive.
func positive[T ~int | ~int64 | ~float64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// ownerOr is owner, or a new lease owner name (host:pid:random) when empty.
func ownerOr(owner string) string {
	if owner == "" {
		return models.NewLeaseOwner()
	}
	return owner
}

// errStarted is Start called on a runner that was already started or stopped.
var errStarted = errors.New("already started or stopped")

// runner is the lifecycle every background service shares (content jobs, webhook deliveries,
// the backfill): start runs its loops, Go runs tracked background work, and Stop claims
// nothing more, waits for both until its context ends, cancels the rest, and frees the
// process's leases on the runner's table (release) so another replica takes that work at once.
type runner struct {
	name    string
	log     *slog.Logger
	release func(ctx context.Context) (int64, error) // frees the owner's leases; nil: none

	mu        sync.Mutex
	started   bool
	stopping  bool
	quit      chan struct{}   // closed by Stop: claim nothing more
	base      context.Context // work runs under it; cancelled when Stop's grace ends
	cancel    context.CancelFunc
	stopLoops context.CancelFunc // cancels the loops' context; cancelled before base (cutShort)
	wg        sync.WaitGroup     // loops and tracked work
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
		running.Go(func() { defer r.wg.Done(); l.run(ctx, r.quit, r.log) })
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
	go func() { defer done(); fn(ctx) }()
	return true
}

// join counts work that is not a loop (Go, Deliveries.RunDue) as something Stop waits for,
// unless the runner is stopping (ok false); run ends when Stop's grace does. done ends it.
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

// cutShort cancels the loops' context, then the work's, without waiting. The loops' goes
// first so a pass failing at once because its work was cut short does not log a failure.
func (r *runner) cutShort() {
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
		r.cutShort()
		<-finished
	}
	r.cutShort()
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

// loop is one of a runner's loops: it passes when woken, by Wake or its Schedule entry (tick).
type loop struct {
	name    string
	pass    func(ctx context.Context) error // looks for due work and runs it
	wake    chan struct{}
	passing atomic.Bool // a pass is under way
}

func newLoop(name string, pass func(ctx context.Context) error) *loop {
	return &loop{name: name, pass: pass, wake: make(chan struct{}, 1)}
}

// Wake makes the loop pass now, or after the pass under way. It never blocks.
func (l *loop) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// tick is the loop's cron entry: it wakes the loop unless a pass is under way (a pass drains
// everything due, so a skipped tick loses nothing).
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
		select {
		case <-ctx.Done():
		case <-quit:
		case <-l.wake:
		}
		if ctx.Err() != nil || isClosed(quit) {
			return
		}
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Schedule is the process's periodic work, on robfig/cron: each entry wakes a runner's loop or
// runs a chore. Periods are wall time: how often a process looks, not when work falls due.
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

// every is a cron schedule of a fixed period (cron's @every rounds to whole seconds).
type every time.Duration

func (e every) Next(t time.Time) time.Time { return t.Add(time.Duration(e)) }

// NewSchedule makes an empty schedule; entries run only after Start. A chore still running when
// its next tick comes is skipped (cron's SkipIfStillRunning), and a panic in one is logged.
func NewSchedule(log *slog.Logger) *Schedule {
	log = cmp.Or(log, slog.Default())
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

// cronLog sends cron's errors to slog as errors, the rest at debug.
type cronLog struct{ log *slog.Logger }

func (l cronLog) Info(msg string, kv ...any) { l.log.Debug("cron: "+msg, kv...) }
func (l cronLog) Error(err error, msg string, kv ...any) {
	l.log.Error("cron: "+msg, append(kv, "err", err)...)
}

// pool claims rows of one leased table into its free slots, as many as are free (so no row
// waits here for a slot), and runs each in its own goroutine.
type pool[T any] struct {
	slots int             // rows run at once, at most
	quit  <-chan struct{} // closed: claim nothing more (what runs finishes)
	// idle, when set, is asked before a claim while nothing runs; false ends the pass unclaimed.
	idle func(ctx context.Context) (bool, error)
	// claim leases up to free due rows, returns those to run and how many it took (0: none due).
	claim func(ctx context.Context, free int) (run []T, claimed int, err error)
	run   func(ctx context.Context, row T) // runs one claimed row to its end
}

// drain claims and runs due rows until none is due (or ctx ends, or quit is closed), waits for
// them, and returns how many it ran.
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
