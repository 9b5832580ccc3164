package api_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// closedPort is an address nothing listens on: a connection to it is refused.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// jobDetail reads GET /api/admin/jobs/{id}.
func (w *world) jobDetail(t *testing.T, id int64) map[string]any {
	t.Helper()
	r := w.do(http.MethodGet, fmt.Sprintf("/api/admin/jobs/%d", id), asAdmin, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("job %d: %d %s", id, r.Status, r.Body)
	}
	return r.JSON()
}

// TestErrorsKept: every attempt that leaves a job waiting keeps what went wrong in words, from
// real faults of a real model endpoint; the job list and the job's detail show the last one;
// the model's key is never in it; with no model configured, jobs, /readyz and the overview say
// so.
func TestErrorsKept(t *testing.T) {
	t.Parallel()
	const key = "sk-never-shown"
	for _, tc := range []struct {
		name   string
		config func(t *testing.T) func(*app.Config)
		fault  func(w *world)
		why    string
		want   string // the error, or its start when it ends in "…"
	}{
		{"503", nil, func(w *world) {
			w.env.Model.Handle(func(rw http.ResponseWriter, r *http.Request) bool {
				rw.Header().Set("Content-Type", "application/json")
				rw.WriteHeader(http.StatusServiceUnavailable)
				rw.Write([]byte(`{"error":"upstream overloaded (key ` + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + `)"}`))
				return true
			})
		}, "upstream", "HTTP 503: upstream overloaded (key [redacted])"},
		{"garbage", nil, func(w *world) { w.env.Model.Garbage() }, "unanswered", "answer is not JSON"},
		{"no verdict", nil, func(w *world) { w.env.Model.SetAnswer(map[string]any{"confidence": 0.4}) }, "unanswered", "answer has no verdict"},
		{"refused", func(t *testing.T) func(*app.Config) {
			addr := closedPort(t)
			return func(c *app.Config) { c.ModelURL = "http://" + addr + "/relay" }
		}, nil, "unreachable", "dial tcp "},
		{"not configured", func(t *testing.T) func(*app.Config) {
			return func(c *app.Config) { c.ModelURL = "" }
		}, nil, "unreachable", "no model configured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owedtest.Dialects(t, func(t *testing.T, db string) {
				configure := []func(*app.Config){func(c *app.Config) { c.ModelKey = key }}
				if tc.config != nil {
					configure = append(configure, tc.config(t))
				}
				w := newWorld(t, db, configure...).quiet()
				if tc.fault != nil {
					tc.fault(w)
				}
				p := w.pitch(asAuthor, "")
				w.sweep()
				job := w.job(models.TaskScreen, models.KindPitch, p)

				matches := func(where string, got any) {
					t.Helper()
					s, _ := got.(string)
					if strings.Contains(s, key) {
						t.Errorf("%s %q holds the model key", where, s)
					}
					if tc.name == "refused" {
						if !strings.HasPrefix(s, tc.want) || !strings.HasSuffix(s, "connect: connection refused") {
							t.Errorf("%s = %q, want dial tcp …: connect: connection refused", where, s)
						}
						return
					}
					if s != tc.want {
						t.Errorf("%s = %q, want %q", where, s, tc.want)
					}
				}
				d := w.jobDetail(t, job.ID)
				j := obj(d["job"])
				if j["why"] != tc.why || num(j["attempts"]) != 1 {
					t.Errorf("job = %v, want why %s after one attempt", j, tc.why)
				}
				matches("job lastError", j["lastError"])
				evs := list(d["events"])
				if len(evs) != 1 {
					t.Fatalf("events = %v, want the one attempt", evs)
				}
				matches("event error", obj(evs[0])["error"])

				r := w.do(http.MethodGet, "/api/admin/jobs?itemId="+fmt.Sprint(p), asAdmin, nil)
				matches("listed lastError", obj(list(r.JSON()["jobs"])[0])["lastError"])
				r = w.do(http.MethodGet, "/api/admin/events?itemId="+fmt.Sprint(p), asAdmin, nil)
				matches("listed event error", obj(list(r.JSON()["events"])[0])["error"])

				ready := w.do(http.MethodGet, "/readyz", asAnon, nil).JSON()
				health := obj(w.do(http.MethodGet, "/api/admin/stats", asAdmin, nil).JSON()["health"])
				if tc.name == "not configured" {
					if ready["model"] != "no model configured" || health["model"] != "no model configured" {
						t.Errorf("readyz %v, overview health %v: want both to say no model configured", ready, health)
					}
				} else if ready["model"] != "configured" || health["model"] != "ok" {
					t.Errorf("readyz %v, overview health %v: want the model configured", ready, health)
				}
			})
		})
	}
}

// TestErrorsCut: a model's error answer is kept as its status line and, for a JSON error, its
// message, cut to 200 characters; a text body is never kept (issue 23).
func TestErrorsCut(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "sqlite:"+t.TempDir()+"/owed.db").quiet()
	body := `{"error":{"message":"` + strings.Repeat("é", 600) + `"}}`
	w.env.Model.Handle(func(rw http.ResponseWriter, r *http.Request) bool {
		rw.WriteHeader(http.StatusBadGateway)
		rw.Write([]byte(body))
		return true
	})
	p := w.pitch(asAuthor, "")
	w.sweep()
	j := obj(w.jobDetail(t, w.job(models.TaskScreen, models.KindPitch, p).ID)["job"])
	s, _ := j["lastError"].(string)
	if n := len([]rune(s)); n != 200 || !strings.HasPrefix(s, "HTTP 502: éé") {
		t.Errorf("lastError has %d characters (%.40q…), want 200", n, s)
	}
	body = strings.Repeat("internal text ", 100)
	p = w.pitch(asAuthor, "")
	w.sweep()
	j = obj(w.jobDetail(t, w.job(models.TaskScreen, models.KindPitch, p).ID)["job"])
	if s, _ := j["lastError"].(string); s != "HTTP 502: Bad Gateway" {
		t.Errorf("lastError of a text answer is %q, want the status line alone", s)
	}
}

// TestHolds: held work is claimed by no claimer (the write's inline screen, the author's view,
// the sweep, the webhook deliverer), charged nothing and asks nothing; its jobs say why held;
// lifting the hold makes them due again.
func TestHolds(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, allowPrivate)
		rcv := newHookReceiver(t)
		subscribe(w, rcv.URL+"/hook", "item.screened")

		holds := func(body any) map[string]any {
			t.Helper()
			r := w.do(http.MethodPut, "/api/admin/holds", asAdmin, body)
			if r.Status != http.StatusOK {
				t.Fatalf("put holds %v: %d %s", body, r.Status, r.Body)
			}
			return r.JSON()
		}
		if got := w.do(http.MethodGet, "/api/admin/holds", asAdmin, nil).JSON(); got["screen"] != false || got["score"] != false || got["deliveries"] != false {
			t.Errorf("holds at start = %v, want nothing held", got)
		}
		if got := holds(map[string]any{"screen": true, "deliveries": true}); got["screen"] != true || got["score"] != false || got["deliveries"] != true {
			t.Errorf("holds = %v", got)
		}
		// A field left out keeps its value.
		if got := holds(map[string]any{"score": false}); got["screen"] != true || got["deliveries"] != true {
			t.Errorf("holds after a partial put = %v", got)
		}

		calls := w.env.Model.Calls()
		// The write's inline screen: pending, why held, no attempt.
		r := w.do(http.MethodPost, "/api/listeners/pitches", asAuthor, map[string]string{"body": "held pitch"})
		if r.Status != http.StatusCreated {
			t.Fatalf("pitch: %d %s", r.Status, r.Body)
		}
		screen := obj(r.JSON()["screen"])
		if screen["state"] != "pending" || screen["why"] != "held" || num(screen["attempts"]) != 0 {
			t.Errorf("inline screen while held = %v, want pending, why held", screen)
		}
		pitch := num(obj(r.JSON()["pitch"])["id"])
		// The author's view and the sweep claim nothing either.
		mine := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).JSON()
		if jobs := list(obj(list(mine["items"])[0])["jobs"]); obj(jobs[0])["why"] != "held" {
			t.Errorf("mine while held: %v", jobs)
		}
		if n := w.sweep(); n != 0 {
			t.Errorf("the sweep ran %d held jobs", n)
		}
		if got := w.env.Model.Calls(); got != calls {
			t.Errorf("the model was asked %d times while screens were held", got-calls)
		}
		if b := obj(mine["budget"]); num(b["spent"]) != 0 {
			t.Errorf("spent %v while held", b)
		}
		job := w.job(models.TaskScreen, models.KindPitch, pitch)
		if job.Attempts != 0 || job.Why != nil {
			t.Errorf("held job row = %+v, want untouched", job)
		}
		if got := w.listedJobs(t, "?why=held"); !slices.Equal(got, []int64{job.ID}) {
			t.Errorf("why=held lists %v, want the held job", got)
		}
		if got := w.listedJobs(t, "?why=none"); len(got) != 0 {
			t.Errorf("why=none lists %v while the job is held", got)
		}
		if st := w.do(http.MethodGet, "/api/admin/stats", asAdmin, nil).JSON(); obj(st["holds"])["screen"] != true {
			t.Errorf("overview holds = %v", st["holds"])
		}

		// Lift the screen hold: the job is due again and runs; its verdict owes a delivery,
		// which stays held.
		holds(map[string]any{"screen": false})
		if got := w.listedJobs(t, "?why=none&state=due"); !slices.Equal(got, []int64{job.ID}) {
			t.Errorf("due after the lift: %v", got)
		}
		if n := w.sweep(); n != 1 {
			t.Errorf("the sweep after the lift ran %d jobs, want 1", n)
		}
		if n := deliver(w); n != 0 || len(rcv.requests()) != 0 {
			t.Errorf("held deliveries: %d attempted, %d received", n, len(rcv.requests()))
		}
		if ds := deliveriesOf(w, 1); len(ds) != 1 || ds[0]["status"] != "pending" || num(ds[0]["attempts"]) != 0 {
			t.Errorf("held delivery = %v, want pending, never attempted", ds)
		}
		holds(map[string]any{"deliveries": false})
		if n := deliver(w); n != 1 || len(rcv.requests()) != 1 {
			t.Errorf("after the lift: %d attempted, %d received, want the delivery", n, len(rcv.requests()))
		}
	})
}

// TestHoldsBadInput: a hold that is not a boolean is refused and changes nothing.
func TestHoldsBadInput(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		before := w.snapshot()
		for _, body := range []string{`{"screen":"yes"}`, `{"screen":1}`, `{"hold":true}`, `[]`, `{"score":null,"x":1}`} {
			r := w.do(http.MethodPut, "/api/admin/holds", asAdmin, body)
			if r.Status != http.StatusBadRequest {
				t.Errorf("put holds %s: %d %s, want 400", body, r.Status, r.Body)
			}
		}
		w.unchanged(t, before, "refused holds")
	})
}

// TestDecideByHand: an admin's verdict settles the screen job as the model's would, is kept
// as an event that says the admin decided, with their id and note, answers the item's screen
// result, owes an allowed revision's score, and is recorded once.
func TestDecideByHand(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, allowPrivate).quiet()
		rcv := newHookReceiver(t)
		subscribe(w, rcv.URL+"/hook", "item.screened")
		w.env.Model.Garbage() // an item the model always answers with garbage
		p := w.pitch(asAuthor, "")
		w.sweep()
		job := w.job(models.TaskScreen, models.KindPitch, p)

		decide := func(kind models.Kind, id int64, body any) owedtest.Response {
			return w.do(http.MethodPost, fmt.Sprintf("/api/admin/items/%s/%d/verdict", kind, id), asAdmin, body)
		}
		before := w.snapshot()
		for _, tc := range []struct {
			kind   models.Kind
			id     int64
			body   any
			status int
			code   string
			field  string
		}{
			{"pitch", p, map[string]any{"verdict": "maybe"}, 400, "invalid", "verdict"},
			{"pitch", p, map[string]any{}, 400, "invalid", "verdict"},
			{"pitch", p, map[string]any{"verdict": "block", "note": strings.Repeat("n", 501)}, 400, "invalid", "note"},
			{"pitch", p, map[string]any{"verdict": "block", "why": "x"}, 400, "invalid", "why"},
			{"pitch", p, `{"verdict":"block"`, 400, "invalid", ""},
			{"song", p, map[string]any{"verdict": "block"}, 404, "not_found", ""},
			{"pitch", p + 1000, map[string]any{"verdict": "block"}, 404, "not_found", ""},
		} {
			r := decide(tc.kind, tc.id, tc.body)
			checkError(t, r, tc.status, tc.code, tc.field)
		}
		w.unchanged(t, before, "refused verdicts")

		r := decide("pitch", p, map[string]any{"verdict": "block", "note": "  spam, plainly  "})
		if r.Status != http.StatusOK {
			t.Fatalf("decide: %d %s", r.Status, r.Body)
		}
		if s := r.JSON(); s["state"] != "blocked" || s["verdict"] != "block" || s["why"] != nil {
			t.Errorf("screen result = %v, want blocked", s)
		}
		if got := w.listedJobs(t, ""); len(got) != 0 {
			t.Errorf("jobs after the verdict: %v, want the screen job settled", got)
		}
		r = w.do(http.MethodGet, fmt.Sprintf("/api/admin/events?itemId=%d&outcome=decided", p), asAdmin, nil)
		evs := list(r.JSON()["events"])
		if len(evs) != 1 {
			t.Fatalf("decided events = %s", r.Body)
		}
		ev := obj(evs[0])
		if num(ev["adminId"]) != w.uid[asAdmin] || ev["note"] != "spam, plainly" || ev["verdict"] != "block" ||
			num(ev["userId"]) != w.uid[asAuthor] || num(ev["attempt"]) != int64(job.Attempts) || ev["outcome"] != "decided" {
			t.Errorf("decided event = %v", ev)
		}
		mine := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).JSON()
		if it := obj(list(mine["items"])[0]); it["state"] != "blocked" {
			t.Errorf("the author sees %v", it)
		}
		deliver(w)
		if got := rcv.requests(); len(got) != 1 || !strings.Contains(string(got[0].body), `"verdict":"block"`) {
			t.Errorf("webhook got %d requests, want the verdict", len(got))
		}

		// Once decided, decided: a second verdict is refused and changes nothing.
		before = w.snapshot()
		checkError(t, decide("pitch", p, map[string]any{"verdict": "allow"}), http.StatusConflict, "decided", "")
		w.unchanged(t, before, "a second verdict")

		// An allowed revision owes its score (the triggers), which the sweep then runs.
		w.env.Model.Reset()
		_, rev := w.song(asAuthor, "")
		r = decide("revision", rev, map[string]any{"verdict": "allow"})
		if s := r.JSON(); r.Status != http.StatusOK || s["state"] != "public" {
			t.Fatalf("allow the revision: %d %s", r.Status, r.Body)
		}
		score := w.job(models.TaskScore, models.KindRevision, rev)
		if score.Why != nil || score.Attempts != 0 {
			t.Errorf("score job = %+v", score)
		}
		w.sweep()
		w.scored(rev)
	})
}

// TestRetryWaitingForBudget: retrying a job that waits for its author's budget answers 409
// with the reason while the budget still cannot cover it, and the bulk retry leaves it be; a
// retry is never an attempt by itself; once the budget has room the retry runs it.
func TestRetryWaitingForBudget(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		setLimit := func(n int) {
			t.Helper()
			r := w.do(http.MethodPut, fmt.Sprintf("/api/admin/users/%d/budget", w.uid[asAuthor]), asAdmin, map[string]any{"dailyLimit": n})
			if r.Status != http.StatusOK {
				t.Fatalf("limit: %d %s", r.Status, r.Body)
			}
		}
		setLimit(1)
		w.pitch(asAuthor, "")
		w.sweep() // spends the day's one call
		p := w.pitch(asAuthor, "")
		other := w.pitch(asOther, "")
		w.env.Model.Fail(http.StatusServiceUnavailable, nil)
		w.sweep()
		job := w.job(models.TaskScreen, models.KindPitch, p)
		if job.Why == nil || *job.Why != models.WhyBudget || job.Attempts != 1 {
			t.Fatalf("job = %+v, want waiting for its budget after one attempt", job)
		}
		if s := obj(w.jobDetail(t, job.ID)["job"])["lastError"]; !strings.Contains(fmt.Sprint(s), "budget") {
			t.Errorf("lastError = %v, want it to name the budget", s)
		}

		before := w.snapshot()
		r := w.do(http.MethodPost, fmt.Sprintf("/api/admin/jobs/%d/retry", job.ID), asAdmin, nil)
		checkError(t, r, http.StatusConflict, "budget", "")
		if msg := obj(r.JSON()["error"])["message"]; !strings.Contains(fmt.Sprint(msg), "budget") {
			t.Errorf("409 message %v does not give the reason", msg)
		}
		w.unchanged(t, before, "a refused retry")

		// The bulk retry leaves it waiting, and retries the others.
		r = w.do(http.MethodPost, "/api/admin/jobs/retry", asAdmin, map[string]any{})
		if strings.TrimSpace(string(r.Body)) != `{"retried":1,"skipped":{"budget":1,"held":0}}` {
			t.Errorf("bulk retry: %s, want only the other author's job retried, the budget-bound one skipped", r.Body)
		}
		if j := w.job(models.TaskScreen, models.KindPitch, p); !j.DueAt.Equal(job.DueAt) || j.Attempts != 1 {
			t.Errorf("the bulk retry moved the budget-bound job: %+v", j)
		}
		if j := w.job(models.TaskScreen, models.KindPitch, other); j.Attempts != 1 || j.DueAt.UnixMilli() != w.env.Clock.Now().UnixMilli() {
			t.Errorf("the other job after the bulk retry = %+v, want due now, its one attempt", j)
		}

		// With room, the retry makes it due now and adds no attempt; the sweep then runs it.
		setLimit(5)
		w.env.Model.Reset()
		r = w.do(http.MethodPost, fmt.Sprintf("/api/admin/jobs/%d/retry", job.ID), asAdmin, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("retry with room: %d %s", r.Status, r.Body)
		}
		j := obj(r.JSON()["job"])
		if num(j["attempts"]) != 1 || j["dueAt"] != w.env.Clock.Now().UTC().Format("2006-01-02T15:04:05.000Z") {
			t.Errorf("retried = %v, want due now with its one attempt", j)
		}
		w.sweep()
		if got := w.listedJobs(t, "?kind=pitch"); len(got) != 0 {
			t.Errorf("pitch jobs after the sweep: %v", got)
		}
	})
}

// TestFindJobs: a job by id with its item's title, author and attempts; the list filtered by
// job id, author name or id, item id; sorted by due time or attempts, paged through with its
// cursor; with the total that matches.
func TestFindJobs(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		j := newJobsWorld(t, db)
		d := j.jobDetail(t, j.p1.ID)
		if it := obj(d["item"]); it["kind"] != "pitch" || num(it["id"]) != j.p1.ItemID || it["title"] != "a pitch by author" {
			t.Errorf("item = %v", it)
		}
		if a := obj(d["author"]); a["name"] != "ann" || num(a["id"]) != j.uid[asAuthor] {
			t.Errorf("author = %v", a)
		}
		if ev := list(d["events"]); len(ev) != 1 || obj(ev[0])["error"] != "HTTP 503: fake failure" {
			t.Errorf("attempts = %v", ev)
		}
		rj := obj(j.jobDetail(t, j.r1.ID)["job"])
		if rj["itemTitle"] != "Song of author" || rj["userName"] != "ann" || rj["songId"] == nil {
			t.Errorf("revision job = %v", rj)
		}
		checkError(t, j.do(http.MethodGet, "/api/admin/jobs/99999", asAdmin, nil), http.StatusNotFound, "not_found", "")

		for _, tc := range []struct {
			query string
			want  []models.Job
		}{
			{"?id=" + fmt.Sprint(j.c1.ID), []models.Job{j.c1}},
			{"?author=ann", []models.Job{j.p1, j.r1, j.p3}},
			{"?author=BE", []models.Job{j.p2, j.c1}},
			{"?author=" + fmt.Sprint(j.uid[asOther]), []models.Job{j.p2, j.c1}},
			{"?author=%25", nil}, // a literal %, in no name
			{"?author=zed", nil},
			{"?itemId=" + fmt.Sprint(j.p2.ItemID) + "&kind=pitch", []models.Job{j.p2}},
			{"?author=ann&why=upstream", []models.Job{j.p1}},
		} {
			r := j.do(http.MethodGet, "/api/admin/jobs"+tc.query, asAdmin, nil)
			got := []int64{}
			for _, x := range list(r.JSON()["jobs"]) {
				got = append(got, num(obj(x)["id"]))
			}
			slices.Sort(got)
			want := jobIDs(tc.want...)
			if want == nil {
				want = []int64{}
			}
			if !slices.Equal(got, want) || num(r.JSON()["total"]) != int64(len(want)) {
				t.Errorf("jobs%s = %v (total %v), want %v", tc.query, got, r.JSON()["total"], want)
			}
		}
		checkError(t, j.do(http.MethodGet, fmt.Sprintf("/api/admin/jobs?author=%d&userId=%d", j.uid[asAuthor], j.uid[asOther]), asAdmin, nil),
			http.StatusBadRequest, "invalid", "author")
		checkError(t, j.do(http.MethodGet, "/api/admin/jobs?sort=name", asAdmin, nil), http.StatusBadRequest, "invalid", "sort")

		// Sorted, one a page, through every page: the order holds and nothing repeats.
		pages := func(sort string) []int64 {
			t.Helper()
			var ids []int64
			cursor := ""
			for range 10 {
				q := "?limit=1&sort=" + sort
				if cursor != "" {
					q += "&cursor=" + url.QueryEscape(cursor)
				}
				r := j.do(http.MethodGet, "/api/admin/jobs"+q, asAdmin, nil)
				if r.Status != http.StatusOK {
					t.Fatalf("jobs%s: %d %s", q, r.Status, r.Body)
				}
				if num(r.JSON()["total"]) != 5 {
					t.Errorf("total = %v, want 5", r.JSON()["total"])
				}
				for _, x := range list(r.JSON()["jobs"]) {
					ids = append(ids, num(obj(x)["id"]))
				}
				next, _ := r.JSON()["nextCursor"].(string)
				if next == "" {
					return ids
				}
				cursor = next
			}
			t.Fatalf("sort=%s did not end", sort)
			return nil
		}
		byDue := pages("due")
		byAttempts := pages("attempts")
		if len(byDue) != 5 || len(byAttempts) != 5 {
			t.Fatalf("pages: by due %v, by attempts %v", byDue, byAttempts)
		}
		jobs := map[int64]models.Job{j.p1.ID: j.p1, j.p2.ID: j.p2, j.r1.ID: j.r1, j.c1.ID: j.c1, j.p3.ID: j.p3}
		for i := 1; i < 5; i++ {
			a, b := jobs[byDue[i-1]], jobs[byDue[i]]
			if a.DueAt.After(b.DueAt) || (a.DueAt.Equal(b.DueAt) && a.ID > b.ID) {
				t.Errorf("by due: %d (due %v) before %d (due %v)", a.ID, a.DueAt, b.ID, b.DueAt)
			}
			a, b = jobs[byAttempts[i-1]], jobs[byAttempts[i]]
			if a.Attempts < b.Attempts || (a.Attempts == b.Attempts && a.ID > b.ID) {
				t.Errorf("by attempts: %d (%d) before %d (%d)", a.ID, a.Attempts, b.ID, b.Attempts)
			}
		}
		// A cursor of one order is refused by another.
		r := j.do(http.MethodGet, "/api/admin/jobs?limit=1&sort=due", asAdmin, nil)
		cur, _ := r.JSON()["nextCursor"].(string)
		checkError(t, j.do(http.MethodGet, "/api/admin/jobs?sort=attempts&cursor="+url.QueryEscape(cur), asAdmin, nil), http.StatusBadRequest, "invalid", "cursor")
	})
}

// TestWebhookFailing: a subscription whose newest attempted delivery failed is listed as
// failing, with the error; one whose receiver takes them is not.
func TestWebhookFailing(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, allowPrivate).quiet()
		good := newHookReceiver(t)
		okID, _ := subscribe(w, good.URL+"/ok", "item.screened")
		badID, _ := subscribe(w, "http://"+closedPort(t)+"/hook", "item.screened")
		idle, _ := subscribe(w, good.URL+"/idle", "song.scored")
		w.pitch(asAuthor, "")
		w.sweep()
		deliver(w)
		r := w.do(http.MethodGet, "/api/admin/webhooks", asAdmin, nil)
		byID := map[int64]map[string]any{}
		for _, h := range list(r.JSON()["webhooks"]) {
			byID[num(obj(h)["id"])] = obj(h)
		}
		if h := byID[okID]; h["failing"] != false || h["lastError"] != nil || num(h["lastStatus"]) != 204 {
			t.Errorf("the taking receiver's webhook = %v", h)
		}
		if h := byID[badID]; h["failing"] != true || !strings.Contains(fmt.Sprint(h["lastError"]), "connection refused") {
			t.Errorf("the refusing receiver's webhook = %v, want failing with the error", h)
		}
		if h := byID[idle]; h["failing"] != false || h["lastError"] != nil || h["lastStatus"] != nil {
			t.Errorf("a webhook with no delivery yet = %v", h)
		}
	})
}

// TestHoldWakesTheLongPoll: a hold changes what an author's view says (why held), so a long
// poll on it answers at once with the new view, and so does the lift.
func TestHoldWakesTheLongPoll(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		w.pitch(asAuthor, "")
		m := w.watchMine(asAuthor)
		held := w.poll("/api/listeners/mine?wait=60", asAuthor, m.etag)
		w.parked(1)
		notYet(t, held, "parked")
		if r := w.do(http.MethodPut, "/api/admin/holds", asAdmin, map[string]any{"screen": true}); r.Status != http.StatusOK {
			t.Fatalf("hold: %d %s", r.Status, r.Body)
		}
		a := await(t, held, "the hold")
		if a.Status != http.StatusOK || !strings.Contains(string(a.Body), `"why":"held"`) {
			t.Fatalf("after the hold: %d %s, want the view with why held", a.Status, a.Body)
		}
		held = w.poll("/api/listeners/mine?wait=60", asAuthor, a.Header.Get("ETag"))
		w.parked(1)
		w.do(http.MethodPut, "/api/admin/holds", asAdmin, map[string]any{"screen": false})
		if a = await(t, held, "the lift"); a.Status != http.StatusOK || strings.Contains(string(a.Body), `"why":"held"`) {
			t.Fatalf("after the lift: %d %s", a.Status, a.Body)
		}
	})
}

// TestLiftingAHoldRunsTheHeldWork: lifting the screen hold runs the held screens at once, not
// at the next periodic sweep.
func TestLiftingAHoldRunsTheHeldWork(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		// The sweep's loop, woken by what makes work due (no periodic schedule here: the fake
		// clock never reaches it).
		if err := w.env.App.Content.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if r := w.do(http.MethodPut, "/api/admin/holds", asAdmin, map[string]any{"screen": true}); r.Status != http.StatusOK {
			t.Fatalf("hold: %d %s", r.Status, r.Body)
		}
		p := w.pitch(asAuthor, "")
		if r := w.do(http.MethodPut, "/api/admin/holds", asAdmin, map[string]any{"screen": false}); r.Status != http.StatusOK {
			t.Fatalf("lift: %d %s", r.Status, r.Body)
		}
		wait.Until(t, "the held screen run after the lift", func() bool {
			s, err := w.store().ScreenOf(context.Background(), models.KindPitch, p)
			return err == nil && s.Verdict != nil
		})
	})
}
