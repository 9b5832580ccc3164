package scheduler_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/scheduler"
)

// disagreeing makes a candidate model that blocks, at 0.7, every item whose text says "spam",
// allows the rest at 0.8, and scores art 0.4 on every run; the live fake allows all at 0.9 and
// scores its default.
func disagreeing(t testing.TB) *modeltest.Fake {
	cand := modeltest.New(t)
	cand.AnswerBy(func(text string) (string, float64) {
		if strings.Contains(text, "spam") {
			return "block", 0.7
		}
		return "allow", 0.8
	}, func(string) float64 { return 0.4 })
	return cand
}

// shadowRig is a rig whose runner has the candidate cand (its verdicts and scores shadowed),
// recorded in the database as app does at start.
func shadowRig(t testing.TB, db string, cand *modeltest.Fake, limit int64, opts ...rigOption) *rig {
	t.Helper()
	sh := &scheduler.ShadowConfig{Model: cand.Client(), Name: "critic-2", Rubric: "art-v2", Screens: true, DailyLimit: limit}
	r := newRig(t, db, append(opts, withConfig(func(c *scheduler.ContentConfig) { c.Shadow = sh }))...)
	name := sh.Candidate()
	if err := r.store.SetCandidate(r.ctx, &name, true); err != nil {
		t.Fatal(err)
	}
	return r
}

// untouched is what an author sees and is charged, which no shadow call may change: their
// view's version, their spend, the events and the webhook deliveries.
func (r *rig) untouched(userID int64) [4]int64 {
	r.t.Helper()
	return [4]int64{
		r.Count(`SELECT version FROM mine_versions WHERE user_id = ?`, userID),
		r.spent(userID),
		r.Count(`SELECT COUNT(*) FROM events`),
		r.Count(`SELECT COUNT(*) FROM webhook_deliveries`),
	}
}

func TestShadowRecordsBesideTheLiveAndActsOnNothing(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		cand := disagreeing(t)
		r := shadowRig(t, db, cand, 0)
		r.exec(`INSERT INTO webhooks (url, secret, events, active, created_at) VALUES ('https://hooks.example/x', 's', '["*"]', 1, ?)`, r.nowMs())
		u := r.user("ada")
		ham, spam := r.pitch(u, "a pitch for a song"), r.pitch(u, "buy spam now")
		_, rev := r.song(u, "tune", `s("bd sn")`)
		if n, err := r.content.Sweep(r.ctx, 0); err != nil || n != 4 { // two pitches, the revision's screen and score
			t.Fatalf("live sweep ran %d, %v; want 4", n, err)
		}
		if got := r.Count(`SELECT COUNT(*) FROM shadow_jobs`); got != 4 {
			t.Fatalf("shadow jobs owed = %d, want 4 (three verdicts, one score)", got)
		}
		before := r.untouched(u)
		if n, err := r.content.SweepShadow(r.ctx); err != nil || n != 4 {
			t.Fatalf("shadow sweep ran %d, %v; want 4", n, err)
		}
		if after := r.untouched(u); after != before {
			t.Errorf("the shadow changed what the author sees or is charged: [version spent events deliveries] %v, was %v", after, before)
		}
		if got := r.Count(`SELECT COUNT(*) FROM shadow_jobs`); got != 0 {
			t.Errorf("shadow jobs left = %d, want 0", got)
		}
		for _, c := range []struct {
			kind    models.Kind
			id      int64
			verdict string
		}{{models.KindPitch, ham, "allow"}, {models.KindPitch, spam, "block"}, {models.KindRevision, rev, "allow"}} {
			if n := r.Count(`SELECT COUNT(*) FROM shadow_screens WHERE kind = ? AND item_id = ? AND model = 'critic-2'
				AND verdict = ? AND live_verdict = 'allow'`, c.kind, c.id, c.verdict); n != 1 {
				t.Errorf("%s %d: no shadow verdict %s beside the live allow", c.kind, c.id, c.verdict)
			}
			if n := r.Count(`SELECT COUNT(*) FROM screens WHERE kind = ? AND item_id = ? AND verdict = 'allow'`, c.kind, c.id); n != 1 {
				t.Errorf("%s %d: the live verdict changed", c.kind, c.id)
			}
		}
		if n := r.Count(`SELECT COUNT(*) FROM shadow_scores WHERE revision_id = ? AND rubric = 'art-v2' AND live_rubric = ?
			AND art > 0.39 AND art < 0.41`, rev, scheduler.RubricID); n != 1 {
			t.Errorf("no shadow score of art 0.4 under art-v2 beside the live one")
		}
		for _, req := range cand.Requests() {
			if req.Task == "score" && (req.Rubric != "art-v2" || req.Spec != scheduler.Rubrics["art-v2"] || req.Model != "critic-2") {
				t.Errorf("candidate asked with model %q rubric %q", req.Model, req.Rubric)
			}
		}
	})
}

func TestShadowNeverClaimedAheadOfLiveWork(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		cand := disagreeing(t)
		r := shadowRig(t, db, cand, 0)
		u := r.user("ada")
		old := r.pitch(u, "settled long ago")
		r.exec(`INSERT INTO screens (kind, item_id, verdict, confidence, screened_at) VALUES ('pitch', ?, 'allow', 0.9, ?)`, old, r.nowMs()-3600_000)
		r.exec(`UPDATE shadow_jobs SET due_at = ?`, r.nowMs()-3600_000) // owed an hour before the backlog
		for i := range 20 {
			r.pitch(u, "backlog "+itoa(int64(i)))
		}
		// A backlog of live work: no shadow claim takes anything, the older shadow job included.
		if jobs, err := r.store.ClaimShadow(r.ctx, 10, time.Minute, "w"); err != nil || len(jobs) != 0 {
			t.Fatalf("shadow claim under a live backlog took %d (%v), want none", len(jobs), err)
		}
		if n, err := r.content.SweepShadow(r.ctx); err != nil || n != 0 || cand.Calls() != 0 {
			t.Fatalf("shadow sweep under a live backlog ran %d (%v), candidate called %d times; want none", n, err, cand.Calls())
		}
		// One live job leased by a worker is not due: the shadow may run beside it; a held task's
		// live jobs hold nothing back either (their own shadow work is held too).
		if _, err := r.store.ClaimDue(r.ctx, 20, time.Minute, "elsewhere", 0); err != nil {
			t.Fatal(err)
		}
		if jobs, err := r.store.ClaimShadow(r.ctx, 10, time.Minute, "w"); err != nil || len(jobs) != 1 || jobs[0].ItemID != old {
			t.Fatalf("with the live jobs leased the shadow claim took %v (%v), want pitch %d's", jobs, err, old)
		}
		r.exec(`UPDATE content_jobs SET lease_until = NULL, lease_owner = NULL`)
		r.exec(`UPDATE holds SET screen = 1`)
		r.exec(`INSERT INTO shadow_jobs (task, kind, item_id, due_at) VALUES ('score', 'revision', 999, 0)`)
		if jobs, err := r.store.ClaimShadow(r.ctx, 10, time.Minute, "w2"); err != nil || len(jobs) != 1 || jobs[0].Task != models.TaskScore {
			t.Fatalf("with screens held the shadow claim took %v (%v), want the shadow score alone", jobs, err)
		}
	})
}

func TestShadowDailyLimit(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		cand := disagreeing(t)
		r := shadowRig(t, db, cand, 2)
		u := r.user("ada")
		for i := range 3 {
			r.pitch(u, "pitch "+itoa(int64(i)))
		}
		if _, err := r.content.Sweep(r.ctx, 0); err != nil {
			t.Fatal(err)
		}
		if n, err := r.content.SweepShadow(r.ctx); err != nil || n != 3 {
			t.Fatalf("shadow sweep ran %d (%v), want 3", n, err)
		}
		if got, calls := r.Count(`SELECT COUNT(*) FROM shadow_screens`), cand.Calls(); got != 2 || calls != 2 {
			t.Fatalf("recorded %d, called %d; want 2 of each (the day's limit)", got, calls)
		}
		reset := models.BudgetReset(r.clk.Now()).UnixMilli()
		if n := r.Count(`SELECT COUNT(*) FROM shadow_jobs WHERE why = 'budget' AND due_at = ? AND attempts = 0`, reset); n != 1 {
			t.Fatalf("the job past the limit does not wait for 00:00 UTC")
		}
		r.clk.Set(time.UnixMilli(reset))
		if n, err := r.content.SweepShadow(r.ctx); err != nil || n != 1 {
			t.Fatalf("next day's shadow sweep ran %d (%v), want 1", n, err)
		}
		if got := r.Count(`SELECT COUNT(*) FROM shadow_screens`); got != 3 {
			t.Errorf("recorded %d after the day turned, want 3", got)
		}
	})
}

func TestShadowFailureBacksOff(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		cand := disagreeing(t)
		r := shadowRig(t, db, cand, 0)
		u := r.user("ada")
		p := r.pitch(u, "a pitch")
		if _, err := r.content.Sweep(r.ctx, 0); err != nil {
			t.Fatal(err)
		}
		cand.Handle(nil)
		cand.Fail(http.StatusBadGateway, nil)
		if n, err := r.content.SweepShadow(r.ctx); err != nil || n != 1 {
			t.Fatalf("shadow sweep ran %d (%v), want 1", n, err)
		}
		due := r.clk.Now().Add(scheduler.Backoff(0)).UnixMilli()
		if n := r.Count(`SELECT COUNT(*) FROM shadow_jobs WHERE item_id = ? AND why = 'upstream' AND attempts = 1 AND due_at = ?
			AND lease_owner IS NULL`, p, due); n != 1 {
			t.Fatalf("the failed shadow call is not rescheduled after its backoff")
		}
		if n := r.Count(`SELECT COUNT(*) FROM screens WHERE kind = 'pitch' AND item_id = ? AND verdict = 'allow'`, p); n != 1 {
			t.Errorf("the live verdict changed")
		}
	})
}

func TestShadowBreakerOfItsOwn(t *testing.T) {
	owedtest.Dialects(t, func(t *testing.T, db string) {
		cand := disagreeing(t)
		r := shadowRig(t, db, cand, 0, withConfig(func(c *scheduler.ContentConfig) { c.ModelBreaker = 2 }))
		u := r.user("ada")
		for i := range 3 {
			r.allowedRevision(u, "song", `s("bd")`+itoa(int64(i)))
		}
		if _, err := r.content.Sweep(r.ctx, 0); err != nil {
			t.Fatal(err)
		}
		// Shadow scores alone: each holds the candidate's whole cap, so they run one at a time.
		r.exec(`DELETE FROM shadow_jobs WHERE task = 'screen'`)
		cand.Handle(nil)
		cand.Fail(http.StatusServiceUnavailable, nil)
		// Two failures in a row open the candidate's breaker: the third score is not asked.
		if n, err := r.content.SweepShadow(r.ctx); err != nil || n != 2 || cand.Calls() > 2*scheduler.ScoreRuns {
			t.Fatalf("shadow sweep ran %d (%v), candidate called %d times; want 2 scores, at most 6 calls", n, err, cand.Calls())
		}
		if n := r.Count(`SELECT COUNT(*) FROM shadow_jobs WHERE attempts = 0 AND lease_owner IS NULL`); n != 1 {
			t.Fatalf("%d shadow jobs left unasked, want 1", n)
		}
		// The live model's breaker is not the candidate's: live work goes on.
		p := r.pitch(u, "live work")
		if n, err := r.content.Sweep(r.ctx, 0); err != nil || n != 1 {
			t.Fatalf("live sweep ran %d (%v) with the candidate's breaker open, want 1", n, err)
		}
		r.NoJob(models.TaskScreen, models.KindPitch, p)
		if n, err := r.content.SweepShadow(r.ctx); err != nil || n != 0 {
			t.Fatalf("shadow sweep with its breaker open ran %d (%v), want none", n, err)
		}
		// Past the probe backoff the next call probes; an answer closes the breaker.
		cand.Reset()
		r.clk.Advance(5 * time.Second)
		if n, err := r.content.SweepShadow(r.ctx); err != nil || n != 2 {
			t.Fatalf("shadow sweep after the probe backoff ran %d (%v), want 2 (the unasked score, the new screen)", n, err)
		}
	})
}
