package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/owed/owed/app"
	"github.com/owed/owed/modelclient/modeltest"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/clocktest"
	"github.com/owed/owed/webhooks"
)

// Fuzzing every decoder of what callers send: request bodies (the strict JSON bind and each
// handler's validation), query parameters (filters, limits, cursors) and credentials, through
// the HTTP handler itself. Whatever arrives, owed answers a 2xx or a 4xx in the error shape:
// never a 5xx, never a panic. Seeds are committed under testdata/fuzz; CI fuzzes each target
// for a few seconds (.ci/run).

// fuzzAPI is one owed for a whole fuzz run (each fuzz worker makes its own), with a user of
// each role and one of every resource a route's path can name.
type fuzzAPI struct {
	h     http.Handler
	store *models.Store
	tok   map[role]string
	ids   map[string]int64 // song, scrape, webhook, author, delivery, media
}

func newFuzzAPI(f *testing.F) *fuzzAPI {
	f.Helper()
	model := modeltest.New(f)
	model.KeepRequests(false)
	cfg := app.Defaults()
	cfg.DataDir = f.TempDir()
	cfg.DatabaseURL = "sqlite:" + cfg.DataDir + "/owed.db"
	if base := os.Getenv(owedtest.PostgresEnv); base != "" {
		cfg.DatabaseURL = owedtest.PostgresURL(f, base) // the stricter database: NUL bytes, UTF-8
	}
	cfg.AdminToken = owedtest.AdminToken
	cfg.ModelURL = model.URL()
	cfg.InlineWait = 0
	cfg.WriteRate = 0
	cfg.DatabaseMaxConns = 8
	cfg.WebhooksAllowPrivate = true // no DNS lookups of fuzzed host names (FuzzCheckURL covers them)
	a, err := app.New(context.Background(), cfg, app.Options{Clock: clocktest.NewFake(owedtest.Start), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Shutdown(ctx)
	})
	// Streams (served here to a recorder, which never hangs up) end after their first event.
	a.API.CloseStreams()
	ctx := context.Background()
	s := a.Store
	fz := &fuzzAPI{h: a.Echo, store: s, tok: map[role]string{asAdmin: owedtest.AdminToken}, ids: map[string]int64{}}
	for r, name := range map[role]string{asAuthor: "ann", asOther: "ben", asBot: "bo"} {
		rl := models.RoleAuthor
		if r == asBot {
			rl = models.RoleBot
		}
		u, tok, err := s.CreateUser(ctx, name, rl)
		if err != nil {
			f.Fatal(err)
		}
		fz.tok[r] = tok
		if r == asAuthor {
			fz.ids["author"] = u.ID
		}
	}
	// A user of its own for the routes that lock users out, so that fuzzing them does not
	// lock out the callers of the other routes.
	victim, _, err := s.CreateUser(ctx, "dan", models.RoleAuthor)
	if err != nil {
		f.Fatal(err)
	}
	fz.ids["user"] = victim.ID
	song, _, err := s.CreateSong(ctx, fz.ids["author"], "Tide", `s("bd")`)
	if err != nil {
		f.Fatal(err)
	}
	fz.ids["song"] = song.ID
	pitch, err := s.CreatePitch(ctx, fz.ids["author"], "hear me out")
	if err != nil {
		f.Fatal(err)
	}
	fz.ids["pitch"] = pitch.ID
	sc, err := s.CreateScrape(ctx, models.NewScrape{ChatID: "chat-1", Backend: "puppet", Mode: "history"})
	if err != nil {
		f.Fatal(err)
	}
	fz.ids["scrape"] = sc.ID
	if _, err := s.AddMedia(ctx, sc.ID, []models.NewMedia{{Kind: "image", URL: "https://cdn.example/1.png"}}); err != nil {
		f.Fatal(err)
	}
	w, err := s.CreateWebhook(ctx, "https://93.184.215.14/hook", []string{"*"}, webhooks.NewSecret())
	if err != nil {
		f.Fatal(err)
	}
	fz.ids["webhook"] = w.ID
	return fz
}

// fill puts the fixture's id in a route's path (":id").
func (fz *fuzzAPI) fill(pattern, fixture string) string {
	return strings.Replace(strings.Replace(pattern, ":kind", fixture, 1), ":id", fmt.Sprint(fz.ids[fixture]), 1)
}

// serve sends one request straight to the handler.
func (fz *fuzzAPI) serve(req *http.Request, as role) *httptest.ResponseRecorder {
	if tok := fz.tok[as]; tok != "" && as != asAnon {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	rec := httptest.NewRecorder()
	fz.h.ServeHTTP(rec, req)
	return rec
}

// checkAnswer fails on a 5xx, and on a 4xx that is not the error shape.
func checkAnswer(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("%s: %d %s", what, rec.Code, rec.Body)
	}
	if rec.Code >= 400 {
		var e struct {
			Error *struct {
				Code    string  `json:"code"`
				Message string  `json:"message"`
				Field   *string `json:"field"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Fatalf("%s: %d answered %q, not the error shape", what, rec.Code, rec.Body)
		}
	}
}

// fuzzRoute is a route to fuzz: its Echo path, the fixture its :id names, and its caller.
type fuzzRoute struct {
	method, pattern, fixture string
	as                       role
	params                   []string // the query parameters it documents
}

// bodyRoutes are the routes that read a JSON body.
var bodyRoutes = []fuzzRoute{
	{"POST", "/api/session", "", asAnon, nil},
	{"POST", "/api/listeners/songs", "", asAuthor, nil},
	{"POST", "/api/listeners/songs/:id/revisions", "song", asAuthor, nil},
	{"POST", "/api/listeners/songs/:id/comments", "song", asAuthor, nil},
	{"POST", "/api/listeners/pitches", "", asAuthor, nil},
	{"POST", "/api/admin/users", "", asAdmin, nil},
	{"PUT", "/api/admin/users/:id/budget", "author", asAdmin, nil},
	{"PATCH", "/api/admin/users/:id", "user", asAdmin, nil},
	{"POST", "/api/admin/jobs/retry", "", asAdmin, nil},
	{"POST", "/api/admin/webhooks", "", asAdmin, nil},
	{"PATCH", "/api/admin/webhooks/:id", "webhook", asAdmin, nil},
	{"POST", "/api/scrapes", "", asBot, nil},
	{"PATCH", "/api/scrapes/:id", "scrape", asBot, nil},
	{"POST", "/api/scrapes/:id/media", "scrape", asBot, nil},
	{"POST", "/api/backfill/start", "", asAdmin, nil},
	{"POST", "/api/backfill/pause", "", asAdmin, nil},
	{"PUT", "/api/backfill/settings", "", asAdmin, nil},
	{"PUT", "/api/admin/holds", "", asAdmin, nil},
	{"POST", "/api/admin/items/:kind/:id/verdict", "pitch", asAdmin, nil},
	{"POST", "/api/listeners/items/:kind/:id/appeal", "pitch", asAuthor, nil},
	{"POST", "/api/admin/anchors", "", asAdmin, nil},
}

// queryRoutes are the routes that document query parameters.
var queryRoutes = []fuzzRoute{
	{"GET", "/api/songs", "", asAnon, []string{"sort", "limit", "cursor"}},
	{"GET", "/api/listeners/mine", "", asAuthor, []string{"state", "kind", "limit", "cursor", "wait"}},
	{"GET", "/api/listeners/mine/stream", "", asAuthor, []string{"state", "kind", "limit", "cursor", "ticket"}},
	{"GET", "/api/pitches", "", asAnon, []string{"limit", "cursor"}},
	{"GET", "/api/admin/users", "", asAdmin, []string{"limit", "cursor"}},
	{"GET", "/api/admin/jobs", "", asAdmin, []string{"id", "task", "kind", "why", "userId", "author", "itemId", "state", "outcome", "sort", "limit", "cursor"}},
	{"GET", "/api/admin/review", "", asAdmin, []string{"kind", "reason", "userId", "claim", "limit", "cursor"}},
	{"GET", "/api/admin/events", "", asAdmin, []string{"event", "why", "userId", "kind", "itemId", "outcome", "limit", "cursor"}},
	{"GET", "/api/admin/budgets", "", asAdmin, []string{"limit", "cursor"}},
	{"GET", "/api/admin/audit", "", asAdmin, []string{"action", "adminId", "target", "since", "until", "limit", "cursor"}},
	{"GET", "/api/admin/webhooks", "", asAdmin, []string{"limit", "cursor"}},
	{"GET", "/api/admin/webhooks/:id/deliveries", "webhook", asAdmin, []string{"status", "limit", "cursor"}},
	{"GET", "/api/scrapes", "", asBot, []string{"chatId", "state", "limit", "cursor"}},
	{"GET", "/api/scrapes/:id/media", "scrape", asBot, []string{"state", "limit", "cursor"}},
}

// TestFuzzRoutesAreComplete keeps bodyRoutes and queryRoutes true to the OpenAPI document
// (made from the route table): every route that reads a body or takes query parameters is
// fuzzed, with the parameters it documents.
func TestFuzzRoutesAreComplete(t *testing.T) {
	t.Parallel()
	env := owedtest.NewEnv(t, "sqlite:"+t.TempDir()+"/owed.db")
	var doc struct {
		Paths map[string]map[string]struct {
			RequestBody any
			Parameters  []struct{ Name, In string }
		}
	}
	env.Do(http.MethodGet, "/api/openapi.json", "", nil).Decode(t, &doc)
	find := func(list []fuzzRoute, method, path string) *fuzzRoute {
		for i := range list {
			if list[i].method == method && openAPIPath(list[i].pattern) == path {
				return &list[i]
			}
		}
		return nil
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			method = strings.ToUpper(method)
			if op.RequestBody != nil && find(bodyRoutes, method, path) == nil {
				t.Errorf("%s %s reads a body but FuzzRequestBodies does not send it one", method, path)
			}
			var params []string
			for _, p := range op.Parameters {
				if p.In == "query" {
					params = append(params, p.Name)
				}
			}
			if params == nil {
				continue
			}
			if r := find(queryRoutes, method, path); r == nil {
				t.Errorf("%s %s takes query parameters but FuzzQueryParameters does not send them", method, path)
			} else if !slices.Equal(r.params, params) {
				t.Errorf("%s %s documents %v; the fuzz list says %v", method, path, params, r.params)
			}
		}
	}
}

// FuzzRequestBodies sends arbitrary bodies to every route that reads one.
func FuzzRequestBodies(f *testing.F) {
	for i, b := range []string{
		`{"token":"owed_nope"}`,
		`{"title":"Tide","code":"s(\"bd\")"}`,
		`{"code":"s(\"hh\")","title":"Take 2"}`,
		`{"body":"lovely"}`,
		`{"body":"hear me out \u0000"}`,
		`{"name":"cy","role":"author"}`,
		`{"dailyLimit":7}`,
		`{"disabled":true}`,
		`{"why":"upstream","userId":-1}`,
		`{"url":"https://93.184.215.14/x","events":["*"]}`,
		`{"active":false}`,
		`{"chatId":"c","guildId":"g","backend":"puppet","mode":"history"}`,
		`{"state":"done","downloaded":3}`,
		`{"media":[{"url":"https://cdn.example/a.png","kind":"image","bytes":10}]}`,
		`{"chatId":"chat-1"}`,
		``,
		`{"batchSize":25,"batchPauseMs":0,"auto":false}`,
		`{"screen":true,"score":false,"deliveries":true}`,
		`{"verdict":"block","note":"spam"}`,
	} {
		f.Add(uint8(i), uint8(0), []byte(b))
	}
	f.Add(uint8(1), uint8(1), []byte(`{"title":1e999,"code":[]}`))
	f.Add(uint8(12), uint8(2), []byte(`{"media":[{"url":"javascript:alert(1)","kind":"image"}],"media":null}`))
	f.Add(uint8(6), uint8(0), []byte(`{"dailyLimit":9223372036854775808}`))
	f.Add(uint8(11), uint8(0), []byte(`{"state":"deleted"} {}`))
	fz := newFuzzAPI(f)
	types := []string{"application/json", "application/json; charset=utf-8", "text/plain", ""}
	f.Fuzz(func(t *testing.T, route, ctype uint8, body []byte) {
		r := bodyRoutes[int(route)%len(bodyRoutes)]
		req := httptest.NewRequest(r.method, fz.fill(r.pattern, r.fixture), bytes.NewReader(body))
		if ct := types[int(ctype)%len(types)]; ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		rec := fz.serve(req, r.as)
		what := fmt.Sprintf("%s %s %q", r.method, r.pattern, body)
		checkAnswer(t, what, rec)
		if rec.Code < 300 && !json.Valid(body) && !(len(body) == 0 && req.Header.Get("Content-Type") == "" && strings.HasPrefix(r.pattern, "/api/backfill/")) {
			t.Fatalf("%s: %d for a body that is not JSON", what, rec.Code)
		}
	})
}

// FuzzQueryParameters sends arbitrary query strings to every list: a 200, or a 400 naming one
// of the route's parameters.
func FuzzQueryParameters(f *testing.F) {
	for i, q := range []string{
		"sort=new&limit=2", "limit=1&cursor=eyJpIjo1fQ", "task=screen&kind=pitch&why=upstream&userId=1&itemId=2&state=due",
		"event=score&outcome=pending&limit=500", "limit=1000", "limit=0", "status=pending&cursor=bm9wZQ",
		"chatId=%27+OR+1%3D1+--&state=done", "state=cached&limit=1&limit=2",
	} {
		f.Add(uint8(i), q)
	}
	for _, q := range []string{"author=ann%25_&sort=attempts&id=3", "author=%23-1&sort=due&cursor=eyJpIjo1fQ", "author=12&userId=13"} {
		f.Add(uint8(3), q) // the job list
	}
	f.Add(uint8(2), "task[]=screen&userId=1e3&itemId=99999999999999999999")
	f.Add(uint8(7), "chatId="+strings.Repeat("%F0%9F%8E%B5", 30))
	f.Add(uint8(3), "why=%00&kind=%ff")
	f.Add(uint8(1), "state=pending&kind=pitch&limit=2&wait=61")
	f.Add(uint8(2), "cursor=eyJ0IjoxLCJrIjoicGl0Y2giLCJpIjo1fQ&limit=1&state=blocked")
	fz := newFuzzAPI(f)
	f.Fuzz(func(t *testing.T, route uint8, query string) {
		r := queryRoutes[int(route)%len(queryRoutes)]
		req := httptest.NewRequest(http.MethodGet, fz.fill(r.pattern, r.fixture), nil)
		req.URL.RawQuery = query
		rec := fz.serve(req, r.as)
		what := fmt.Sprintf("GET %s?%s", r.pattern, query)
		checkAnswer(t, what, rec)
		switch rec.Code {
		case http.StatusOK:
			if strings.HasSuffix(r.pattern, "/stream") {
				if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" || !strings.Contains(rec.Body.String(), "event: mine\n") {
					t.Fatalf("%s: 200 %s with %q", what, ct, rec.Body)
				}
			} else if !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%s: 200 with %q", what, rec.Body)
			}
		case http.StatusBadRequest:
			var e struct{ Error struct{ Field *string } }
			json.Unmarshal(rec.Body.Bytes(), &e)
			if e.Error.Field == nil || !slices.Contains(r.params, *e.Error.Field) {
				t.Fatalf("%s: 400 naming %v, not one of %v: %s", what, e.Error.Field, r.params, rec.Body)
			}
		default:
			t.Fatalf("%s: %d %s", what, rec.Code, rec.Body)
		}
	})
}

// FuzzCursors sends arbitrary JSON, base64url-encoded as cursors are, to every paged list: a
// cursor this server did not give out is a 400 naming "cursor", never a 5xx.
func FuzzCursors(f *testing.F) {
	for i, c := range []string{`{"i":5}`, `{"a":0.5,"i":3}`, `{"a":null,"i":1}`, `{"i":-1}`, `[1,2]`, `{"i":1e400}`,
		`{"i":"1"}`, `{"i":9223372036854775807}`, `null`, `{"a":1e308,"i":1}`} {
		f.Add(uint8(i), []byte(c))
	}
	fz := newFuzzAPI(f)
	f.Fuzz(func(t *testing.T, route uint8, raw []byte) {
		r := queryRoutes[int(route)%len(queryRoutes)]
		req := httptest.NewRequest(http.MethodGet, fz.fill(r.pattern, r.fixture), nil)
		req.URL.RawQuery = "cursor=" + base64.RawURLEncoding.EncodeToString(raw)
		rec := fz.serve(req, r.as)
		what := fmt.Sprintf("GET %s with cursor %q", r.pattern, raw)
		checkAnswer(t, what, rec)
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", what, rec.Code, rec.Body)
		}
		if rec.Code == http.StatusBadRequest && !strings.Contains(rec.Body.String(), `"field":"cursor"`) {
			t.Fatalf("%s: 400 not naming the cursor: %s", what, rec.Body)
		}
	})
}

// FuzzCredentials sends arbitrary Authorization headers and session cookies: only the exact
// bearer token of a user signs anyone in; anything else is a 401 (or, for a cookie that is no
// session, anonymous), never a 5xx.
func FuzzCredentials(f *testing.F) {
	f.Add("Bearer "+owedtest.AdminToken, "")
	f.Add("Bearer "+owedtest.AdminToken+" ", "")
	f.Add("bearer "+owedtest.AdminToken, "")
	f.Add("Bearer  "+owedtest.AdminToken, "")
	f.Add("Basic YWRtaW46YWRtaW4=", "")
	f.Add("", "owed_session=abc")
	f.Add("", "owed_session=' OR 1=1 --")
	f.Add("Bearer ' OR '1'='1", "")
	f.Add("Bearer \x00", "owed_session=\x00")
	fz := newFuzzAPI(f)
	f.Fuzz(func(t *testing.T, authorization, cookie string) {
		req := httptest.NewRequest(http.MethodGet, "/api/session", nil)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		rec := fz.serve(req, asAnon)
		checkAnswer(t, fmt.Sprintf("Authorization %q, Cookie %q", authorization, cookie), rec)
		signedIn := rec.Code == http.StatusOK
		valid := false
		for _, tok := range fz.tok {
			valid = valid || authorization == "Bearer "+tok
		}
		if signedIn != valid {
			t.Fatalf("Authorization %q, Cookie %q: %d %s", authorization, cookie, rec.Code, rec.Body)
		}
		if !signedIn && rec.Code != http.StatusUnauthorized {
			t.Fatalf("Authorization %q, Cookie %q: %d, want 401", authorization, cookie, rec.Code)
		}
	})
}
