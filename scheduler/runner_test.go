package scheduler_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
	"github.com/owed/owed/scheduler"
)

// Stop lets the jobs in flight finish (within its grace), claims nothing more, and then frees
// the leases the process still holds: a job claimed but not started is due again at once.
func TestRunnerStopDrainsAndReleasesLeases(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db, withConfig(func(c *scheduler.ContentConfig) { c.Concurrency, c.Every = 2, time.Hour }))
		ann := r.user("ann")
		idle := r.pitch(ann, "idle")
		r.claim(models.TaskScreen, models.KindPitch, idle) // claimed by this process, never started
		asked := make(chan struct{}, 3)
		answer := make(chan struct{})
		r.model.Handle(func(http.ResponseWriter, *http.Request) bool {
			asked <- struct{}{}
			<-answer
			return false
		})
		var pitches []int64
		for range 3 {
			pitches = append(pitches, r.pitch(ann, "p"))
		}
		if err := r.content.Start(r.ctx); err != nil {
			t.Fatal(err)
		}
		<-asked
		<-asked // both slots busy: the third pitch waits for one
		stopped := make(chan error)
		go func() { stopped <- r.content.Stop(context.Background()) }()
		wait.Until(t, "the runner to stop taking work", func() bool { return !r.content.Go(func(context.Context) {}) })
		close(answer)
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		if n := r.model.Calls(); n != 2 {
			t.Errorf("%d model calls: the runner claimed after Stop", n)
		}
		screened := 0
		for _, p := range pitches {
			j, owed := r.job(models.TaskScreen, models.KindPitch, p)
			switch {
			case !owed:
				screened++ // drained: the verdict was recorded, which took the job
			case j.LeaseOwner != nil || j.Attempts != 0:
				t.Errorf("unstarted job %+v: still leased or counted", j)
			}
		}
		if screened != 2 {
			t.Errorf("%d jobs screened, want the 2 in flight when Stop came", screened)
		}
		if j := r.mustJob(models.TaskScreen, models.KindPitch, idle); j.LeaseOwner != nil || j.LeaseUntil != nil {
			t.Errorf("claimed-but-unstarted job %+v: its lease outlived Stop", j)
		}
	})
}

// Wake makes a running loop pass at once, however long its period.
func TestRunnerWakeClaimsAtOnce(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newDeliveryRig(t, db, scheduler.DeliveriesConfig{AllowPrivate: true, Poll: time.Hour})
		rcv := newReceiver(t)
		r.subscribe(rcv.URL, models.EventAll)
		r.finished("chat-1")
		if err := r.d.Start(r.ctx); err != nil {
			t.Fatal(err)
		}
		<-rcv.arrived // the first pass, at Start
		r.finished("chat-2")
		r.d.Wake()
		<-rcv.arrived // woken: the next poll is an hour away
		if err := r.d.Stop(r.ctx); err != nil {
			t.Fatal(err)
		}
		if n := len(rcv.requests()); n != 2 {
			t.Errorf("%d requests, want 2", n)
		}
	})
}

// A runner of another process (another owner) cannot claim a delivery or a job whose lease is
// held; it takes it once the lease has run out.
func TestRunnerOtherOwnerCannotClaimAHeldLease(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newDeliveryRig(t, db, scheduler.DeliveriesConfig{AllowPrivate: true, Owner: "process-a"})
		other, err := scheduler.NewDeliveries(r.store, r.clk, owedtest.Logger(t), nil,
			scheduler.DeliveriesConfig{AllowPrivate: true, Owner: "process-b"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { other.Stop(context.Background()) })
		hold := make(chan struct{})
		rcv := newReceiver(t, answer{status: 204, hold: hold})
		w := r.subscribe(rcv.URL, models.EventAll)
		r.finished("chat-1")
		first := make(chan int)
		go func() {
			n, _ := r.d.RunDue(r.ctx)
			first <- n
		}()
		<-rcv.arrived // process-a holds the delivery's lease, attempting it
		if n, err := other.RunDue(r.ctx); n != 0 || err != nil {
			t.Fatalf("process-b attempted %d (%v) of a delivery process-a holds", n, err)
		}
		close(hold)
		if n := <-first; n != 1 {
			t.Fatalf("process-a attempted %d", n)
		}
		if d := r.one(w.ID); d.Status != models.DeliveryDelivered {
			t.Fatalf("delivery %+v, want delivered", d)
		}

		// Content jobs: the same rule, and a lease that ran out is anyone's.
		cr := newRig(t, db)
		ann := cr.user("ann")
		p := cr.pitch(ann, "p")
		held := cr.claim(models.TaskScreen, models.KindPitch, p)
		second := scheduler.NewContent(cr.store, cr.model.Client(), cr.clk, owedtest.Logger(t), nil,
			scheduler.ContentConfig{Owner: "process-b"})
		t.Cleanup(func() { second.Stop(context.Background()) })
		if n, err := second.Sweep(cr.ctx, 0); n != 0 || err != nil {
			t.Fatalf("process-b ran %d (%v) of a job held by %s", n, err, *held.LeaseOwner)
		}
		cr.clk.Advance(held.LeaseUntil.Sub(cr.clk.Now()))
		if n, err := second.Sweep(cr.ctx, 0); n != 1 || err != nil {
			t.Fatalf("process-b ran %d (%v) of a job whose lease ran out, want 1", n, err)
		}
	})
}

// A claim is released only by its own holder: with one owner per process, a worker whose lease
// ran out and was claimed again by the same process must not free the new claim.
func TestReleaseFreesOnlyItsOwnClaim(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newRig(t, db)
		ann := r.user("ann")
		p := r.pitch(ann, "p")
		stale := r.claim(models.TaskScreen, models.KindPitch, p)
		r.clk.Advance(r.content.Config().Lease)
		fresh := r.claim(models.TaskScreen, models.KindPitch, p) // the same owner, a new lease
		if err := r.store.ReleaseLease(r.ctx, models.LeasedJobs, stale.ID, stale.LeaseOwner, stale.LeaseUntil); err != nil {
			t.Fatal(err)
		}
		if j := r.mustJob(models.TaskScreen, models.KindPitch, p); j.LeaseUntil == nil || *j.LeaseUntil != *fresh.LeaseUntil {
			t.Fatalf("job %+v after a stale release, want the fresh claim kept", j)
		}
		if err := r.store.ReleaseLease(r.ctx, models.LeasedJobs, fresh.ID, fresh.LeaseOwner, fresh.LeaseUntil); err != nil {
			t.Fatal(err)
		}
		if j := r.mustJob(models.TaskScreen, models.KindPitch, p); j.LeaseUntil != nil || j.LeaseOwner != nil {
			t.Fatalf("job %+v: its holder's release did not free it", j)
		}

		d := newDeliveryRig(t, db, scheduler.DeliveriesConfig{AllowPrivate: true})
		d.subscribe("http://127.0.0.1:1/", models.EventAll)
		d.finished("chat-1")
		owner := d.d.Config().Owner
		staleDel, err := d.store.ClaimDeliveries(d.ctx, 1, time.Minute, owner)
		if err != nil || len(staleDel) != 1 {
			t.Fatalf("claim: %v, %v", staleDel, err)
		}
		d.clk.Advance(time.Minute)
		freshDel, err := d.store.ClaimDeliveries(d.ctx, 1, time.Minute, owner)
		if err != nil || len(freshDel) != 1 {
			t.Fatalf("claim again: %v, %v", freshDel, err)
		}
		if err := d.store.ReleaseLease(d.ctx, models.LeasedDeliveries, staleDel[0].ID, staleDel[0].LeaseOwner, staleDel[0].LeaseUntil); err != nil {
			t.Fatal(err)
		}
		if got, _ := d.store.ClaimDeliveries(d.ctx, 1, time.Minute, "another"); len(got) != 0 {
			t.Fatalf("a stale release freed the fresh claim: %+v", got)
		}
	})
}
