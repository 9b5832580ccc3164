package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
	"github.com/owed/owed/webhooks"
)

// hookRig is a store with webhook subscriptions to look at.
type hookRig struct {
	t     *testing.T
	ctx   context.Context
	store *models.Store
}

func newHookRig(t *testing.T, db string) *hookRig {
	return &hookRig{t: t, ctx: context.Background(), store: owedtest.Store(t, db, clocktest.NewFake(owedtest.Start))}
}

func (h *hookRig) subscribe(events ...string) int64 {
	h.t.Helper()
	w, err := h.store.CreateWebhook(h.ctx, "https://hooks.example/owed", events, webhooks.NewSecret())
	if err != nil {
		h.t.Fatal(err)
	}
	return w.ID
}

// payloads lists the events and data owed to a webhook, oldest first.
func (h *hookRig) payloads(webhookID int64) []map[string]any {
	h.t.Helper()
	ds, err := h.store.ListDeliveries(h.ctx, webhookID, "", 0, 100)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []map[string]any
	for i := len(ds) - 1; i >= 0; i-- {
		d, err := h.store.DeliveryByID(h.ctx, ds[i].ID)
		if err != nil {
			h.t.Fatal(err)
		}
		var p map[string]any
		if err := json.Unmarshal([]byte(d.Payload), &p); err != nil {
			h.t.Fatalf("payload %q: %v", d.Payload, err)
		}
		if p["type"] != d.Event || d.Status != models.DeliveryPending || !d.DueAt.Equal(owedtest.Start) {
			h.t.Errorf("delivery %+v with payload type %v", d, p["type"])
		}
		out = append(out, p)
	}
	return out
}

func (h *hookRig) screen(kind models.Kind, id, user int64, verdict models.Verdict) bool {
	h.t.Helper()
	ok, err := h.store.RecordScreen(h.ctx, kind, id, verdict, 0.75, models.Event{Event: models.TaskScreen, Kind: kind, ItemID: id, UserID: user, Outcome: models.EventOutcome(verdict)})
	if err != nil {
		h.t.Fatal(err)
	}
	return ok
}

func (h *hookRig) author() int64 {
	h.t.Helper()
	u, _, err := h.store.CreateUser(h.ctx, "ann", models.RoleAuthor)
	if err != nil {
		h.t.Fatal(err)
	}
	return u.ID
}

func TestVerdictsAndScoresOweTheirWebhooks(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		h := newHookRig(t, db)
		screened := h.subscribe(models.EventItemScreened)
		scored := h.subscribe(models.EventSongScored)
		all := h.subscribe(models.EventAll)
		off := h.subscribe(models.EventAll)
		if _, err := h.store.SetWebhookActive(h.ctx, off, false, models.DisabledByAdmin); err != nil {
			t.Fatal(err)
		}
		user := h.author()
		song, rev, err := h.store.CreateSong(h.ctx, user, "Tide", `s("bd")`)
		if err != nil {
			t.Fatal(err)
		}
		pitch, err := h.store.CreatePitch(h.ctx, user, "hear me")
		if err != nil {
			t.Fatal(err)
		}
		if !h.screen(models.KindRevision, rev.ID, user, models.VerdictAllow) || !h.screen(models.KindPitch, pitch.ID, user, models.VerdictBlock) {
			t.Fatal("verdicts not recorded")
		}
		if h.screen(models.KindPitch, pitch.ID, user, models.VerdictAllow) {
			t.Fatal("a second verdict was recorded")
		}
		sc := models.Score{RevisionID: rev.ID, Art: 0.5, ArtRuns: []float64{0.4, 0.5, 0.6}, Criteria: map[string]float64{"groove": 0.7}, Model: "critic", Rubric: "r1"}
		if ok, err := h.store.RecordScore(h.ctx, sc, models.Event{Event: models.TaskScore, Kind: models.KindRevision, ItemID: rev.ID, UserID: user, Outcome: "scored"}); err != nil || !ok {
			t.Fatalf("record score: %v %v", ok, err)
		}

		got := h.payloads(screened)
		if len(got) != 2 {
			t.Fatalf("item.screened subscriber got %d deliveries, want the two verdicts (not the refused second one, nor the score)", len(got))
		}
		rd, pd := got[0]["data"].(map[string]any), got[1]["data"].(map[string]any)
		if got[0]["type"] != "item.screened" || got[0]["timestamp"] != "2026-11-30T09:00:00.000Z" || rd["kind"] != "revision" ||
			rd["id"] != float64(rev.ID) || rd["userId"] != float64(user) || rd["songId"] != float64(song.ID) || rd["verdict"] != "allow" || rd["confidence"] != 0.75 {
			t.Errorf("revision verdict payload = %v", got[0])
		}
		if _, has := pd["songId"]; has || pd["kind"] != "pitch" || pd["verdict"] != "block" || pd["id"] != float64(pitch.ID) {
			t.Errorf("pitch verdict payload = %v", got[1])
		}
		got = h.payloads(scored)
		if len(got) != 1 {
			t.Fatalf("song.scored subscriber got %d deliveries, want the score only", len(got))
		}
		sd := got[0]["data"].(map[string]any)
		if got[0]["type"] != "song.scored" || sd["revisionId"] != float64(rev.ID) || sd["songId"] != float64(song.ID) || sd["userId"] != float64(user) ||
			sd["art"] != 0.5 || len(sd["artRuns"].([]any)) != 3 || sd["criteria"].(map[string]any)["groove"] != 0.7 || sd["model"] != "critic" || sd["rubric"] != "r1" {
			t.Errorf("score payload = %v", got[0])
		}
		if n := len(h.payloads(all)); n != 3 {
			t.Errorf("* subscriber got %d deliveries, want all 3", n)
		}
		if n := len(h.payloads(off)); n != 0 {
			t.Errorf("a disabled subscriber got %d deliveries", n)
		}
		// One event, one message id, whoever it is delivered to.
		a, _ := h.store.ListDeliveries(h.ctx, screened, "", 0, 10)
		b, _ := h.store.ListDeliveries(h.ctx, all, "", 0, 10)
		if a[0].MsgID != b[1].MsgID || a[0].MsgID == a[1].MsgID {
			t.Errorf("message ids %s %s / %s %s: want one per event", a[0].MsgID, a[1].MsgID, b[0].MsgID, b[1].MsgID)
		}
	})
}

// The delivery row is written in the verdict's transaction: when it cannot be written, the
// verdict is not recorded either, and the screen job is still owed.
func TestWebhookDeliveryCommitsWithTheVerdict(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		h := newHookRig(t, db)
		hook := h.subscribe(models.EventItemScreened)
		user := h.author()
		pitch, err := h.store.CreatePitch(h.ctx, user, "hear me")
		if err != nil {
			t.Fatal(err)
		}
		exec := func(q string) {
			if _, err := h.store.RawExec(h.ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		exec(`ALTER TABLE webhook_deliveries RENAME TO webhook_deliveries_away`)
		ok, err := h.store.RecordScreen(h.ctx, models.KindPitch, pitch.ID, models.VerdictAllow, 0.9, models.Event{Event: models.TaskScreen,
			Kind: models.KindPitch, ItemID: pitch.ID, UserID: user, Outcome: "allow"})
		if err == nil {
			t.Fatalf("RecordScreen without a deliveries table: ok %v, no error", ok)
		}
		exec(`ALTER TABLE webhook_deliveries_away RENAME TO webhook_deliveries`)
		if sc, err := h.store.ScreenOf(h.ctx, models.KindPitch, pitch.ID); err != nil || sc.Verdict != nil {
			t.Fatalf("the verdict was kept without its delivery: %+v %v", sc, err)
		}
		jobs, err := owedtest.ListJobs(h.ctx, h.store, models.JobFilter{Task: models.TaskScreen, Kind: models.KindPitch, ItemID: pitch.ID}, 0, 10)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("screen job after the rollback: %v %v", jobs, err)
		}
		var events int64
		h.store.RawScan(h.ctx, &events, `SELECT COUNT(*) FROM events`)
		if events != 0 {
			t.Fatalf("%d events kept without the verdict", events)
		}
		if !h.screen(models.KindPitch, pitch.ID, user, models.VerdictAllow) || len(h.payloads(hook)) != 1 {
			t.Fatal("the verdict and its delivery, once possible, were not recorded together")
		}

		// EnqueueWebhook joins the caller's transaction: a rollback takes the delivery too.
		err = h.store.WithTx(h.ctx, func(tx *models.Store) error {
			if err := tx.EnqueueWebhook(h.ctx, models.EventItemScreened, map[string]any{"x": 1}); err != nil {
				return err
			}
			return context.Canceled
		})
		if err != context.Canceled || len(h.payloads(hook)) != 1 {
			t.Fatalf("a rolled-back enqueue: %v, %d deliveries", err, len(h.payloads(hook)))
		}
		if err := h.store.EnqueueWebhook(h.ctx, "*", nil); err == nil {
			t.Error("EnqueueWebhook took the event *")
		}
	})
}

// Disabling a subscription answers it as it now stands (inactive, with the reason) and cancels
// its pending deliveries; enabling it again clears the reason.
func TestSetWebhookActiveAnswersTheSubscription(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		h := newHookRig(t, db)
		id := h.subscribe(models.EventItemScreened)
		if err := h.store.EnqueueWebhook(h.ctx, models.EventItemScreened, map[string]any{"n": 1}); err != nil {
			t.Fatal(err)
		}
		w, err := h.store.SetWebhookActive(h.ctx, id, false, "gone")
		if err != nil || w.ID != id || w.Active || w.DisabledReason == nil || *w.DisabledReason != "gone" {
			t.Fatalf("disabled: %+v, %v; want the subscription, inactive, reason gone", w, err)
		}
		if pending, err := h.store.ListDeliveries(h.ctx, id, models.DeliveryPending, 0, 10); err != nil || len(pending) != 0 {
			t.Errorf("pending deliveries after disabling: %d, %v; want none", len(pending), err)
		}
		if cancelled, err := h.store.ListDeliveries(h.ctx, id, models.DeliveryCancelled, 0, 10); err != nil || len(cancelled) != 1 {
			t.Errorf("cancelled deliveries after disabling: %d, %v; want 1", len(cancelled), err)
		}
		if w, err := h.store.SetWebhookActive(h.ctx, id, true, ""); err != nil || !w.Active || w.DisabledReason != nil {
			t.Errorf("enabled again: %+v, %v; want active, no reason", w, err)
		}
	})
}

// Redelivering makes the delivery pending and due now and answers it; a disabled subscription's
// delivery is refused.
func TestRedeliverAnswersTheDelivery(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		h := newHookRig(t, db)
		id := h.subscribe(models.EventItemScreened)
		if err := h.store.EnqueueWebhook(h.ctx, models.EventItemScreened, map[string]any{"n": 1}); err != nil {
			t.Fatal(err)
		}
		pending, err := h.store.ListDeliveries(h.ctx, id, models.DeliveryPending, 0, 10)
		if err != nil || len(pending) != 1 {
			t.Fatalf("deliveries: %+v, %v", pending, err)
		}
		d, err := h.store.Redeliver(h.ctx, pending[0].ID)
		if err != nil || d.ID != pending[0].ID || d.Status != models.DeliveryPending {
			t.Errorf("redeliver: %+v, %v; want the delivery, pending", d, err)
		}
		if _, err := h.store.SetWebhookActive(h.ctx, id, false, "gone"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.store.Redeliver(h.ctx, pending[0].ID); !errors.Is(err, models.ErrWebhookDisabled) {
			t.Errorf("redeliver to a disabled subscription: %v, want ErrWebhookDisabled", err)
		}
	})
}

// TestModelBreakerEventsSayWhenAndUntilWhen: the model.breaker event of an opening says since
// when and when the model is asked next; that of a closing says since when and no next probe.
func TestModelBreakerEventsSayWhenAndUntilWhen(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		h := newHookRig(t, db)
		hook := h.subscribe(models.EventModelBreaker)
		next := owedtest.Start.Add(time.Minute)
		if !openBreaker(t, h.ctx, h.store, next) {
			t.Fatal("open: the breaker was open already")
		}
		if openBreaker(t, h.ctx, h.store, next) {
			t.Error("an open breaker opened again")
		}
		if _, ok, err := h.store.ClaimProbe(h.ctx, "a", next.Add(time.Minute)); err != nil || ok {
			t.Errorf("claim a probe not yet due: %v, %v", ok, err)
		}
		h.store.RawExec(h.ctx, `UPDATE model_breaker SET next_probe_at = ?`, owedtest.Start.UnixMilli())
		if _, ok, err := h.store.ClaimProbe(h.ctx, "a", next); err != nil || !ok {
			t.Fatalf("claim a due probe: %v, %v", ok, err)
		}
		// A probe given up without a call leaves the breaker open with its probe still due.
		if err := h.store.ReleaseProbe(h.ctx, "a"); err != nil {
			t.Fatalf("release the probe: %v", err)
		}
		if b, err := h.store.ReadBreaker(h.ctx); err != nil || b.State != models.BreakerOpen {
			t.Errorf("after the release: %+v, %v; want open", b, err)
		}
		if _, ok, err := h.store.ClaimProbe(h.ctx, "a", next); err != nil || !ok {
			t.Fatalf("claim the released probe: %v, %v", ok, err)
		}
		if _, ok, err := h.store.CloseBreaker(h.ctx, "b", next); err != nil || ok {
			t.Errorf("close by another than the prober: %v, %v", ok, err)
		}
		if _, ok, err := h.store.CloseBreaker(h.ctx, "a", next); err != nil || !ok {
			t.Fatalf("close: %v, %v", ok, err)
		}
		got := h.payloads(hook)
		if len(got) != 2 {
			t.Fatalf("%d model.breaker events, want the opening and the closing", len(got))
		}
		since := owedtest.Start.UTC().Format(time.RFC3339Nano)
		open, closed := got[0]["data"].(map[string]any), got[1]["data"].(map[string]any)
		if open["state"] != "open" || open["since"] != since || open["nextProbeAt"] != next.UTC().Format(time.RFC3339Nano) ||
			open["failures"] != 5.0 || open["status"] != 503.0 {
			t.Errorf("opening = %v", open)
		}
		if closed["state"] != "closed" || closed["since"] != since || closed["nextProbeAt"] != nil {
			t.Errorf("closing = %v", closed)
		}
	})
}
