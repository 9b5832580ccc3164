package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
	"github.com/owed/owed/webhooks"
)

type hookRequest struct {
	path   string
	header http.Header
	body   []byte
}

// hookReceiver is a real endpoint that records what it gets and answers statuses from a
// script (204 once it runs out).
type hookReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	got      []hookRequest
	statuses []int
}

func newHookReceiver(t *testing.T, statuses ...int) *hookReceiver {
	r := &hookReceiver{statuses: statuses}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, hookRequest{req.URL.Path, req.Header.Clone(), body})
		status := http.StatusNoContent
		if len(r.statuses) > 0 {
			status, r.statuses = r.statuses[0], r.statuses[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *hookReceiver) requests() []hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookRequest(nil), r.got...)
}

func sortedStrings(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

func allowPrivate(c *app.Config) { c.WebhooksAllowPrivate = true }

// subscribe creates a webhook through the API and returns its id and secret.
func subscribe(w *world, url string, events ...string) (int64, string) {
	w.t.Helper()
	m := w.created("/api/admin/webhooks", asAdmin, map[string]any{"url": url, "events": events})
	return num(obj(m["webhook"])["id"]), m["secret"].(string)
}

// deliveriesOf lists a webhook's deliveries through the API, newest first.
func deliveriesOf(w *world, id int64) []map[string]any {
	w.t.Helper()
	r := w.do(http.MethodGet, fmt.Sprintf("/api/admin/webhooks/%d/deliveries", id), asAdmin, nil)
	if r.Status != http.StatusOK {
		w.t.Fatalf("deliveries of %d: %d %s", id, r.Status, r.Body)
	}
	var out []map[string]any
	for _, d := range list(r.JSON()["deliveries"]) {
		out = append(out, obj(d))
	}
	return out
}

// deliver runs a delivery pass, as the running app's loop does.
func deliver(w *world) int {
	w.t.Helper()
	n, err := w.env.App.Webhooks.RunDue(context.Background())
	if err != nil {
		w.t.Fatalf("deliver: %v", err)
	}
	return n
}

var secretShape = regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{32}$`)

func TestWebhooksDeliverVerdictsAndScores(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db, allowPrivate)
		rcv := newHookReceiver(t)
		r := w.do(http.MethodPost, "/api/admin/webhooks", asAdmin, map[string]any{"url": rcv.URL + "/screens", "events": []string{"item.screened", "item.screened"}})
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		created := r.JSON()
		if keys := keysOf(created); strings.Join(keys, ",") != "secret,webhook" {
			t.Errorf("create answer keys %v", keys)
		}
		secret := created["secret"].(string)
		if key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_")); !secretShape.MatchString(secret) || err != nil || len(key) != 24 {
			t.Errorf("secret %q: want whsec_ and the base64 of 24 bytes", secret)
		}
		hook := hasKeys(t, "webhook", created["webhook"], "id", "url", "events", "active", "createdAt")
		screens := num(hook["id"])
		if hook["url"] != rcv.URL+"/screens" || fmt.Sprint(hook["events"]) != "[item.screened]" || hook["active"] != true ||
			isTime(t, "createdAt", hook["createdAt"]) != owedtest.Start {
			t.Errorf("webhook = %v", hook)
		}
		isNull(t, "webhook", hook, "disabledReason")
		if strings.Contains(string(w.do(http.MethodGet, "/api/admin/webhooks", asAdmin, nil).Body), secret) {
			t.Error("the secret was shown again")
		}
		scores, scoreSecret := subscribe(w, rcv.URL+"/scores", "song.scored")
		all, allSecret := subscribe(w, rcv.URL+"/all", "*")

		l := w.do(http.MethodGet, "/api/admin/webhooks", asAdmin, nil).JSON()
		camelCase(t, "webhooks", l)
		if hooks := list(l["webhooks"]); len(hooks) != 3 || num(obj(hooks[0])["id"]) != screens {
			t.Errorf("webhooks = %v", l)
		}
		isNull(t, "webhook list", l, "nextCursor")

		// The verdict answered to the write has its delivery already: same transaction.
		song := w.created("/api/listeners/songs", asAuthor, map[string]string{"title": "Tide", "code": `s("bd sd")`})
		rev := num(obj(song["revision"])["id"])
		if obj(song["screen"])["verdict"] != "allow" {
			t.Fatalf("publish: %v", song)
		}
		if n := len(deliveriesOf(w, screens)); n != 1 {
			t.Fatalf("the item.screened subscriber has %d deliveries after the verdict, want 1", n)
		}
		w.scored(rev)
		wait.Until(t, "the score's delivery", func() bool { return len(deliveriesOf(w, scores)) == 1 })
		if n := len(deliveriesOf(w, screens)); n != 1 {
			t.Errorf("the item.screened subscriber got the score too: %d deliveries", n)
		}
		if n := len(deliveriesOf(w, all)); n != 2 {
			t.Errorf("the * subscriber has %d deliveries, want the verdict and the score", n)
		}

		if n := deliver(w); n != 4 {
			t.Fatalf("delivered %d, want 4", n)
		}
		secrets := map[string]string{"/screens": secret, "/scores": scoreSecret, "/all": allSecret}
		types := map[string][]string{}
		for _, req := range rcv.requests() {
			var body struct {
				Type, Timestamp string
				Data            map[string]any
			}
			json.Unmarshal(req.body, &body)
			types[body.Type] = append(types[body.Type], req.path)
			if err := webhooks.Verify(secrets[req.path], req.header, req.body, w.env.Clock.Now()); err != nil {
				t.Errorf("delivery to %s: %v", req.path, err)
			}
			for _, other := range secrets {
				if other != secrets[req.path] && webhooks.Verify(other, req.header, req.body, w.env.Clock.Now()) == nil {
					t.Errorf("delivery to %s verifies with another webhook's secret", req.path)
				}
			}
			switch body.Type {
			case "item.screened":
				if body.Data["kind"] != "revision" || num(body.Data["id"]) != rev || num(body.Data["userId"]) != w.uid[asAuthor] ||
					num(body.Data["songId"]) != num(obj(song["song"])["id"]) || body.Data["verdict"] != "allow" || body.Data["confidence"] == nil {
					t.Errorf("item.screened data = %v", body.Data)
				}
			case "song.scored":
				hasKeys(t, "song.scored data", body.Data, "revisionId", "songId", "userId", "art", "artRuns", "criteria", "model", "rubric")
				if num(body.Data["revisionId"]) != rev || len(list(body.Data["artRuns"])) != 3 {
					t.Errorf("song.scored data = %v", body.Data)
				}
			default:
				t.Errorf("unexpected delivery %s", req.body)
			}
		}
		if fmt.Sprint(sortedStrings(types["item.screened"])) != "[/all /screens]" || fmt.Sprint(sortedStrings(types["song.scored"])) != "[/all /scores]" {
			t.Errorf("deliveries by type: %v", types)
		}

		// The list shows each delivery with its attempts.
		ds := deliveriesOf(w, screens)
		d := hasKeys(t, "delivery", ds[0], "id", "webhookId", "messageId", "event", "status", "attempts", "lastStatus", "lastError",
			"nextAttemptAt", "deliveredAt", "createdAt", "attemptLog")
		camelCase(t, "delivery", d)
		if d["event"] != "item.screened" || d["status"] != "delivered" || num(d["attempts"]) != 1 || num(d["lastStatus"]) != 204 ||
			num(d["webhookId"]) != screens || !strings.HasPrefix(d["messageId"].(string), "msg_") {
			t.Errorf("delivery = %v", d)
		}
		isNull(t, "delivery", d, "nextAttemptAt")
		isNull(t, "delivery", d, "lastError")
		isTime(t, "deliveredAt", d["deliveredAt"])
		log := list(d["attemptLog"])
		if len(log) != 1 {
			t.Fatalf("attemptLog = %v", log)
		}
		a := hasKeys(t, "attempt", log[0], "attempt", "at", "status", "latencyMs", "error")
		if num(a["status"]) != 204 || num(a["attempt"]) != 1 {
			t.Errorf("attempt = %v", a)
		}
		isNull(t, "attempt", a, "error")
		if _, has := d["payload"]; has {
			t.Error("the list carries payloads")
		}
		one := w.do(http.MethodGet, fmt.Sprintf("/api/admin/webhooks/deliveries/%d", num(d["id"])), asAdmin, nil).JSON()
		if p := obj(obj(one["delivery"])["payload"]); p["type"] != "item.screened" || obj(p["data"])["verdict"] != "allow" {
			t.Errorf("delivery detail = %v", one)
		}
		if r := w.do(http.MethodGet, fmt.Sprintf("/api/admin/webhooks/%d/deliveries?status=pending", screens), asAdmin, nil); len(list(r.JSON()["deliveries"])) != 0 {
			t.Errorf("pending deliveries = %s", r.Body)
		}

		// Deleting a webhook takes its deliveries.
		if r := w.do(http.MethodDelete, fmt.Sprintf("/api/admin/webhooks/%d", all), asAdmin, nil); r.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		checkError(t, w.do(http.MethodGet, fmt.Sprintf("/api/admin/webhooks/%d/deliveries", all), asAdmin, nil), 404, "not_found", "")
		var left int64
		w.store().RawScan(context.Background(), &left, `SELECT COUNT(*) FROM webhook_deliveries WHERE webhook_id = ?`, all)
		if left != 0 {
			t.Errorf("%d deliveries of a deleted webhook are left", left)
		}
	})
}

// A delivery owed before a restart arrives after it: the failed one on its schedule, with the
// same webhook-id; the never-attempted one at once.
func TestDeliveryOwedBeforeARestartArrivesAfterIt(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		rcv := newHookReceiver(t, http.StatusInternalServerError)
		w := newWorld(t, db, allowPrivate)
		id, secret := subscribe(w, rcv.URL, "item.screened")
		w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": "first"})
		if n := deliver(w); n != 1 {
			t.Fatalf("delivered %d", n)
		}
		first := deliveriesOf(w, id)[0]
		if first["status"] != "pending" || num(first["attempts"]) != 1 || num(first["lastStatus"]) != 500 || first["lastError"] != "500 Internal Server Error" {
			t.Fatalf("failed delivery = %v", first)
		}
		next := isTime(t, "nextAttemptAt", first["nextAttemptAt"])
		if wait := next.Sub(owedtest.Start); wait < 4500*time.Millisecond || wait > 5500*time.Millisecond {
			t.Errorf("retry in %s, want 5s ±10%%", wait)
		}
		w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": "second"}) // owed, never attempted

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.env.App.Shutdown(ctx); err != nil {
			t.Fatalf("shutdown: %v", err)
		}

		w2 := newWorld2(t, db)
		if n := deliver(w2); n != 1 {
			t.Fatalf("after the restart, delivered %d at once, want the never-attempted one", n)
		}
		w2.env.Clock.Set(next)
		if n := deliver(w2); n != 1 {
			t.Fatalf("after the schedule's wait, delivered %d, want the failed one", n)
		}
		got := rcv.requests()
		if len(got) != 3 {
			t.Fatalf("receiver got %d requests, want 3", len(got))
		}
		if got[0].header.Get("webhook-id") != got[2].header.Get("webhook-id") || got[0].header.Get("webhook-id") != first["messageId"] {
			t.Errorf("the retry's webhook-id %q, want the first attempt's %q", got[2].header.Get("webhook-id"), got[0].header.Get("webhook-id"))
		}
		if err := webhooks.Verify(secret, got[2].header, got[2].body, w2.env.Clock.Now()); err != nil {
			t.Errorf("retry after the restart: %v", err)
		}
		for _, d := range deliveriesOf(w2, id) {
			if d["status"] != "delivered" {
				t.Errorf("delivery after the restart = %v", d)
			}
		}
	})
}

// newWorld2 opens a second app on the database of a world whose app was shut down.
func newWorld2(t *testing.T, db string) *world {
	t.Helper()
	return worldOf(t, owedtest.NewEnv(t, db, allowPrivate))
}

func TestGoneDisablesAndAdminReenablesAndRedelivers(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		rcv := newHookReceiver(t, http.StatusGone, http.StatusGone)
		w := newWorld(t, db, allowPrivate).quiet()
		id, _ := subscribe(w, rcv.URL, "*")
		w.pitch(asAuthor, models.VerdictAllow)
		w.pitch(asAuthor, models.VerdictBlock)
		deliver(w)
		hooks := list(w.do(http.MethodGet, "/api/admin/webhooks", asAdmin, nil).JSON()["webhooks"])
		if h := obj(hooks[0]); h["active"] != false || h["disabledReason"] != "gone" {
			t.Fatalf("webhook after 410 = %v", h)
		}
		ds := deliveriesOf(w, id)
		for _, d := range ds {
			if d["status"] != "cancelled" {
				t.Errorf("delivery after 410 = %v, want cancelled", d)
			}
			isNull(t, "cancelled delivery", d, "nextAttemptAt")
		}
		gone := ds[len(ds)-1]
		// Redelivering while disabled is refused.
		before := w.snapshot()
		r := w.do(http.MethodPost, fmt.Sprintf("/api/admin/webhooks/deliveries/%d/redeliver", num(gone["id"])), asAdmin, nil)
		checkError(t, r, http.StatusConflict, "webhook_disabled", "")
		w.unchanged(t, before, "a refused redelivery")

		r = w.do(http.MethodPatch, fmt.Sprintf("/api/admin/webhooks/%d", id), asAdmin, map[string]any{"active": true})
		if h := obj(r.JSON()["webhook"]); r.Status != 200 || h["active"] != true || h["disabledReason"] != nil {
			t.Fatalf("re-enable: %d %s", r.Status, r.Body)
		}
		r = w.do(http.MethodPost, fmt.Sprintf("/api/admin/webhooks/deliveries/%d/redeliver", num(gone["id"])), asAdmin, nil)
		d := obj(r.JSON()["delivery"])
		if r.Status != 200 || d["status"] != "pending" || isTime(t, "nextAttemptAt", d["nextAttemptAt"]) != w.env.Clock.Now() {
			t.Fatalf("redeliver: %d %s", r.Status, r.Body)
		}
		if n := deliver(w); n != 1 {
			t.Fatalf("delivered %d after redeliver, want 1", n)
		}
		msg := gone["messageId"].(string)
		sent := func() int {
			n := 0
			for _, req := range rcv.requests() {
				if req.header.Get("webhook-id") == msg {
					n++
				}
			}
			return n
		}
		if n := len(rcv.requests()); n != 3 || sent() != 2 {
			t.Fatalf("receiver got %d requests, %d of the redelivered message; want 3 and 2", n, sent())
		}
		// A delivered one is redelivered too: a new attempt with the same webhook-id.
		r = w.do(http.MethodPost, fmt.Sprintf("/api/admin/webhooks/deliveries/%d/redeliver", num(gone["id"])), asAdmin, nil)
		if d := obj(r.JSON()["delivery"]); d["status"] != "pending" || d["deliveredAt"] != nil || num(d["attempts"]) != 2 || len(list(d["attemptLog"])) != 2 {
			t.Fatalf("redeliver a delivered one: %s", r.Body)
		}
		deliver(w)
		d = obj(w.do(http.MethodGet, fmt.Sprintf("/api/admin/webhooks/deliveries/%d", num(gone["id"])), asAdmin, nil).JSON()["delivery"])
		log := list(d["attemptLog"])
		if d["status"] != "delivered" || num(d["attempts"]) != 3 || len(log) != 3 || num(obj(log[0])["status"]) != 410 ||
			obj(log[0])["error"] == nil || num(obj(log[2])["status"]) != 204 {
			t.Errorf("delivery after redelivering = %v", d)
		}
		if n := len(rcv.requests()); n != 4 || sent() != 3 {
			t.Errorf("receiver got %d requests, %d of the redelivered message; want 4 and 3", n, sent())
		}
	})
}

func TestPrivateWebhookAddressesNeedTheSetting(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		rcv := newHookReceiver(t)
		w := newWorld(t, db).quiet()
		for _, url := range []string{rcv.URL, "http://localhost:8080/hook", "http://[::1]/hook", "http://10.0.0.7/hook",
			"http://169.254.169.254/latest", "http://0.0.0.0/",
			// Issue 12, row 2: the forms an incomplete list let through.
			"http://[64:ff9b::7f00:1]/hook", "http://[2002:7f00:1::1]/hook", "http://[::7f00:1]/hook", "http://0.1.2.3/hook",
			"http://198.18.0.1/hook", "http://240.0.0.1/hook", "http://255.255.255.255/hook", "http://[fec0::1]/hook"} {
			before := w.snapshot()
			r := w.do(http.MethodPost, "/api/admin/webhooks", asAdmin, map[string]any{"url": url, "events": []string{"*"}})
			checkError(t, r, http.StatusBadRequest, "invalid", "url")
			if !strings.Contains(string(r.Body), "OWED_WEBHOOKS_ALLOW_PRIVATE") {
				t.Errorf("%s: the refusal does not name the setting: %s", url, r.Body)
			}
			w.unchanged(t, before, "a refused private URL")
		}
		// With the setting on, the same URL is accepted.
		allowed := newWorld2(t, db)
		if id, _ := subscribe(allowed, rcv.URL, "*"); id <= 0 {
			t.Error("no webhook made")
		}
	})
}

func TestWebhookRoutesRefuseBadInput(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db).quiet()
		id, _ := subscribe(w, "https://93.184.215.14/owed", "*")
		off, _ := subscribe(w, "https://93.184.215.14/off", "*")
		if err := w.store().EnqueueWebhook(context.Background(), models.EventBackfillFinished, map[string]any{"chatId": "c"}); err != nil {
			t.Fatal(err)
		}
		ds := deliveriesOf(w, off)
		if r := w.do(http.MethodPatch, fmt.Sprintf("/api/admin/webhooks/%d", off), asAdmin, map[string]any{"active": false}); r.Status != 200 {
			t.Fatalf("disable: %d %s", r.Status, r.Body)
		}
		hooks, deliveries := "/api/admin/webhooks", fmt.Sprintf("/api/admin/webhooks/%d", id)
		for _, c := range []struct {
			name, method, path string
			body               any
			status             int
			code, field        string
		}{
			{"url missing", "POST", hooks, `{"events":["*"]}`, 400, "invalid", "url"},
			{"url blank", "POST", hooks, `{"url":"  ","events":["*"]}`, 400, "invalid", "url"},
			{"url of the wrong type", "POST", hooks, `{"url":5,"events":["*"]}`, 400, "invalid", "url"},
			{"url not http", "POST", hooks, `{"url":"ftp://93.184.215.14/x","events":["*"]}`, 400, "invalid", "url"},
			{"url relative", "POST", hooks, `{"url":"/hooks","events":["*"]}`, 400, "invalid", "url"},
			{"url without a host", "POST", hooks, `{"url":"https:///x","events":["*"]}`, 400, "invalid", "url"},
			{"url javascript", "POST", hooks, `{"url":"javascript:alert(1)","events":["*"]}`, 400, "invalid", "url"},
			{"url too long", "POST", hooks, map[string]any{"url": "https://93.184.215.14/" + strings.Repeat("a", 2048), "events": []string{"*"}}, 400, "invalid", "url"},
			{"url private", "POST", hooks, `{"url":"http://192.168.1.10/x","events":["*"]}`, 400, "invalid", "url"},
			{"events missing", "POST", hooks, `{"url":"https://93.184.215.14/x"}`, 400, "invalid", "events"},
			{"events empty", "POST", hooks, `{"url":"https://93.184.215.14/x","events":[]}`, 400, "invalid", "events"},
			{"events null", "POST", hooks, `{"url":"https://93.184.215.14/x","events":null}`, 400, "invalid", "events"},
			{"event unknown", "POST", hooks, `{"url":"https://93.184.215.14/x","events":["item.screened","item.deleted"]}`, 400, "invalid", "events"},
			{"events a string", "POST", hooks, `{"url":"https://93.184.215.14/x","events":"*"}`, 400, "invalid", "events"},
			{"events of numbers", "POST", hooks, `{"url":"https://93.184.215.14/x","events":[1]}`, 400, "invalid", "events"},
			{"secret given", "POST", hooks, `{"url":"https://93.184.215.14/x","events":["*"],"secret":"whsec_x"}`, 400, "invalid", "secret"},
			{"null body", "POST", hooks, `null`, 400, "invalid", ""},

			{"active missing", "PATCH", deliveries, `{}`, 400, "invalid", "active"},
			{"active null", "PATCH", deliveries, `{"active":null}`, 400, "invalid", "active"},
			{"active of the wrong type", "PATCH", deliveries, `{"active":"no"}`, 400, "invalid", "active"},
			{"url not patchable", "PATCH", deliveries, `{"active":true,"url":"https://93.184.215.14/y"}`, 400, "invalid", "url"},

			{"status unknown", "GET", deliveries + "/deliveries?status=lost", nil, 400, "invalid", "status"},
			{"limit too large", "GET", deliveries + "/deliveries?limit=201", nil, 400, "invalid", "limit"},
			{"limit too large", "GET", hooks + "?limit=501", nil, 400, "invalid", "limit"},

			{"a disabled webhook's delivery", "POST", fmt.Sprintf("/api/admin/webhooks/deliveries/%d/redeliver", num(ds[0]["id"])), nil, 409, "webhook_disabled", ""},
			{"an unknown webhook", "PATCH", "/api/admin/webhooks/987654", `{"active":true}`, 404, "not_found", ""},
			{"an unknown delivery", "POST", "/api/admin/webhooks/deliveries/987654/redeliver", nil, 404, "not_found", ""},
		} {
			t.Run(c.method+" "+c.name, func(t *testing.T) {
				w.t = t
				before := w.snapshot()
				r := w.send(c.method, c.path, asAdmin, c.body)
				checkError(t, r, c.status, c.code, c.field)
				w.unchanged(t, before, c.name)
			})
		}
	})
}
