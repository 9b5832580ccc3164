package scheduler_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/scheduler"
)

// Every attempt leaves one line in the log given to the runner: at info, or at warn for a 410
// that disables the subscription, with the attempt's number, its outcome, its status and, for a
// retry only, when the delivery comes due again. A delivery let go unattempted at a stop is not
// an error.
func TestDeliveryLogsOneLineAnAttempt(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		var logs syncBuffer
		r := newDeliveryRigLogging(t, db, scheduler.DeliveriesConfig{AllowPrivate: true, Concurrency: 1, Poll: time.Hour},
			jsonLog(&logs))
		retried := r.subscribe(newReceiver(t, answer{status: http.StatusServiceUnavailable}).URL, models.EventAll)
		gone := r.subscribe(newReceiver(t, answer{status: http.StatusGone}).URL, models.EventAll)
		r.finished("chat-1")
		r.run(2)
		due := r.one(retried.ID).DueAt
		r.clk.Advance(time.Hour)
		r.run(1)

		byHook := map[int64][]map[string]any{}
		for _, l := range logs.lines() {
			if l["msg"] == "webhook delivery" {
				id := int64(l["webhookId"].(float64))
				byHook[id] = append(byHook[id], l)
			}
		}
		type want struct {
			level, outcome string
			attempt        float64
			status         float64
			next           bool
		}
		check := func(hook int64, wants ...want) {
			t.Helper()
			got := byHook[hook]
			if len(got) != len(wants) {
				t.Fatalf("webhook %d: log lines %v, want %d", hook, got, len(wants))
			}
			for i, w := range wants {
				l := got[i]
				if l["level"] != w.level || l["outcome"] != w.outcome || l["attempt"] != w.attempt || l["status"] != w.status {
					t.Errorf("webhook %d, line %d: %v; want level %s, outcome %s, attempt %v, status %v", hook, i, l,
						w.level, w.outcome, w.attempt, w.status)
				}
				next, ok := l["nextAttemptAt"].(string)
				if ok != w.next {
					t.Errorf("webhook %d, line %d: nextAttemptAt %v, want it only on a retry", hook, i, l["nextAttemptAt"])
				}
				if ok {
					at, err := time.Parse(time.RFC3339Nano, next)
					if err != nil || !at.Truncate(time.Millisecond).Equal(due) {
						t.Errorf("webhook %d, line %d: nextAttemptAt %s, want the delivery's due time %s", hook, i, next, due)
					}
				}
			}
		}
		check(retried.ID, want{"INFO", models.AttemptRetry, 1, 503, true}, want{"INFO", models.AttemptDelivered, 2, 204, false})
		check(gone.ID, want{"WARN", models.AttemptGone, 1, 410, false})

		// An attempt a stop cuts off is released as it was, quietly.
		hold := make(chan struct{})
		defer close(hold)
		rcv := newReceiver(t, answer{status: 200, hold: hold})
		r.subscribe(rcv.URL, models.EventAll)
		r.finished("chat-2")
		r.stopMidAttempt(rcv)
		if errs := errorLines(logs.lines()); len(errs) != 0 {
			t.Errorf("error lines %v; want none (nothing failed)", errs)
		}
	})
}

// Any 2xx delivers, from 200 to 299; a 300 (a redirect is never followed) is retried like any
// other answer.
func TestDeliveryIsDeliveredByEvery2xxOnly(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		r := newDeliveryRig(t, db, scheduler.DeliveriesConfig{AllowPrivate: true})
		want := map[int]models.DeliveryStatus{200: models.DeliveryDelivered, 299: models.DeliveryDelivered,
			300: models.DeliveryPending}
		hooks := map[int]int64{}
		for status := range want {
			hooks[status] = r.subscribe(newReceiver(t, answer{status: status}).URL, models.EventAll).ID
		}
		r.finished("chat-1")
		r.run(len(want))
		for status, st := range want {
			d := r.one(hooks[status])
			if d.Status != st || d.LastStatus == nil || *d.LastStatus != status {
				t.Errorf("answered %d: delivery %+v, want %s", status, d, st)
			}
		}
	})
}
