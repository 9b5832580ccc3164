package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
)

// camelCase fails when any key of a JSON answer is not camelCase.
func camelCase(t *testing.T, where string, v any) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if strings.ContainsAny(k, "_- ") || (k != "" && strings.ToLower(k[:1]) != k[:1]) {
				t.Errorf("%s: key %q is not camelCase", where, k)
			}
			camelCase(t, where+"."+k, e)
		}
	case []any:
		for i, e := range x {
			camelCase(t, fmt.Sprintf("%s[%d]", where, i), e)
		}
	}
}

// checkScreen checks an item's screen result: every field present, null when absent.
func checkScreen(t *testing.T, where string, v any, state string, verdict any, why any, attempts int64, next string) {
	t.Helper()
	s := hasKeys(t, where, v, "state", "verdict", "confidence", "why", "attempts", "nextAttemptAt")
	if s["state"] != state || s["verdict"] != verdict || s["why"] != why || num(s["attempts"]) != attempts {
		t.Errorf("%s = %v, want state %s, verdict %v, why %v, attempts %d", where, s, state, verdict, why, attempts)
	}
	if verdict == nil {
		isNull(t, where, s, "confidence")
	} else if c, ok := s["confidence"].(float64); !ok || c != 0.9 {
		t.Errorf("%s: confidence %v, want the model's 0.9", where, s["confidence"])
	}
	if next == "" {
		isNull(t, where, s, "nextAttemptAt")
	} else if isTime(t, where+".nextAttemptAt", s["nextAttemptAt"]); s["nextAttemptAt"] != next {
		t.Errorf("%s: nextAttemptAt %v, want %s", where, s["nextAttemptAt"], next)
	}
}

// TestWriteAnswerShapes: publishing, revising, commenting and pitching answer the item and its
// screen result as SPEC §3 has them, whether the verdict is allow, block or still pending.
func TestWriteAnswerShapes(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		m := w.env.Model

		r := w.created("/api/listeners/songs", asAuthor, map[string]string{"title": "Tide", "code": `s("bd sd")`})
		camelCase(t, "song", r)
		song := hasKeys(t, "song", r["song"], "id", "title")
		if song["title"] != "Tide" || num(song["id"]) <= 0 {
			t.Errorf("song = %v", song)
		}
		rev := hasKeys(t, "revision", r["revision"], "id", "songId")
		if num(rev["songId"]) != num(song["id"]) || num(rev["id"]) <= 0 {
			t.Errorf("revision = %v, want the song's", rev)
		}
		checkScreen(t, "publish screen", r["screen"], "public", "allow", nil, 0, "")
		songID := num(song["id"])

		m.SetVerdict("block", 0.9)
		r = w.created(fmt.Sprintf("/api/listeners/songs/%d/revisions", songID), asAuthor, map[string]string{"code": `s("hh")`})
		camelCase(t, "revision", r)
		rev = hasKeys(t, "revision", r["revision"], "id", "songId")
		if num(rev["songId"]) != songID {
			t.Errorf("revision = %v, want song %d", rev, songID)
		}
		checkScreen(t, "revision screen", r["screen"], "blocked", "block", nil, 0, "")

		m.SetVerdict("allow", 0.9)
		r = w.created(fmt.Sprintf("/api/listeners/songs/%d/comments", songID), asOther, map[string]string{"body": "lovely"})
		camelCase(t, "comment", r)
		cm := hasKeys(t, "comment", r["comment"], "id", "songId")
		if num(cm["songId"]) != songID || num(cm["id"]) <= 0 {
			t.Errorf("comment = %v", cm)
		}
		checkScreen(t, "comment screen", r["screen"], "public", "allow", nil, 0, "")

		// A model that fails: the answer says why the item waits and until when (the longer
		// of the backoff, 1 min, and the model's Retry-After, 2 min).
		m.Fail(http.StatusServiceUnavailable, map[string]string{"Retry-After": "120"})
		r = w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": "hear me out"})
		camelCase(t, "pitch", r)
		hasKeys(t, "pitch", r["pitch"], "id")
		checkScreen(t, "pitch screen", r["screen"], "pending", nil, "upstream", 1, "2026-11-30T09:02:00.000Z")
	})
}

// TestMineShape: an author's view lists each item with its state, verdict, score and owed
// jobs, and the day's budget, as SPEC §3 has them.
func TestMineShape(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		song := w.created("/api/listeners/songs", asAuthor, map[string]string{"title": "Tide", "code": `s("bd sd")`})
		songID := num(obj(song["song"])["id"])
		revID := num(obj(song["revision"])["id"])
		w.scored(revID)
		w.env.Model.SetVerdict("block", 0.9)
		comment := num(obj(w.created(fmt.Sprintf("/api/listeners/songs/%d/comments", songID), asAuthor, map[string]string{"body": "meh"})["comment"])["id"])
		w.env.Model.Fail(http.StatusBadGateway, nil)
		pitch := num(obj(w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": "pitch"})["pitch"])["id"])

		mine := w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).JSON()
		camelCase(t, "mine", mine)
		items := map[string]map[string]any{}
		for i, it := range list(mine["items"]) {
			m := hasKeys(t, fmt.Sprintf("items[%d]", i), it, "kind", "id", "state", "verdict", "confidence", "score", "jobs")
			items[m["kind"].(string)] = m
		}
		if len(items) != 3 || len(list(mine["items"])) != 3 {
			t.Fatalf("items = %v, want a revision, a comment and a pitch", mine["items"])
		}

		rev := items["revision"]
		if num(rev["id"]) != revID || num(rev["songId"]) != songID || rev["state"] != "public" || rev["verdict"] != "allow" || rev["confidence"] != 0.9 {
			t.Errorf("revision item = %v", rev)
		}
		sc := hasKeys(t, "score", rev["score"], "art", "artRuns", "criteria", "model", "rubric")
		if sc["art"] != 0.5 || len(list(sc["artRuns"])) != 3 || sc["model"] != "critic" || sc["rubric"] == "" {
			t.Errorf("score = %v, want the mean of three runs of the critic", sc)
		}
		if cr := obj(sc["criteria"]); cr["melody"] != 0.5 || cr["rhythm"] != 0.5 {
			t.Errorf("criteria = %v", sc["criteria"])
		}
		if jobs := list(rev["jobs"]); jobs == nil || len(jobs) != 0 {
			t.Errorf("a screened and scored revision owes nothing: jobs = %v", rev["jobs"])
		}

		cm := items["comment"]
		if num(cm["id"]) != comment || num(cm["songId"]) != songID || cm["state"] != "blocked" || cm["verdict"] != "block" {
			t.Errorf("comment item = %v", cm)
		}
		isNull(t, "comment", cm, "score")

		p := items["pitch"]
		if num(p["id"]) != pitch || p["state"] != "pending" {
			t.Errorf("pitch item = %v", p)
		}
		isNull(t, "pitch", p, "verdict")
		isNull(t, "pitch", p, "confidence")
		isNull(t, "pitch", p, "score")
		jobs := list(p["jobs"])
		if len(jobs) != 1 {
			t.Fatalf("pitch jobs = %v, want its screen", p["jobs"])
		}
		j := hasKeys(t, "pitch job", jobs[0], "task", "why", "attempts", "nextAttemptAt")
		if j["task"] != "screen" || j["why"] != "upstream" || num(j["attempts"]) != 1 || j["nextAttemptAt"] != "2026-11-30T09:01:00.000Z" {
			t.Errorf("pitch job = %v, want screen, upstream, 1 attempt, next at 09:01", j)
		}

		b := hasKeys(t, "budget", mine["budget"], "limit", "spent", "resetsAt")
		// Screens of the song, the comment and the pitch (1 each, the failed one too), and the
		// score's three runs.
		if num(b["limit"]) != 100 || num(b["spent"]) != 6 || b["resetsAt"] != "2026-12-01T00:00:00.000Z" {
			t.Errorf("budget = %v, want limit 100, spent 6, resets at midnight UTC", b)
		}
	})
}

// TestAdminListShapes: the admin's jobs, events and budgets, as SPEC §3 has them.
func TestAdminListShapes(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		song := w.created("/api/listeners/songs", asAuthor, map[string]string{"title": "Tide", "code": `s("bd sd")`})
		w.scored(num(obj(song["revision"])["id"]))
		w.env.Model.Fail(http.StatusTooManyRequests, nil)
		pitch := num(obj(w.created("/api/listeners/pitches", asOther, map[string]string{"body": "pitch"})["pitch"])["id"])

		r := w.do(http.MethodGet, "/api/admin/jobs", asAdmin, nil)
		jl := r.JSON()
		camelCase(t, "jobs", jl)
		if keys := keysOf(jl); !slices.Equal(keys, []string{"jobs", "nextCursor", "total"}) {
			t.Errorf("job list keys %v", keys)
		}
		isNull(t, "job list", jl, "nextCursor")
		jobs := list(jl["jobs"])
		if len(jobs) != 1 {
			t.Fatalf("jobs = %s, want the pitch's screen", r.Body)
		}
		j := hasKeys(t, "job", jobs[0], "id", "task", "kind", "itemId", "userId", "dueAt", "attempts", "why", "status", "leaseUntil")
		if j["task"] != "screen" || j["kind"] != "pitch" || num(j["itemId"]) != pitch || num(j["userId"]) != w.uid[asOther] ||
			num(j["attempts"]) != 1 || j["why"] != "upstream" || num(j["status"]) != 429 || num(j["id"]) <= 0 {
			t.Errorf("job = %v", j)
		}
		isTime(t, "dueAt", j["dueAt"])
		isNull(t, "job", j, "leaseUntil")

		r = w.do(http.MethodGet, "/api/admin/events", asAdmin, nil)
		el := r.JSON()
		camelCase(t, "events", el)
		isNull(t, "event list", el, "nextCursor")
		evs := list(el["events"])
		if len(evs) != 3 {
			t.Fatalf("events = %s, want the song's screen and score and the pitch's failed screen", r.Body)
		}
		byOutcome := map[string]map[string]any{}
		for i, e := range evs {
			m := hasKeys(t, fmt.Sprintf("events[%d]", i), e, "id", "at", "event", "kind", "itemId", "userId", "outcome", "why",
				"status", "upstreamMs", "attempt", "confidence", "art", "requestBytes", "runs")
			isTime(t, "at", m["at"])
			byOutcome[m["outcome"].(string)] = m
		}
		if e := byOutcome["allow"]; e["event"] != "screen" || e["kind"] != "revision" || e["confidence"] != 0.9 || num(e["userId"]) != w.uid[asAuthor] {
			t.Errorf("screen event = %v", e)
		} else {
			isNull(t, "screen event", e, "art")
			isNull(t, "screen event", e, "runs")
			isNull(t, "screen event", e, "why")
		}
		if e := byOutcome["scored"]; e["event"] != "score" || e["art"] != 0.5 || num(e["runs"]) != 3 {
			t.Errorf("score event = %v", e)
		} else {
			isNull(t, "score event", e, "confidence")
		}
		if e := byOutcome["pending"]; e["event"] != "screen" || e["kind"] != "pitch" || e["why"] != "upstream" || num(e["status"]) != 429 || num(e["attempt"]) != 0 {
			t.Errorf("failed attempt = %v", e)
		} else {
			isNull(t, "failed attempt", e, "confidence")
		}

		r = w.do(http.MethodGet, "/api/admin/budgets", asAdmin, nil)
		bl := r.JSON()
		camelCase(t, "budgets", bl)
		spent := map[int64]int64{}
		for i, b := range list(bl["budgets"]) {
			m := hasKeys(t, fmt.Sprintf("budgets[%d]", i), b, "userId", "name", "limit", "spent", "resetsAt")
			if m["resetsAt"] != "2026-12-01T00:00:00.000Z" || num(m["limit"]) != 100 {
				t.Errorf("budget = %v, want limit 100, resetting at midnight UTC", m)
			}
			spent[num(m["userId"])] = num(m["spent"])
		}
		if spent[w.uid[asAuthor]] != 4 || spent[w.uid[asOther]] != 1 || len(spent) != 2 {
			t.Errorf("spent = %v, want ann 4 (screen and score) and ben 1 (the failed screen), authors only", spent)
		}
	})
}

// TestCreateUserShape: a new user's token is in the answer, once, and it works.
func TestCreateUserShape(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "sqlite:"+t.TempDir()+"/owed.db")
	r := w.created("/api/admin/users", asAdmin, map[string]string{"name": "cy", "role": "bot"})
	if keys := keysOf(r); !slices.Equal(keys, []string{"id", "name", "role", "token"}) {
		t.Errorf("user answer keys %v", keys)
	}
	if r["name"] != "cy" || r["role"] != "bot" || num(r["id"]) <= 0 {
		t.Errorf("user = %v", r)
	}
	token, _ := r["token"].(string)
	who := w.env.Do(http.MethodGet, "/api/session", token, nil)
	if u := obj(who.JSON()["user"]); who.Status != http.StatusOK || u["name"] != "cy" || u["role"] != "bot" {
		t.Errorf("the new token: %d %s", who.Status, who.Body)
	}
	if strings.Contains(string(w.do(http.MethodGet, "/api/admin/budgets", asAdmin, nil).Body), token) {
		t.Errorf("the token is shown again")
	}
}

// TestInlineWaitRunsOut: a write whose screen takes longer than OWED_INLINE_WAIT answers
// pending at once; the screen goes on and settles in the background.
func TestInlineWaitRunsOut(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "sqlite:"+t.TempDir()+"/owed.db", func(c *app.Config) { c.InlineWait = 20 * time.Millisecond })
	w.env.Model.Delay(300 * time.Millisecond)
	r := w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": "slow"})
	checkScreen(t, "screen", r["screen"], "pending", nil, nil, 0, "2026-11-30T09:00:00.000Z")
	id := num(obj(r["pitch"])["id"])
	wait.Until(t, "the verdict", func() bool {
		for _, it := range list(w.do(http.MethodGet, "/api/listeners/mine", asAuthor, nil).JSON()["items"]) {
			if num(obj(it)["id"]) == id && obj(it)["state"] == "public" {
				return true
			}
		}
		return false
	})
}
