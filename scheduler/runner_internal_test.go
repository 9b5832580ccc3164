package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/owed/owed/owedtest/wait"
)

// A loop passes at once, then only when woken (it has no timer of its own),
// and ends when its runner stops; Stop waits for it.
func TestLoopPassesAtStartAndOnWake(t *testing.T) {
	t.Parallel()
	passes := make(chan struct{})
	l := newLoop("test", func(ctx context.Context) error {
		passes <- struct{}{}
		return nil
	})
	r := newRunner("test", slog.New(slog.DiscardHandler), nil)
	if err := r.start(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if err := r.start(context.Background(), l); !errors.Is(err, errStarted) {
		t.Errorf("a second start = %v, want errStarted", err)
	}
	<-passes // the first pass, at once
	l.Wake()
	<-passes // woken
	l.Wake()
	l.Wake() // never blocks, even with a wake pending
	<-passes
	stopped := make(chan error)
	go func() { stopped <- r.Stop(context.Background()) }()
	select {
	case <-passes:
		// The pending wake's pass raced Stop; none follows it.
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	}
	l.Wake()
	select {
	case <-passes:
		t.Fatal("a stopped runner's loop passed")
	default:
	}
	if err := r.start(context.Background(), l); !errors.Is(err, errStarted) {
		t.Errorf("a start after Stop = %v, want errStarted", err)
	}
	if r.Go(func(context.Context) {}) {
		t.Error("a stopped runner took background work")
	}
}

// Stop waits for work in flight while its context lasts, then cancels it and waits for it to
// end, and frees the leases last.
func TestRunnerStopDrainsThenCancelsThenReleases(t *testing.T) {
	t.Parallel()
	noted := make(chan string, 3)
	r := newRunner("test", slog.New(slog.DiscardHandler), func(context.Context) (int64, error) {
		noted <- "released"
		return 1, nil
	})
	finish := make(chan struct{})
	started := make(chan struct{}, 2)
	// One piece of work finishes when told; the other only when cancelled.
	r.Go(func(ctx context.Context) {
		started <- struct{}{}
		<-finish
		noted <- "finished"
	})
	r.Go(func(ctx context.Context) {
		started <- struct{}{}
		<-ctx.Done()
		noted <- "cancelled"
	})
	<-started
	<-started
	grace, endGrace := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- r.Stop(grace) }()
	close(finish)
	if got := <-noted; got != "finished" {
		t.Fatalf("%s before the finished work, while the grace runs", got)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) with work in flight and its grace running", err)
	default:
	}
	endGrace()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if a, b := <-noted, <-noted; a != "cancelled" || b != "released" {
		t.Errorf("then %s, %s; want cancelled, then released", a, b)
	}
}

// table is an in-memory leased table for the pool: rows are claimed in order, and each run
// holds its row until the test lets it finish.
type table struct {
	mu      sync.Mutex
	rows    int // rows left to claim
	running int
	most    int // the most rows running at once
	over    bool
	slots   int
}

// The pool never runs more rows than it has slots, asks each claim for exactly the slots that
// are free, and claims again as soon as one finishes, until none is due.
func TestPoolFillsFreeSlotsOnly(t *testing.T) {
	t.Parallel()
	tb := &table{rows: 10, slots: 3}
	finish := make(chan struct{})
	started := make(chan int, 10)
	var claims []int
	p := pool[int]{slots: 3, quit: make(chan struct{}),
		claim: func(ctx context.Context, free int) ([]int, int, error) {
			tb.mu.Lock()
			defer tb.mu.Unlock()
			claims = append(claims, free)
			if free+tb.running > tb.slots {
				tb.over = true
			}
			n := min(free, tb.rows)
			tb.rows -= n
			tb.running += n
			tb.most = max(tb.most, tb.running)
			rows := make([]int, n)
			return rows, n, nil
		},
		run: func(ctx context.Context, row int) {
			started <- row
			<-finish
			tb.mu.Lock()
			tb.running--
			tb.mu.Unlock()
		},
	}
	done := make(chan int)
	go func() {
		n, err := p.drain(context.Background())
		if err != nil {
			t.Error(err)
		}
		done <- n
	}()
	for range 10 {
		<-started
		finish <- struct{}{} // one row finishes; its slot goes to the next claim
	}
	if n := <-done; n != 10 {
		t.Errorf("ran %d rows, want 10", n)
	}
	if tb.over || tb.most != 3 {
		t.Errorf("most running = %d (over the slots: %v), want 3", tb.most, tb.over)
	}
	if claims[0] != 3 {
		t.Errorf("claims asked for %v: the first should fill all 3 slots", claims)
	}
}

// A pool told to quit claims nothing more, and waits for the rows it runs.
func TestPoolQuitClaimsNothingMore(t *testing.T) {
	t.Parallel()
	quit := make(chan struct{})
	finish := make(chan struct{})
	started := make(chan struct{}, 2)
	claims := 0
	p := pool[int]{slots: 2, quit: quit,
		claim: func(ctx context.Context, free int) ([]int, int, error) {
			claims++
			return make([]int, free), free, nil // always more due
		},
		run: func(ctx context.Context, row int) { started <- struct{}{}; <-finish },
	}
	done := make(chan int)
	go func() {
		n, _ := p.drain(context.Background())
		done <- n
	}()
	<-started
	<-started
	close(quit)
	close(finish)
	if n := <-done; n != 2 || claims != 1 {
		t.Errorf("ran %d rows in %d claims after quit, want 2 in 1", n, claims)
	}
}

// A loop's entry on the schedule wakes it each period, and a tick while a pass is under way is
// skipped (no pile of passes after a long one); the listing shows each entry's next run once
// the schedule runs.
func TestScheduleWakesALoopAndSkipsWhileItPasses(t *testing.T) {
	t.Parallel()
	passes := make(chan struct{}, 16)
	hold := make(chan struct{})
	l := newLoop("test", func(ctx context.Context) error {
		passes <- struct{}{}
		<-hold
		return nil
	})
	s := NewSchedule(slog.New(slog.DiscardHandler))
	if err := s.Every("test loop", 20*time.Millisecond, l.tick); err != nil {
		t.Fatal(err)
	}
	if err := s.Every("never", 0, l.tick); err == nil {
		t.Error("an entry with no period was accepted")
	}
	if e := s.Entries(); len(e) != 1 || e[0].Name != "test loop" || e[0].Every != 20*time.Millisecond || !e[0].Next.IsZero() {
		t.Errorf("entries before Start = %+v, want one, with no next run", e)
	}
	r := newRunner("test", slog.New(slog.DiscardHandler), nil)
	if err := r.start(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	<-passes // the first pass, at once; it holds
	s.Start()
	// Many periods pass while the first pass holds: every tick finds it under way.
	ticks := map[time.Time]bool{}
	wait.Until(t, "three ticks while the pass holds", func() bool {
		if prev := s.Entries()[0].Prev; !prev.IsZero() {
			ticks[prev] = true
		}
		return len(ticks) >= 3
	})
	if len(l.wake) != 0 {
		t.Fatal("a tick woke the loop while its pass was under way")
	}
	hold <- struct{}{} // the first pass ends; no wake is pending, so the next pass is a tick's
	select {
	case <-passes:
	case <-time.After(10 * time.Second):
		t.Fatal("no tick woke the loop after its pass")
	}
	if e := s.Entries()[0]; e.Next.IsZero() || !e.Next.After(e.Prev) {
		t.Errorf("entry after ticks = %+v, want its next run after its last", e)
	}
	close(hold)
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Stop runs no entry more, waits for a chore under way while its context lasts, then cancels
// it and waits for it to return.
func TestScheduleStopCancelsAChoreAfterItsGrace(t *testing.T) {
	t.Parallel()
	s := NewSchedule(slog.New(slog.DiscardHandler))
	started := make(chan struct{}, 1)
	ended := make(chan error, 1)
	var runs atomic.Int64
	if err := s.Every("chore", 10*time.Millisecond, func(ctx context.Context) {
		if runs.Add(1) > 1 {
			return
		}
		started <- struct{}{}
		<-ctx.Done()
		ended <- ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	s.Start()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("chore ended with %v, want cancelled", err)
		}
	default:
		t.Fatal("Stop returned before the chore it cancelled")
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the chore ran %d times while the first held, want once (SkipIfStillRunning)", n)
	}
}

// Stop says how many leases it released, and only when it released some; a loop logs a pass
// that failed, and nothing for one that worked.
func TestRunnerLogsReleasesAndFailedPassesOnly(t *testing.T) {
	t.Parallel()
	logLines := func(released int64, passErr error) []map[string]any {
		t.Helper()
		var buf lockedBuffer
		passed := make(chan struct{}, 1)
		l := newLoop("chore", func(context.Context) error {
			select {
			case passed <- struct{}{}:
			default:
			}
			return passErr
		})
		r := newRunner("test", slog.New(slog.NewJSONHandler(&buf, nil)), func(context.Context) (int64, error) { return released, nil })
		if err := r.start(context.Background(), l); err != nil {
			t.Fatal(err)
		}
		<-passed
		if passErr != nil {
			// A pass that a stop cuts short is not logged: wait for the line before stopping.
			wait.Until(t, "the failed pass logged", func() bool { return strings.Contains(buf.String(), passErr.Error()) })
		}
		if err := r.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		var lines []map[string]any
		for _, s := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			if s != "" && json.Unmarshal([]byte(s), &m) == nil {
				lines = append(lines, m)
			}
		}
		return lines
	}
	if lines := logLines(0, nil); len(lines) != 0 {
		t.Errorf("a pass that worked and nothing to release logged %v, want nothing", lines)
	}
	if lines := logLines(3, nil); len(lines) != 1 || lines[0]["msg"] != "released leases" || lines[0]["rows"] != float64(3) {
		t.Errorf("3 leases released: %v, want one line saying so", lines)
	}
	if lines := logLines(0, errors.New("boom")); len(lines) != 1 || lines[0]["msg"] != "chore" || lines[0]["err"] != "boom" || lines[0]["level"] != "ERROR" {
		t.Errorf("a failed pass: %v, want one error line named for the loop", lines)
	}
}

// lockedBuffer is a bytes.Buffer written by a logger in one goroutine and read by the test in
// another: owedtest.LogBuffer, which this internal test cannot import (owedtest imports
// scheduler).
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
