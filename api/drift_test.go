package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/scheduler"
)

// anchorsOf lists the anchor set through the API.
func anchorsOf(w *world) []map[string]any {
	w.t.Helper()
	r := w.do(http.MethodGet, "/api/admin/anchors", asAdmin, nil)
	if r.Status != http.StatusOK {
		w.t.Fatalf("anchors: %d %s", r.Status, r.Body)
	}
	var out []map[string]any
	for _, a := range list(r.JSON()["anchors"]) {
		out = append(out, obj(a))
	}
	return out
}

// TestAnchorsAddListDelete: an anchor is added for an existing item with its verdict, art or
// both, listed, audited and deleted; bad input answers in the error shape and changes nothing;
// the same item again is 409 conflict.
func TestAnchorsAddListDelete(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		p := w.pitch(asAuthor, models.VerdictBlock)
		_, rev := w.song(asAuthor, models.VerdictAllow)
		a := obj(w.created("/api/admin/anchors", asAdmin, map[string]any{"kind": "pitch", "itemId": p, "verdict": "block"})["anchor"])
		if a["kind"] != "pitch" || num(a["itemId"]) != p || a["verdict"] != "block" || a["art"] != nil || a["createdAt"] == "" {
			t.Errorf("pitch anchor %v", a)
		}
		b := obj(w.created("/api/admin/anchors", asAdmin, map[string]any{"kind": "revision", "itemId": rev, "verdict": "allow", "art": 0.61})["anchor"])
		if b["verdict"] != "allow" || b["art"] != 0.61 {
			t.Errorf("revision anchor %v", b)
		}
		if got := anchorsOf(w); len(got) != 2 || num(got[0]["id"]) != num(a["id"]) || num(got[1]["id"]) != num(b["id"]) {
			t.Errorf("anchors %v, want the two, oldest first", got)
		}

		before := w.snapshot()
		for _, c := range []struct {
			body        map[string]any
			status      int
			code, field string
			what        string
		}{
			{map[string]any{"kind": "song", "itemId": p, "verdict": "allow"}, 400, "invalid", "kind", "an unknown kind"},
			{map[string]any{"kind": "pitch", "itemId": 0, "verdict": "allow"}, 400, "invalid", "itemId", "no item id"},
			{map[string]any{"kind": "pitch", "itemId": p}, 400, "invalid", "verdict", "neither verdict nor art"},
			{map[string]any{"kind": "pitch", "itemId": p, "verdict": "maybe"}, 400, "invalid", "verdict", "an unknown verdict"},
			{map[string]any{"kind": "revision", "itemId": rev, "art": 1.5}, 400, "invalid", "art", "art above 1"},
			{map[string]any{"kind": "revision", "itemId": rev, "art": -0.1}, 400, "invalid", "art", "art below 0"},
			{map[string]any{"kind": "pitch", "itemId": p, "art": 0.5}, 400, "invalid", "art", "art of a pitch"},
			{map[string]any{"kind": "pitch", "itemId": p, "verdict": "allow", "extra": 1}, 400, "invalid", "", "an unknown field"},
			{map[string]any{"kind": "pitch", "itemId": p + 1000, "verdict": "allow"}, 404, "not_found", "", "a missing item"},
			{map[string]any{"kind": "pitch", "itemId": p, "verdict": "allow"}, 409, "conflict", "itemId", "an item already anchored"},
		} {
			r := w.do(http.MethodPost, "/api/admin/anchors", asAdmin, c.body)
			if c.field == "" && c.status == 400 {
				if r.Status != 400 || r.ErrorCode() != "invalid" {
					t.Errorf("%s: %d %s", c.what, r.Status, r.Body)
				}
				continue
			}
			t.Run(c.what, func(t *testing.T) { checkError(t, r, c.status, c.code, c.field) })
		}
		checkError(t, w.do(http.MethodDelete, fmt.Sprintf("/api/admin/anchors/%d", num(b["id"])+100), asAdmin, nil), 404, "not_found", "")
		w.unchanged(t, before, "refused anchor writes")

		if r := w.do(http.MethodDelete, fmt.Sprintf("/api/admin/anchors/%d", num(a["id"])), asAdmin, nil); r.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if got := anchorsOf(w); len(got) != 1 || num(got[0]["id"]) != num(b["id"]) {
			t.Errorf("anchors after the delete %v", got)
		}
		adds := list(w.do(http.MethodGet, "/api/admin/audit?action=anchor.add", asAdmin, nil).JSON()["entries"])
		dels := list(w.do(http.MethodGet, "/api/admin/audit?action=anchor.delete", asAdmin, nil).JSON()["entries"])
		if len(adds) != 2 || len(dels) != 1 || obj(obj(dels[0])["before"])["verdict"] != "block" ||
			obj(dels[0])["target"] != fmt.Sprintf("anchor:%d", num(a["id"])) {
			t.Errorf("audit: adds %v deletes %v", adds, dels)
		}
		// Deleted, the item may be anchored again, with another expectation.
		w.created("/api/admin/anchors", asAdmin, map[string]any{"kind": "pitch", "itemId": p, "verdict": "allow"})
	})
}

// shadowDrift reads the drift member of GET /api/admin/shadow.
func shadowDrift(w *world) map[string]any {
	w.t.Helper()
	r := w.do(http.MethodGet, "/api/admin/shadow", asAdmin, nil)
	if r.Status != http.StatusOK {
		w.t.Fatalf("shadow: %d %s", r.Status, r.Body)
	}
	return obj(r.JSON()["drift"])
}

// metricValue reads one sample of /metrics ("" when absent).
func metricValue(w *world, sample string) string {
	w.t.Helper()
	body := string(w.do(http.MethodGet, "/metrics", asAnon, nil).Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

// TestDriftFiresOnceWhenTheModelDrifts: a fake model that keeps to the anchor set raises
// nothing however often it is run; once it drifts, model.drift is raised once (a run, a
// metric, one delivery that reaches its receiver) and not again while it stays drifted; a run
// the model cannot answer, or one while work is held, records nothing; back within bounds
// re-arms the alert, and drifting by art raises it again. No verdict, score or budget changes.
func TestDriftFiresOnceWhenTheModelDrifts(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, allowPrivate).quiet()
		rcv := newHookReceiver(t)
		subscribe(w, rcv.URL+"/drift", "model.drift")
		model := w.env.Model
		model.SetVerdict("allow", 0.95)
		var anchors []int64
		for range 4 {
			anchors = append(anchors, w.pitch(asAuthor, models.VerdictAllow))
		}
		for _, p := range anchors {
			w.created("/api/admin/anchors", asAdmin, map[string]any{"kind": "pitch", "itemId": p, "verdict": "allow"})
		}
		_, rev := w.song(asAuthor, models.VerdictAllow)
		w.created("/api/admin/anchors", asAdmin, map[string]any{"kind": "revision", "itemId": rev, "art": 0.5})
		drift := w.env.App.Drift
		run := func(what string) scheduler.DriftOutcome {
			t.Helper()
			w.env.Clock.Advance(time.Hour)
			out, err := drift.Run(context.Background())
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return out
		}
		deliveries := func() int64 {
			var n int64
			w.store().RawScan(t.Context(), &n, `SELECT COUNT(*) FROM webhook_deliveries WHERE event = 'model.drift'`)
			return n
		}
		spent := func() int64 {
			var n int64
			w.store().RawScan(t.Context(), &n, `SELECT COALESCE(SUM(spent), 0) FROM budgets`)
			return n
		}
		spentBefore := spent()

		// The model holds: in bounds, run after run, and nothing raised.
		for i := range 3 {
			out := run("holding")
			if out.Run == nil || out.Run.Drifted || out.Run.Alerted || out.Run.Compared != 5 || *out.Run.Agreement != 1 || *out.Run.MeanArtShift != 0 {
				t.Fatalf("holding run %d: %+v %v", i, out.Run, out.Skipped)
			}
		}
		if n := deliveries(); n != 0 || metricValue(w, "owed_drift_alerts_total") != "0" {
			t.Errorf("while the model holds: %d deliveries, alerts %s", n, metricValue(w, "owed_drift_alerts_total"))
		}

		// It drifts on verdicts: 1 of 4 still agrees (0.25 < 0.9). Raised once, then quiet.
		model.SetVerdict("block", 0.95)
		first := run("drifted")
		if first.Run == nil || !first.Run.Drifted || !first.Run.Alerted || *first.Run.Agreement != 0 {
			t.Fatalf("first drifted run: %+v %q", first.Run, first.Skipped)
		}
		for range 2 {
			if out := run("still drifted"); out.Run == nil || !out.Run.Drifted || out.Run.Alerted {
				t.Fatalf("a drifted run after the first: %+v %q", out.Run, out.Skipped)
			}
		}
		if n := deliveries(); n != 1 {
			t.Errorf("%d model.drift deliveries, want 1", n)
		}
		if a, d := metricValue(w, "owed_drift_alerts_total"), metricValue(w, "owed_model_drifted"); a != "1" || d != "1" {
			t.Errorf("metrics: alerts %s drifted %s, want 1 and 1", a, d)
		}
		deliver(w)
		got := rcv.requests()
		if len(got) != 1 {
			t.Fatalf("the receiver got %d requests, want 1", len(got))
		}
		var body struct {
			Type string                `json:"type"`
			Data models.ModelDriftData `json:"data"`
		}
		if err := json.Unmarshal(got[0].body, &body); err != nil || body.Type != "model.drift" || body.Data.Model != "critic" ||
			body.Data.Compared != 5 || body.Data.Agreement == nil || *body.Data.Agreement != 0 || body.Data.MeanArtShift == nil ||
			body.Data.Alert != 0.9 || body.Data.ArtShiftMax != 0.06 || !body.Data.At.Equal(first.Run.At) {
			t.Errorf("model.drift body %s (%v)", got[0].body, err)
		}

		// A run the model cannot answer records nothing; nor does one while screens are held.
		runsBefore := len(list(shadowDrift(w)["runs"]))
		model.Fail(http.StatusServiceUnavailable, nil)
		if out := run("model down"); out.Run != nil || !strings.Contains(out.Skipped, "did not answer") {
			t.Errorf("a run with the model down: %+v %q", out.Run, out.Skipped)
		}
		model.Reset()
		model.SetVerdict("allow", 0.95)
		if r := w.do(http.MethodPut, "/api/admin/holds", asAdmin, map[string]any{"screen": true}); r.Status != 200 {
			t.Fatalf("hold: %d %s", r.Status, r.Body)
		}
		if out := run("held"); out.Run != nil || out.Skipped != "model work is held" {
			t.Errorf("a run while screens are held: %+v %q", out.Run, out.Skipped)
		}
		if r := w.do(http.MethodPut, "/api/admin/holds", asAdmin, map[string]any{"screen": false}); r.Status != 200 {
			t.Fatalf("lift: %d %s", r.Status, r.Body)
		}
		if n := len(list(shadowDrift(w)["runs"])); n != runsBefore {
			t.Errorf("%d runs after two that could not complete, want %d", n, runsBefore)
		}
		if s := metricValue(w, `owed_drift_runs_total{result="skipped"}`); s != "2" {
			t.Errorf("skipped runs metric %s, want 2", s)
		}

		// Back within bounds re-arms; drifting by art (0.5 → 0.6: above 0.06) raises it again.
		if out := run("back"); out.Run == nil || out.Run.Drifted || out.Run.Alerted {
			t.Fatalf("back within bounds: %+v %q", out.Run, out.Skipped)
		}
		model.SetArt(func(int) modelclient.ArtRun {
			return modelclient.ArtRun{Art: 0.6, Criteria: map[string]float64{"melody": 0.6, "rhythm": 0.6}}
		})
		if out := run("art drift"); out.Run == nil || !out.Run.Drifted || !out.Run.Alerted || *out.Run.Agreement != 1 ||
			*out.Run.MeanArtShift < 0.0999 || *out.Run.MeanArtShift > 0.1001 {
			t.Fatalf("art drift: %+v %q", out.Run, out.Skipped)
		}
		if n := deliveries(); n != 2 || metricValue(w, "owed_drift_alerts_total") != "2" {
			t.Errorf("after drifting again: %d deliveries, alerts %s; want 2 and 2", n, metricValue(w, "owed_drift_alerts_total"))
		}

		// The drift member: newest first, with the settings and the set's size.
		d := shadowDrift(w)
		runs := list(d["runs"])
		if d["every"] != "24h" || d["alert"] != 0.9 || d["artShiftMax"] != 0.06 || num(d["anchors"]) != 5 || len(runs) != 8 {
			t.Fatalf("drift member %v", d)
		}
		newest, oldest := obj(runs[0]), obj(runs[len(runs)-1])
		if newest["drifted"] != true || newest["alerted"] != true || oldest["drifted"] != false || !(newest["at"].(string) > oldest["at"].(string)) {
			t.Errorf("runs not newest first: newest %v oldest %v", newest, oldest)
		}
		var alerted int
		for _, r := range runs {
			if obj(r)["alerted"] == true {
				alerted++
			}
		}
		if alerted != 2 {
			t.Errorf("%d alerted runs, want 2", alerted)
		}

		// Nothing the drift runs asked changed a verdict, a score or a budget.
		var blocked, scores int64
		w.store().RawScan(t.Context(), &blocked, `SELECT COUNT(*) FROM screens WHERE verdict = 'block'`)
		w.store().RawScan(t.Context(), &scores, `SELECT COUNT(*) FROM scores`)
		if blocked != 0 || scores != 0 {
			t.Errorf("drift runs recorded %d blocks and %d scores", blocked, scores)
		}
		if after := spent(); after != spentBefore {
			t.Errorf("budgets changed: %d calls spent → %d", spentBefore, after)
		}
	})
}

// TestDriftRunsWhenDue: the scheduled check runs the anchor set only when no run completed
// within OWED_DRIFT_EVERY, and a run that could not complete leaves the next check due.
func TestDriftRunsWhenDue(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		p := w.pitch(asAuthor, models.VerdictAllow)
		w.created("/api/admin/anchors", asAdmin, map[string]any{"kind": "pitch", "itemId": p, "verdict": "allow"})
		drift := w.env.App.Drift
		due := func(what string, want bool) {
			t.Helper()
			out, ok, err := drift.RunDue(context.Background())
			if err != nil || ok != want {
				t.Fatalf("%s: ran %v (%+v), want %v: %v", what, ok, out, want, err)
			}
		}
		w.env.Model.Fail(http.StatusBadGateway, nil)
		due("no run yet, the model down", true)
		w.env.Model.Reset()
		due("no run completed yet", true)
		due("a run just completed", false)
		w.env.Clock.Advance(23 * time.Hour)
		due("23 h later", false)
		w.env.Clock.Advance(time.Hour)
		due("24 h later", true)
		if n := len(list(shadowDrift(w)["runs"])); n != 2 {
			t.Errorf("%d runs, want 2", n)
		}

		// Another replica (a runner of its own lease owner) does not run the set while this one
		// holds the chore, and takes it over once the lease has run out.
		other := scheduler.NewDrift(w.env.Quiet(), drift.Config())
		if out, err := other.Run(context.Background()); err != nil || out.Run != nil || !strings.Contains(out.Skipped, "another replica") {
			t.Errorf("another replica ran the set while this one held it: %+v %v", out, err)
		}
		w.env.Clock.Advance(31 * time.Minute)
		if out, err := other.Run(context.Background()); err != nil || out.Run == nil {
			t.Errorf("another replica after the lease ran out: %+v %v", out, err)
		}
	})
}
