package scheduler_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/metrics"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
	"github.com/owed/owed/scheduler"
	"github.com/owed/owed/webhooks"

	"github.com/owed/owed/owedtest/wait"
)

// received is one request a receiver got.
type received struct {
	header http.Header
	body   []byte
}

// answer is how a receiver answers one request.
type answer struct {
	status int
	header map[string]string
	hold   chan struct{} // when set, the answer waits until it is closed (or the client gives up)
}

// receiver is a real HTTP endpoint that records what it gets and answers from a script
// (204 once the script runs out).
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	got     []received
	script  []answer
	arrived chan struct{}
}

func newReceiver(t *testing.T, script ...answer) *receiver {
	r := &receiver{script: script, arrived: make(chan struct{}, 100)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{req.Header.Clone(), body})
		a := answer{status: http.StatusNoContent}
		if len(r.script) > 0 {
			a, r.script = r.script[0], r.script[1:]
		}
		r.mu.Unlock()
		r.arrived <- struct{}{}
		if a.hold != nil {
			select {
			case <-a.hold:
			case <-req.Context().Done():
				return
			}
		}
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(a.status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// deliveryRig is a store on a fresh database, a fake clock and a deliveries runner.
type deliveryRig struct {
	t       *testing.T
	ctx     context.Context
	clk     *clocktest.Fake
	store   *models.Store
	metrics *metrics.Metrics
	d       *scheduler.Deliveries
}

func newDeliveryRig(t *testing.T, db string, cfg scheduler.DeliveriesConfig) *deliveryRig {
	t.Helper()
	return newDeliveryRigLogging(t, db, cfg, owedtest.Logger(t))
}

// newDeliveryRigLogging is newDeliveryRig with the runner logging to log.
func newDeliveryRigLogging(t *testing.T, db string, cfg scheduler.DeliveriesConfig, log *slog.Logger) *deliveryRig {
	t.Helper()
	clk := clocktest.NewFake(owedtest.Start)
	store := owedtest.Store(t, db, clk)
	m := metrics.New(nil)
	d, err := scheduler.NewDeliveries(store, clk, log, m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	return &deliveryRig{t: t, ctx: context.Background(), clk: clk, store: store, metrics: m, d: d}
}

// subscribe adds a webhook of url to events and returns it with its secret.
func (r *deliveryRig) subscribe(url string, events ...string) models.Webhook {
	r.t.Helper()
	w, err := r.store.CreateWebhook(r.ctx, url, events, webhooks.NewSecret())
	if err != nil {
		r.t.Fatal(err)
	}
	return w
}

// finished owes a backfill.finished event, as the backfill queue does when a job ends.
func (r *deliveryRig) finished(chat string) {
	r.t.Helper()
	started := owedtest.Start.Add(-time.Hour)
	err := r.store.WithTx(r.ctx, func(tx *models.Store) error {
		return tx.EnqueueWebhook(r.ctx, models.EventBackfillFinished, models.BackfillFinishedData{ChatID: chat, Processed: 10,
			Cached: 8, Failed: 2, Total: 10, StartedAt: &started, FinishedAt: owedtest.Start})
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

// deliveries lists a webhook's deliveries, oldest first.
func (r *deliveryRig) deliveries(webhookID int64) []models.Delivery {
	r.t.Helper()
	ds, err := r.store.ListDeliveries(r.ctx, webhookID, "", 0, 100)
	if err != nil {
		r.t.Fatal(err)
	}
	for i, j := 0, len(ds)-1; i < j; i, j = i+1, j-1 {
		ds[i], ds[j] = ds[j], ds[i]
	}
	return ds
}

func (r *deliveryRig) one(webhookID int64) models.Delivery {
	r.t.Helper()
	ds := r.deliveries(webhookID)
	if len(ds) != 1 {
		r.t.Fatalf("%d deliveries of webhook %d, want 1", len(ds), webhookID)
	}
	return ds[0]
}

func (r *deliveryRig) attempts(deliveryID int64) []models.DeliveryAttempt {
	r.t.Helper()
	as, err := r.store.DeliveryAttempts(r.ctx, []int64{deliveryID}, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	return as[deliveryID]
}

// stopMidAttempt starts the loop, waits for rcv to be sent a delivery, and stops the runner
// with a grace of 50 ms, which the attempt (held by rcv) outlasts.
func (r *deliveryRig) stopMidAttempt(rcv *receiver) {
	r.t.Helper()
	if err := r.d.Start(r.ctx); err != nil {
		r.t.Fatal(err)
	}
	select {
	case <-rcv.arrived:
	case <-time.After(10 * time.Second):
		r.t.Fatal("nothing was attempted")
	}
	ctx, cancel := context.WithTimeout(r.ctx, 50*time.Millisecond)
	defer cancel()
	if err := r.d.Stop(ctx); err != nil {
		r.t.Fatal(err)
	}
}

// run runs one pass and checks how many deliveries it attempted.
func (r *deliveryRig) run(want int) {
	r.t.Helper()
	n, err := r.d.RunDue(r.ctx)
	if err != nil {
		r.t.Fatalf("RunDue: %v", err)
	}
	if n != want {
		r.t.Fatalf("RunDue attempted %d deliveries, want %d", n, want)
	}
}

func TestDeliveryIsSignedAndDelivered(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newDeliveryRig(t, db, scheduler.DeliveriesConfig{AllowPrivate: true})
		rcv := newReceiver(t)
		w := r.subscribe(rcv.URL+"/hooks?x=1", models.EventBackfillFinished)
		other := r.subscribe(rcv.URL+"/scores", models.EventSongScored)
		r.finished("chat-1")
		if ds := r.deliveries(other.ID); len(ds) != 0 {
			t.Fatalf("a song.scored subscriber got %d backfill deliveries", len(ds))
		}
		r.run(1)
		got := rcv.requests()
		if len(got) != 1 {
			t.Fatalf("receiver got %d requests, want 1", len(got))
		}
		req := got[0]
		if err := webhooks.Verify(w.Secret, req.header, req.body, r.clk.Now()); err != nil {
			t.Fatalf("signature: %v (headers %v)", err, req.header)
		}
		d := r.one(w.ID)
		if id := req.header.Get("webhook-id"); id != d.MsgID || !strings.HasPrefix(id, "msg_") {
			t.Errorf("webhook-id %q, want the delivery's %q", id, d.MsgID)
		}
		if ts := req.header.Get("webhook-timestamp"); ts != "1796029200" {
			t.Errorf("webhook-timestamp %q, want the clock's unix seconds", ts)
		}
		if ct := req.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		var body struct {
			Type      string
			Timestamp string
			Data      map[string]any
		}
		if err := json.Unmarshal(req.body, &body); err != nil {
			t.Fatalf("body %s: %v", req.body, err)
		}
		if body.Type != "backfill.finished" || body.Timestamp != "2026-11-30T09:00:00.000Z" || body.Data["chatId"] != "chat-1" ||
			body.Data["processed"] != 10.0 || body.Data["cached"] != 8.0 || body.Data["failed"] != 2.0 || body.Data["total"] != 10.0 ||
			body.Data["startedAt"] != "2026-11-30T08:00:00Z" || body.Data["finishedAt"] != "2026-11-30T09:00:00Z" {
			t.Errorf("body = %s", req.body)
		}
		if _, ok := body.Data["guildId"]; !ok {
			t.Errorf("body without guildId (null when none): %s", req.body)
		}
		if d.Status != models.DeliveryDelivered || d.Attempts != 1 || d.DeliveredAt == nil || *d.LastStatus != 204 || d.LeaseOwner != nil {
			t.Errorf("delivery = %+v", d)
		}
		as := r.attempts(d.ID)
		if len(as) != 1 || *as[0].Status != 204 || as[0].Error != nil || as[0].Attempt != 1 || !as[0].At.Equal(owedtest.Start) {
			t.Errorf("attempts = %+v", as)
		}
		if n := counter(r.metrics, "delivered"); n != 1 {
			t.Errorf("delivered counter = %v", n)
		}
		r.clk.Advance(24 * time.Hour)
		r.run(0)
	})
}

func TestFailedDeliveryIsRetriedOnTheScheduleWithTheSameID(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newDeliveryRig(t, db, scheduler.DeliveriesConfig{AllowPrivate: true})
		var script []answer
		for range 7 {
			script = append(script, answer{status: http.StatusInternalServerError})
		}
		rcv := newReceiver(t, script...)
		w := r.subscribe(rcv.URL, models.EventAll)
		r.finished("chat-1")
		for i, step := range []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour} {
			before := r.clk.Now()
			r.run(1)
			d := r.one(w.ID)
			wait := d.DueAt.Sub(before)
			if d.Status != models.DeliveryPending || d.Attempts != i+1 || wait < step*9/10 || wait > step*11/10 {
				t.Fatalf("after failure %d: status %s, attempts %d, next in %s; want pending, due in %s ±10%%", i+1, d.Status, d.Attempts, wait, step)
			}
			// Not a moment early.
			r.clk.Set(d.DueAt.Add(-time.Millisecond))
			r.run(0)
			r.clk.Set(d.DueAt)
		}
		r.run(1) // the script ran out: 204
		d := r.one(w.ID)
		if d.Status != models.DeliveryDelivered || d.Attempts != 8 {
			t.Fatalf("delivery = %+v, want delivered on the 8th attempt", d)
		}
		got := rcv.requests()
		if len(got) != 8 {
			t.Fatalf("receiver got %d requests, want 8", len(got))
		}
		var stamps []string
		for i, req := range got {
			if id := req.header.Get("webhook-id"); id != d.MsgID {
				t.Errorf("attempt %d: webhook-id %q, want %q on every attempt", i+1, id, d.MsgID)
			}
			if string(req.body) != string(got[0].body) {
				t.Errorf("attempt %d: body changed", i+1)
			}
			if err := webhooks.Verify(w.Secret, req.header, req.body, time.Unix(mustAtoi(t, req.header.Get("webhook-timestamp")), 0)); err != nil {
				t.Errorf("attempt %d: %v", i+1, err)
			}
			stamps = append(stamps, req.header.Get("webhook-timestamp"))
		}
		if stamps[0] == stamps[1] {
			t.Errorf("webhook-timestamp %v: want a fresh one per attempt", stamps)
		}
		as := r.attempts(d.ID)
		if len(as) != 8 || *as[0].Status != 500 || as[0].Error == nil || *as[0].Error != "500 Internal Server Error" || *as[7].Status != 204 {
			t.Errorf("attempt log = %+v", as)
		}
		if n := counter(r.metrics, "retry"); n != 7 {
			t.Errorf("retry counter = %v", n)
		}
	})
}

// counter reads owed_webhook_deliveries_total of an outcome.
func counter(m *metrics.Metrics, outcome string) float64 {
	mfs, _ := m.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "owed_webhook_deliveries_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return mt.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

func TestRetryAfterIsHonouredWhenLonger(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newDeliveryRig(t, db, scheduler.DeliveriesConfig{AllowPrivate: true})
		rcv := newReceiver(t,
			answer{status: http.StatusServiceUnavailable, header: map[string]string{"Retry-After": "120"}},
			answer{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "1"}},
			answer{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "99999999"}})
		w := r.subscribe(rcv.URL, models.EventBackfillFinished)
		r.finished("chat-1")
		r.run(1)
		d := r.one(w.ID)
		if wait := d.DueAt.Sub(r.clk.Now()); wait != 120*time.Second {
			t.Fatalf("after Retry-After: 120, due in %s; want 2m (longer than the schedule's 5s)", wait)
		}
		r.clk.Advance(6 * time.Second)
		r.run(0) // the schedule alone would have retried by now
		r.clk.Advance(114 * time.Second)
		r.run(1)
		d = r.one(w.ID)
		if wait := d.DueAt.Sub(r.clk.Now()); wait < 270*time.Second || wait > 330*time.Second {
			t.Fatalf("after Retry-After: 1 on the 2nd failure, due in %s; want the schedule's 5m ±10%%", wait)
		}
		r.clk.Set(d.DueAt)
		r.run(1)
		d = r.one(w.ID)
		if wait := d.DueAt.Sub(r.clk.Now()); wait != 24*time.Hour {
			t.Fatalf("after a huge Retry-After, due in %s; want the 24h cap", wait)
		}
		if as := r.attempts(d.ID); *as[0].Error != "503 Service Unavailable (Retry-After 2m0s)" {
			t.Errorf("attempt error %q", *as[0].Error)
		}
	})
}

func TestGoneDisablesTheSubscription(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newDeliveryRig(t, db, scheduler.DeliveriesConfig{AllowPrivate: true, Concurrency: 1})
		rcv := newReceiver(t, answer{status: http.StatusGone})
		w := r.subscribe(rcv.URL, models.EventAll)
		keep := r.subscribe(newReceiver(t).URL, models.EventAll)
		r.finished("chat-1")
		r.finished("chat-2")
		r.run(3) // the 410 cancels the other delivery of w before it is claimed
		if n := len(rcv.requests()); n != 1 {
			t.Fatalf("gone receiver got %d requests, want 1", n)
		}
		hook, err := r.store.WebhookByID(r.ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if hook.Active || hook.DisabledReason == nil || *hook.DisabledReason != models.DisabledGone {
			t.Fatalf("webhook after 410 = %+v, want inactive, gone", hook)
		}
		for _, d := range r.deliveries(w.ID) {
			if d.Status != models.DeliveryCancelled {
				t.Errorf("delivery %d is %s, want cancelled", d.ID, d.Status)
			}
		}
		first := r.deliveries(w.ID)[0]
		if as := r.attempts(first.ID); len(as) != 1 || *as[0].Status != 410 {
			t.Errorf("attempts of the gone delivery = %+v", as)
		}
		for _, d := range r.deliveries(keep.ID) {
			if d.Status != models.DeliveryDelivered {
				t.Errorf("the other webhook's delivery %d is %s", d.ID, d.Status)
			}
		}
		// Disabled, it is owed nothing new.
		r.finished("chat-3")
		if n := len(r.deliveries(w.ID)); n != 2 {
			t.Errorf("a disabled webhook was owed a new event: %d deliveries", n)
		}
		r.clk.Advance(time.Hour)
		r.run(1) // chat-3, to the active webhook only
		if n := counter(r.metrics, "gone"); n != 1 {
			t.Errorf("gone counter = %v", n)
		}
	})
}

func TestPrivateAddressIsRefusedAtDeliveryTime(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newDeliveryRig(t, db, scheduler.DeliveriesConfig{}) // private addresses not allowed
		rcv := newReceiver(t)
		// The address was public when subscribed; now the host resolves to loopback.
		w := r.subscribe(strings.Replace(rcv.URL, "127.0.0.1", "localhost", 1), models.EventAll)
		r.finished("chat-1")
		r.run(1)
		if n := len(rcv.requests()); n != 0 {
			t.Fatalf("the private receiver got %d requests", n)
		}
		d := r.one(w.ID)
		as := r.attempts(d.ID)
		if d.Status != models.DeliveryPending || d.Attempts != 1 || d.LastStatus != nil || len(as) != 1 || as[0].Status != nil ||
			as[0].Error == nil || *as[0].Error != "refused: not a public address (OWED_WEBHOOKS_ALLOW_PRIVATE is off)" {
			t.Fatalf("delivery %+v, attempts %+v: want pending, failed like a network error saying the address is refused", d, as)
		}
		if wait := d.DueAt.Sub(r.clk.Now()); wait < 4500*time.Millisecond || wait > 5500*time.Millisecond {
			t.Errorf("retried in %s, want the schedule's 5s", wait)
		}
	})
}

// TestNonPublicAddressesRefusedAtDialTime: a subscription to any of the addresses issue 12 found
// accepted (stored directly, as if it had been made before the check knew them, or its name had
// changed meanwhile) is refused by the dial itself, before any connection: every attempt says
// so in the same words, rather than the network error each address would otherwise give.
func TestNonPublicAddressesRefusedAtDialTime(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newDeliveryRig(t, db, scheduler.DeliveriesConfig{Timeout: 2 * time.Second, Lease: 10 * time.Second})
		var hooks []models.Webhook
		for _, host := range []string{"[64:ff9b::7f00:1]", "[2002:7f00:1::1]", "[::7f00:1]", "0.1.2.3", "198.18.0.1",
			"240.0.0.1", "255.255.255.255", "[fec0::1]"} {
			hooks = append(hooks, r.subscribe("http://"+host+":8080/hook", models.EventAll))
		}
		r.finished("chat-1")
		r.run(len(hooks))
		for _, w := range hooks {
			d := r.one(w.ID)
			as := r.attempts(d.ID)
			if d.Status != models.DeliveryPending || len(as) != 1 || as[0].Error == nil ||
				*as[0].Error != "refused: not a public address (OWED_WEBHOOKS_ALLOW_PRIVATE is off)" {
				var e any
				if len(as) == 1 && as[0].Error != nil {
					e = *as[0].Error
				}
				t.Errorf("%s: delivery %s, error %v: want refused by the guard", w.URL, d.Status, e)
			}
		}
	})
}

func TestAttemptTimesOut(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newDeliveryRig(t, db, scheduler.DeliveriesConfig{AllowPrivate: true, Timeout: 100 * time.Millisecond, Lease: time.Second})
		hold := make(chan struct{})
		defer close(hold)
		rcv := newReceiver(t, answer{status: 200, hold: hold})
		w := r.subscribe(rcv.URL, models.EventAll)
		r.finished("chat-1")
		r.run(1)
		d := r.one(w.ID)
		as := r.attempts(d.ID)
		if d.Status != models.DeliveryPending || len(as) != 1 || as[0].Error == nil || *as[0].Error != "timed out after 100ms" ||
			as[0].LatencyMs < 100 {
			t.Fatalf("delivery %+v, attempts %+v: want a timed-out attempt, retried", d, as)
		}
	})
}

// A worker that dies holding a delivery loses nothing: its lease runs out, another takes it.
func TestDeadWorkersDeliveryIsTakenWhenItsLeaseRunsOut(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newDeliveryRig(t, db, scheduler.DeliveriesConfig{AllowPrivate: true})
		rcv := newReceiver(t)
		w := r.subscribe(rcv.URL, models.EventAll)
		r.finished("chat-1")
		claimed, err := r.store.ClaimDeliveries(r.ctx, 10, 2*time.Minute, "dead-worker")
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %v %v", claimed, err)
		}
		if again, _ := r.store.ClaimDeliveries(r.ctx, 10, 2*time.Minute, "other"); len(again) != 0 {
			t.Fatalf("a leased delivery was claimed twice: %+v", again)
		}
		r.run(0)
		r.clk.Advance(2 * time.Minute)
		r.run(1)
		if d := r.one(w.ID); d.Status != models.DeliveryDelivered || len(rcv.requests()) != 1 {
			t.Fatalf("delivery %+v after the lease ran out", d)
		}
		// The dead worker's late result changes nothing (its claim no longer holds), though
		// its attempt is kept.
		ok, err := r.store.FinishDelivery(r.ctx, claimed[0], models.AttemptResult{Outcome: models.AttemptRetry, At: r.clk.Now(),
			NextAt: r.clk.Now().Add(time.Hour)})
		if err != nil || ok {
			t.Fatalf("late finish: %v %v, want not held", ok, err)
		}
		if d := r.one(w.ID); d.Status != models.DeliveryDelivered {
			t.Fatalf("late finish changed the delivery: %+v", d)
		}
	})
}

func TestLoopDeliversAndStops(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newDeliveryRig(t, db, scheduler.DeliveriesConfig{AllowPrivate: true, Poll: 20 * time.Millisecond})
		rcv := newReceiver(t)
		w := r.subscribe(rcv.URL, models.EventAll)
		// The loop's entry on the schedule wakes it every Poll; nothing else does here.
		sched := scheduler.NewSchedule(nil)
		if err := r.d.ScheduleOn(sched); err != nil {
			t.Fatal(err)
		}
		if e := sched.Entries(); len(e) != 1 || e[0].Name != "webhook deliveries" || e[0].Every != 20*time.Millisecond {
			t.Fatalf("schedule = %+v, want the deliveries every 20ms", e)
		}
		sched.Start()
		defer sched.Stop(r.ctx)
		if err := r.d.Start(r.ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.d.Start(r.ctx); err == nil {
			t.Error("a second Start was accepted")
		}
		r.finished("chat-1")
		select {
		case <-rcv.arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the loop delivered nothing")
		}
		wait.Until(t, "the delivery recorded", func() bool { return r.one(w.ID).Status == models.DeliveryDelivered })
		if err := r.d.Stop(r.ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.d.Stop(r.ctx); err != nil {
			t.Fatalf("a second Stop: %v", err)
		}
		r.finished("chat-2")
		if n, _ := r.d.RunDue(r.ctx); n != 0 {
			t.Errorf("a stopped deliverer attempted %d", n)
		}
	})
}

// Stop lets an attempt in flight finish until its deadline, then abandons it: not counted,
// the lease freed, due again at once for whoever runs next.
func TestStopAbandonsAnAttemptPastItsDeadline(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newDeliveryRig(t, db, scheduler.DeliveriesConfig{AllowPrivate: true, Poll: 20 * time.Millisecond})
		hold := make(chan struct{})
		defer close(hold)
		rcv := newReceiver(t, answer{status: 200, hold: hold})
		w := r.subscribe(rcv.URL, models.EventAll)
		r.finished("chat-1")
		r.stopMidAttempt(rcv)
		d := r.one(w.ID)
		if d.Status != models.DeliveryPending || d.Attempts != 0 || d.LeaseOwner != nil || d.LeaseUntil != nil || len(r.attempts(d.ID)) != 0 {
			t.Fatalf("delivery after an abandoned attempt = %+v", d)
		}
	})
}

func TestConfigIsValidated(t *testing.T) {
	t.Parallel()
	clk := clocktest.NewFake(owedtest.Start)
	for _, cfg := range []scheduler.DeliveriesConfig{{Timeout: time.Minute, Lease: 30 * time.Second},
		{Timeout: time.Minute, Lease: time.Minute}, // the lease must exceed the timeout, not equal it
		{Concurrency: -1}, {Timeout: -time.Second}} {
		if _, err := scheduler.NewDeliveries(nil, clk, nil, nil, cfg); err == nil {
			t.Errorf("New accepted %+v", cfg)
		}
	}
	d, err := scheduler.NewDeliveries(nil, clk, nil, nil, scheduler.DeliveriesConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Config(); c.Timeout != 15*time.Second || c.Lease != 2*time.Minute || c.Concurrency != 16 || c.Poll != time.Second ||
		c.MaxRetryAfter != 24*time.Hour || c.Owner == "" || c.AllowPrivate || c.UserAgent != "owed-webhooks" {
		t.Errorf("defaults = %+v", c)
	}
}

func TestRetryScheduleAndJitter(t *testing.T) {
	t.Parallel()
	want := []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour, 10 * time.Hour}
	for i, w := range want {
		if got := scheduler.DeliveryRetryDelay(i + 1); got != w {
			t.Errorf("DeliveryRetryDelay(%d) = %s, want %s", i+1, got, w)
		}
	}
	if got := scheduler.DeliveryRetryDelay(1000); got != 10*time.Hour {
		t.Errorf("DeliveryRetryDelay(1000) = %s: a delivery is never given up", got)
	}
}
