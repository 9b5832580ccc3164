package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/owed/owed/app"
	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
	"github.com/owed/owed/owedtest/wait"
	"github.com/owed/owed/scheduler"
)

// The callers every route is tried with.
type role string

const (
	asAnon   role = "anonymous"
	asAuthor role = "author" // owns the fixtures' items
	asOther  role = "other"  // another author
	asBot    role = "bot"
	asAdmin  role = "admin"
)

var everyRole = []role{asAnon, asAuthor, asOther, asBot, asAdmin}

// world is a running owed with one user of each kind.
type world struct {
	t   *testing.T
	env *owedtest.Env
	tok map[role]string
	uid map[role]int64

	sweeper   *scheduler.Content // quiet worlds sweep with it
	snapQuery string             // reads the whole database (snapshot)
}

// newWorld starts owed (owedtest.NewEnv) with an author (ann), another author (ben) and a bot.
// The per-token write rate limit is off, as in every Env: these tests send more writes a
// second than any client should (the limit has tests of its own).
func newWorld(t *testing.T, db string, configure ...func(*app.Config)) *world {
	t.Helper()
	env := owedtest.NewEnv(t, db, configure...)
	w := worldOf(t, env)
	w.uid[asAuthor], w.tok[asAuthor] = env.User("ann", models.RoleAuthor)
	w.uid[asOther], w.tok[asOther] = env.User("ben", models.RoleAuthor)
	w.uid[asBot], w.tok[asBot] = env.User("bo", models.RoleBot)
	admin, err := env.App.Store.UserByToken(context.Background(), env.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	w.uid[asAdmin] = admin.ID
	checkAnswers(w)
	return w
}

// worldOf is a world on env with only its admin.
func worldOf(t *testing.T, env *owedtest.Env) *world {
	return &world{t: t, env: env, tok: map[role]string{asAdmin: env.AdminToken}, uid: map[role]int64{}}
}

// quiet stops the app's background work (owedtest.Env.Quiet): writes answer pending, and
// w.sweep() settles the owed work when the test says so, with a runner of its own.
func (w *world) quiet() *world {
	w.sweeper = w.env.Quiet()
	return w
}

// sweep runs every due job now, as the periodic sweep does, and returns how many ran.
func (w *world) sweep() int {
	w.t.Helper()
	if w.sweeper == nil {
		return w.env.Sweep()
	}
	n, err := w.sweeper.Sweep(context.Background(), 0)
	if err != nil {
		w.t.Fatalf("sweep: %v", err)
	}
	return n
}

func (w *world) do(method, path string, as role, body any, headers ...string) owedtest.Response {
	w.t.Helper()
	return w.env.Do(method, path, w.tok[as], body, headers...)
}

func (w *world) store() *models.Store { return w.env.App.Store }

// song writes a song of owner's through the store; verdict "" leaves its revision pending.
func (w *world) song(owner role, verdict models.Verdict) (songID, revID int64) {
	w.t.Helper()
	s, r, err := w.store().CreateSong(context.Background(), w.uid[owner], "Song of "+string(owner), `s("bd sd")`)
	if err != nil {
		w.t.Fatal(err)
	}
	w.screen(models.KindRevision, r.ID, owner, verdict)
	return s.ID, r.ID
}

// comment writes a comment of owner's on songID through the store.
func (w *world) comment(owner role, songID int64, verdict models.Verdict) int64 {
	w.t.Helper()
	c, err := w.store().CreateComment(context.Background(), w.uid[owner], songID, "nice one")
	if err != nil {
		w.t.Fatal(err)
	}
	w.screen(models.KindComment, c.ID, owner, verdict)
	return c.ID
}

// pitch writes a pitch of owner's through the store.
func (w *world) pitch(owner role, verdict models.Verdict) int64 {
	w.t.Helper()
	p, err := w.store().CreatePitch(context.Background(), w.uid[owner], "a pitch by "+string(owner))
	if err != nil {
		w.t.Fatal(err)
	}
	w.screen(models.KindPitch, p.ID, owner, verdict)
	return p.ID
}

// screen records a verdict as a screen job would ("" records none).
func (w *world) screen(kind models.Kind, id int64, owner role, verdict models.Verdict) {
	w.t.Helper()
	if verdict == "" {
		return
	}
	ev := models.Event{Event: models.TaskScreen, Kind: kind, ItemID: id, UserID: w.uid[owner], Outcome: models.EventOutcome(verdict)}
	if ok, err := w.store().RecordScreen(context.Background(), kind, id, verdict, 0.9, ev); err != nil || !ok {
		w.t.Fatalf("record screen of %s %d: %v %v", kind, id, ok, err)
	}
}

// job finds the owed job of an item's task.
func (w *world) job(task models.Task, kind models.Kind, item int64) models.Job {
	w.t.Helper()
	return w.env.Data().MustJob(task, kind, item)
}

// created posts body and returns the new resource's answer, failing unless it is 201.
func (w *world) created(path string, as role, body any) map[string]any {
	w.t.Helper()
	r := w.do(http.MethodPost, path, as, body)
	if r.Status != http.StatusCreated {
		w.t.Fatalf("POST %s: %d %s", path, r.Status, r.Body)
	}
	return r.JSON()
}

// snapshot is every row of every table, so a test can tell that a refused request changed
// nothing at all: no row added, removed or updated.
type snapshot map[string][]string

func (w *world) snapshot() snapshot {
	w.t.Helper()
	db := w.store()
	if w.snapQuery == "" {
		w.snapQuery = w.snapshotQuery()
	}
	var rows []struct {
		T string `gorm:"column:t"`
		R string `gorm:"column:r"`
	}
	if err := db.RawScan(context.Background(), &rows, w.snapQuery); err != nil {
		w.t.Fatalf("snapshot: %v", err)
	}
	snap := snapshot{}
	for _, r := range rows {
		snap[r.T] = append(snap[r.T], r.R)
	}
	for _, lines := range snap {
		sort.Strings(lines)
	}
	return snap
}

// snapshotQuery is one query that reads every row of every table as text: (t, r).
func (w *world) snapshotQuery() string {
	w.t.Helper()
	db := w.store()
	var tables []string
	q := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`
	pg := w.store().Dialect() == models.Postgres
	if pg {
		q = `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`
	}
	if err := db.RawScan(context.Background(), &tables, q); err != nil {
		w.t.Fatalf("snapshot: %v", err)
	}
	var parts []string
	for _, table := range tables {
		if pg {
			parts = append(parts, fmt.Sprintf(`SELECT '%s' AS t, x::text AS r FROM %q x`, table, table))
			continue
		}
		var cols []string
		if err := db.RawScan(context.Background(), &cols, `SELECT name FROM pragma_table_info(?)`, table); err != nil {
			w.t.Fatalf("snapshot %s: %v", table, err)
		}
		for i, c := range cols {
			cols[i] = fmt.Sprintf("%q", c)
		}
		parts = append(parts, fmt.Sprintf(`SELECT '%s' AS t, json_array(%s) AS r FROM %q`, table, strings.Join(cols, ", "), table))
	}
	return strings.Join(parts, " UNION ALL ")
}

// diff describes how after differs from s, or "" when it does not.
func (s snapshot) diff(after snapshot) string {
	var out []string
	names := map[string]bool{}
	for k := range s {
		names[k] = true
	}
	for k := range after {
		names[k] = true
	}
	for _, table := range slices.Sorted(maps.Keys(names)) {
		a, b := s[table], after[table]
		if slices.Equal(a, b) {
			continue
		}
		var gone, added []string
		for _, r := range a {
			if !slices.Contains(b, r) {
				gone = append(gone, r)
			}
		}
		for _, r := range b {
			if !slices.Contains(a, r) {
				added = append(added, r)
			}
		}
		out = append(out, fmt.Sprintf("%s: %d rows → %d; gone %v; new %v", table, len(a), len(b), gone, added))
	}
	return strings.Join(out, "\n")
}

// unchanged fails when the database differs from before.
func (w *world) unchanged(t *testing.T, before snapshot, what string) {
	t.Helper()
	if d := before.diff(w.snapshot()); d != "" {
		t.Errorf("%s changed the database:\n%s", what, d)
	}
}

// checkError asserts the SPEC's error shape, exactly: {"error":{"code","message","field"}}
// with field null when no field is at fault.
func checkError(t *testing.T, r owedtest.Response, status int, code, field string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("status %d, want %d: %s", r.Status, status, r.Body)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want JSON", ct)
	}
	var outer map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &outer); err != nil || len(outer) != 1 || outer["error"] == nil {
		t.Errorf("body %s: want exactly {\"error\":{…}}", r.Body)
		return
	}
	var e map[string]any
	if err := json.Unmarshal(outer["error"], &e); err != nil {
		t.Errorf("error %s is not an object", outer["error"])
		return
	}
	keys := slices.Sorted(maps.Keys(e))
	if !slices.Equal(keys, []string{"code", "field", "message"}) {
		t.Errorf("error keys %v, want code, field, message: %s", keys, r.Body)
	}
	if c, _ := e["code"].(string); code != "" && c != code {
		t.Errorf("error code %q, want %q: %s", c, code, r.Body)
	}
	if m, _ := e["message"].(string); m == "" {
		t.Errorf("error without a message: %s", r.Body)
	}
	switch f := e["field"].(type) {
	case nil:
		if field != "" {
			t.Errorf("error field null, want %q: %s", field, r.Body)
		}
	case string:
		if f != field {
			t.Errorf("error field %q, want %q: %s", f, field, r.Body)
		}
	default:
		t.Errorf("error field %v is neither a string nor null", f)
	}
}

// keysOf lists an object's keys, sorted.
func keysOf(v any) []string {
	m, _ := v.(map[string]any)
	return slices.Sorted(maps.Keys(m))
}

// hasKeys fails unless the object at path holds every key named (more are allowed).
func hasKeys(t *testing.T, where string, v any, keys ...string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: %v is not an object", where, v)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s: no %q in %v", where, k, keysOf(m))
		}
	}
	return m
}

var rfc3339UTC = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$`)

// isTime fails unless v is an RFC 3339 time in UTC, and returns it.
func isTime(t *testing.T, where string, v any) time.Time {
	t.Helper()
	s, ok := v.(string)
	if !ok || !rfc3339UTC.MatchString(s) {
		t.Errorf("%s = %v, want an RFC 3339 time in UTC", where, v)
		return time.Time{}
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Errorf("%s = %q: %v", where, s, err)
	}
	return at
}

// isNull fails unless the key is present and null.
func isNull(t *testing.T, where string, m map[string]any, key string) {
	t.Helper()
	v, ok := m[key]
	if !ok {
		t.Errorf("%s: %q is absent, want null", where, key)
	} else if v != nil {
		t.Errorf("%s: %q = %v, want null", where, key, v)
	}
}

// num reads a JSON number as an int64.
func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// scored waits until the revision's score, which follows its write in the background, is
// recorded.
func (w *world) scored(revID int64) {
	w.t.Helper()
	wait.Until(w.t, fmt.Sprintf("the score of revision %d", revID), func() bool {
		var n int64
		w.store().RawScan(context.Background(), &n, `SELECT COUNT(*) FROM scores WHERE revision_id = ?`, revID)
		return n == 1
	})
}

// Every JSON answer a world's client receives from /api is checked against the OpenAPI
// document's schema for its route and status (errors against the Error schema): a test that
// sees an answer the document does not describe fails with the route, where in the JSON, and
// why.

// answersChecked counts the answers checked in this test binary's run.
var answersChecked atomic.Int64

func TestMain(m *testing.M) {
	code := m.Run()
	if n := answersChecked.Load(); n > 0 {
		fmt.Printf("harness: %d JSON answers checked against the OpenAPI document\n", n)
	}
	os.Exit(code)
}

// openAPISchemas compiles the document's response schemas, once per test binary (the document
// depends on the code alone).
type openAPISchemas struct {
	once     sync.Once
	err      error
	compiler *jsonschema.Compiler
	paths    []docPath
	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema
}

// docPath is one path of the document, with the pattern of the request paths it names.
type docPath struct {
	template string
	pattern  *regexp.Regexp
	literal  int                             // characters outside parameters: the most literal template wins
	methods  map[string]map[string]docAnswer // method → status ("default" too) → answer
}

// docAnswer is one JSON answer the document declares: where its schema is and, for an error,
// the codes it lists (x-error-codes).
type docAnswer struct {
	schema string // a JSON pointer into the document
	codes  []string
}

var schemasOfDoc openAPISchemas

const docURL = "file:///openapi.json"

func (s *openAPISchemas) load(a interface{ OpenAPI() map[string]any }) error {
	s.once.Do(func() {
		raw, err := json.Marshal(a.OpenAPI())
		if err != nil {
			s.err = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			s.err = err
			return
		}
		s.compiler = jsonschema.NewCompiler()
		s.compiler.AssertFormat()
		if s.err = s.compiler.AddResource(docURL, doc); s.err != nil {
			return
		}
		s.compiled = map[string]*jsonschema.Schema{}
		param := regexp.MustCompile(`\{\w+\}`)
		escape := strings.NewReplacer("~", "~0", "/", "~1").Replace
		for tmpl, item := range obj(obj(doc)["paths"]) {
			quoted := strings.NewReplacer(`\{`, "{", `\}`, "}").Replace(regexp.QuoteMeta(tmpl))
			p := docPath{template: tmpl, methods: map[string]map[string]docAnswer{},
				pattern: regexp.MustCompile("^" + param.ReplaceAllLiteralString(quoted, "[^/]+") + "$"),
				literal: len(param.ReplaceAllLiteralString(tmpl, ""))}
			for method, op := range obj(item) {
				answers := map[string]docAnswer{}
				for code, answer := range obj(obj(op)["responses"]) {
					at := "#/paths/" + url.PathEscape(escape(tmpl)) + "/" + method + "/responses/" + code
					if ref, ok := obj(answer)["$ref"].(string); ok {
						at = ref
						answer = obj(obj(obj(doc)["components"])["responses"])[strings.TrimPrefix(ref, "#/components/responses/")]
					}
					if _, json := obj(obj(answer)["content"])["application/json"]; !json {
						continue
					}
					var codes []string
					for _, c := range list(obj(answer)["x-error-codes"]) {
						codes = append(codes, c.(string))
					}
					answers[code] = docAnswer{at + "/content/application~1json/schema", codes}
				}
				p.methods[strings.ToUpper(method)] = answers
			}
			s.paths = append(s.paths, p)
		}
	})
	return s.err
}

// schemaFor is the schema of an answer to method on path with status, the route it names (""
// when the document names none: the answer is then checked only as an error) and, for an
// error, the codes the document lists for it. A status the route does not declare (500
// aside, the default) is an error.
func (s *openAPISchemas) schemaFor(method, path string, status int) (*jsonschema.Schema, string, []string, error) {
	var best *docPath
	for i := range s.paths {
		p := &s.paths[i]
		if p.pattern.MatchString(path) && (best == nil || p.literal > best.literal) {
			best = p
		}
	}
	answer := docAnswer{schema: "#/components/schemas/Error"}
	route := ""
	if best != nil && best.methods[method] != nil {
		route = method + " " + best.template
		var ok bool
		if answer, ok = best.methods[method][strconv.Itoa(status)]; !ok {
			if answer, ok = best.methods[method]["default"]; !ok || status != http.StatusInternalServerError {
				return nil, route, nil, fmt.Errorf("%s answered %d, a status its operation does not declare", route, status)
			}
		}
	}
	loc := docURL + answer.schema
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch, ok := s.compiled[loc]; ok {
		return sch, route, answer.codes, nil
	}
	sch, err := s.compiler.Compile(loc)
	if err != nil {
		return nil, route, nil, err
	}
	s.compiled[loc] = sch
	return sch, route, answer.codes, nil
}

// checkAnswers makes the world's client check every JSON answer from /api against the document.
func checkAnswers(w *world) {
	client := w.env.Server.Client()
	client.Transport = &answerChecker{next: client.Transport, w: w}
}

type answerChecker struct {
	next http.RoundTripper
	w    *world
}

func (c *answerChecker) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := c.next.RoundTrip(req)
	if err != nil || !strings.HasPrefix(req.URL.Path, "/api/") || req.Method == http.MethodHead {
		return res, err
	}
	cookieNotStored(c.w.t, req, res)
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "application/json" {
		return res, err // server-sent events, previews
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return res, nil // the test reads the failure itself
	}
	t := c.w.t
	t.Helper()
	if err := schemasOfDoc.load(c.w.env.App.API); err != nil {
		t.Fatalf("the OpenAPI document does not load as JSON Schema: %v", err)
	}
	sch, route, codes, err := schemasOfDoc.schemaFor(req.Method, req.URL.Path, res.StatusCode)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	if route == "" {
		route = req.Method + " " + req.URL.Path + " (no route)"
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s answered %d with JSON that does not parse: %v", route, res.StatusCode, err)
		return res, nil
	}
	answersChecked.Add(1)
	secretsNotStored(t, route, res, v)
	if err := sch.Validate(v); err != nil {
		t.Errorf("%s answered %d with JSON its schema does not allow: %v\nbody: %.300s", route, res.StatusCode, err, body)
	}
	if code, _ := obj(obj(v)["error"])["code"].(string); codes != nil && !slices.Contains(codes, code) {
		t.Errorf("%s answered %d with code %q, which its answer does not list (%v): add it to routeErrors (api/openapi_errors.go)", route, res.StatusCode, code, codes)
	}
	return res, nil
}

// TestAnswerCheckerRefuses: the harness fails an answer its route's schema does not allow, and
// says where and why.
func TestAnswerCheckerRefuses(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "sqlite:"+t.TempDir()+"/owed.db")
	if err := schemasOfDoc.load(w.env.App.API); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, path string
		status       int
		body, want   string
	}{
		{http.MethodGet, "/api/admin/model", 200, `{"state":"ajar","since":null,"failures":0,"nextProbeAt":null,"inFlight":0,"cap":4}`, "/state"},
		{http.MethodGet, "/api/admin/model", 200, `{"state":"open","since":"yesterday","failures":0,"nextProbeAt":null,"inFlight":0,"cap":4}`, "/since"},
		{http.MethodGet, "/api/admin/model", 200, `{"state":"open","failures":0,"nextProbeAt":null,"inFlight":0,"cap":4}`, "since"},
		{http.MethodGet, "/api/songs/7", 200, `{"song":{"id":7,"title":"t","userId":1,"art":null,"createdAt":"2026-12-02T07:00:00.000Z"},"revisions":null,"comments":[]}`, "/revisions"},
		{http.MethodGet, "/api/songs/7", 404, `{"error":{"code":"not_found","message":"song not found"}}`, "field"},
	} {
		sch, route, _, err := schemasOfDoc.schemaFor(c.method, c.path, c.status)
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		err = sch.Validate(v)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %d %s: %v, want a refusal at %s", route, c.status, c.body, err, c.want)
		}
	}
}
