package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/owed/owed/models"
	"github.com/owed/owed/owedtest"
)

// badWorld is a quiet world with something in every table a bad request could touch: a
// public song with a comment, pending items whose screen jobs wait (why upstream), a score job,
// an author with a budget of their own, events and budget spend.
type badWorld struct {
	*world
	song, rev, comment, pitch int64
}

func newBadWorld(t *testing.T, db string) *badWorld {
	t.Helper()
	w := newWorld(t, db).quiet()
	b := &badWorld{world: w}
	b.song, b.rev = w.song(asAuthor, models.VerdictAllow) // its score job is owed
	b.comment = w.comment(asOther, b.song, models.VerdictAllow)
	b.pitch = w.pitch(asAuthor, "")
	w.song(asOther, "")
	w.env.Model.Fail(http.StatusServiceUnavailable, nil)
	w.sweep() // every job now waits, why upstream, attempts 1, with spend charged
	w.env.Model.Reset()
	if r := w.do(http.MethodPut, fmt.Sprintf("/api/admin/users/%d/budget", w.uid[asAuthor]), asAdmin, map[string]any{"dailyLimit": 40}); r.Status != http.StatusOK {
		t.Fatalf("set budget: %d %s", r.Status, r.Body)
	}
	return b
}

func (b *badWorld) fill(path string) string {
	return strings.NewReplacer("{song}", fmt.Sprint(b.song), "{rev}", fmt.Sprint(b.rev), "{comment}", fmt.Sprint(b.comment),
		"{pitch}", fmt.Sprint(b.pitch), "{author}", fmt.Sprint(b.uid[asAuthor]),
		"{job}", fmt.Sprint(b.job(models.TaskScreen, models.KindPitch, b.pitch).ID)).Replace(path)
}

// caller is who may call a route: the first allowed role, an author for the authors' routes.
func (rc routeCase) caller() role {
	if len(rc.roles) == len(everyRole) {
		return asAnon
	}
	return rc.roles[0]
}

type badCase struct {
	name   string
	method string
	path   string
	as     role
	body   any // a string is sent as it is
	status int
	code   string
	field  string
}

var (
	longTitle   = strings.Repeat("é", 201) // characters count, not bytes
	bigCode     = strings.Repeat("a", 64<<10+1)
	bigBody     = strings.Repeat("b", 8<<10+1)
	longName    = strings.Repeat("n", 101)
	invalidUTF8 = "caf\xe9"
)

// badCases are the bad inputs of each route beyond the generic ones (media type, malformed
// JSON, unknown fields, path ids, limit and cursor), which every route gets below.
var badCases = []badCase{
	{"token of the wrong type", "POST", "/api/session", asAnon, `{"token":5}`, 400, "invalid", "token"},
	{"token missing", "POST", "/api/session", asAnon, `{}`, 400, "invalid", "token"},
	{"token empty", "POST", "/api/session", asAnon, `{"token":""}`, 400, "invalid", "token"},
	{"token unknown", "POST", "/api/session", asAnon, `{"token":"owed_nope"}`, 401, "unauthorized", "token"},

	{"title missing", "POST", "/api/listeners/songs", asAuthor, `{"code":"s()"}`, 400, "invalid", "title"},
	{"title blank", "POST", "/api/listeners/songs", asAuthor, `{"title":"  ","code":"s()"}`, 400, "invalid", "title"},
	{"title of the wrong type", "POST", "/api/listeners/songs", asAuthor, `{"title":5,"code":"s()"}`, 400, "invalid", "title"},
	{"title too long", "POST", "/api/listeners/songs", asAuthor, map[string]string{"title": longTitle, "code": "s()"}, 400, "invalid", "title"},
	{"code missing", "POST", "/api/listeners/songs", asAuthor, `{"title":"t"}`, 400, "invalid", "code"},
	{"code of the wrong type", "POST", "/api/listeners/songs", asAuthor, `{"title":"t","code":["s()"]}`, 400, "invalid", "code"},
	{"code too large", "POST", "/api/listeners/songs", asAuthor, map[string]string{"title": "t", "code": bigCode}, 413, "too_large", "code"},
	{"code with NUL", "POST", "/api/listeners/songs", asAuthor, `{"title":"t","code":"a\u0000b"}`, 400, "invalid", "code"},
	{"null body", "POST", "/api/listeners/songs", asAuthor, `null`, 400, "invalid", ""},
	{"title given twice", "POST", "/api/listeners/songs", asAuthor, `{"title":"a","code":"s()","title":"b"}`, 400, "invalid", "title"},
	{"Title, not title", "POST", "/api/listeners/songs", asAuthor, `{"Title":"a","code":"s()"}`, 400, "invalid", "Title"},
	{"null body retries nothing", "POST", "/api/admin/jobs/retry", asAdmin, `null`, 400, "invalid", ""},
	{"a nested key twice", "POST", "/api/admin/webhooks", asAdmin, `{"url":"https://example.org/h","events":["*"],"url":"https://example.org/i"}`, 400, "invalid", "url"},
	{"title with NUL", "POST", "/api/listeners/songs", asAuthor, `{"title":"a\u0000b","code":"s()"}`, 400, "invalid", "title"},

	{"code missing", "POST", "/api/listeners/songs/{song}/revisions", asAuthor, `{}`, 400, "invalid", "code"},
	{"code of the wrong type", "POST", "/api/listeners/songs/{song}/revisions", asAuthor, `{"code":5}`, 400, "invalid", "code"},
	{"code too large", "POST", "/api/listeners/songs/{song}/revisions", asAuthor, map[string]string{"code": bigCode}, 413, "too_large", "code"},
	{"title too long", "POST", "/api/listeners/songs/{song}/revisions", asAuthor, map[string]string{"code": "s()", "title": longTitle}, 400, "invalid", "title"},
	{"title of the wrong type", "POST", "/api/listeners/songs/{song}/revisions", asAuthor, `{"code":"s()","title":true}`, 400, "invalid", "title"},
	{"title with NUL", "POST", "/api/listeners/songs/{song}/revisions", asAuthor, `{"code":"s()","title":"\u0000"}`, 400, "invalid", "title"},
	{"another author's song", "POST", "/api/listeners/songs/{song}/revisions", asOther, `{"code":"s()"}`, 404, "not_found", ""},

	{"body missing", "POST", "/api/listeners/songs/{song}/comments", asAuthor, `{}`, 400, "invalid", "body"},
	{"body blank", "POST", "/api/listeners/songs/{song}/comments", asAuthor, `{"body":" \n "}`, 400, "invalid", "body"},
	{"body of the wrong type", "POST", "/api/listeners/songs/{song}/comments", asAuthor, `{"body":{"text":"hi"}}`, 400, "invalid", "body"},
	{"body too large", "POST", "/api/listeners/songs/{song}/comments", asAuthor, map[string]string{"body": bigBody}, 413, "too_large", "body"},

	{"body missing", "POST", "/api/listeners/pitches", asAuthor, `{}`, 400, "invalid", "body"},
	{"body of the wrong type", "POST", "/api/listeners/pitches", asAuthor, `{"body":12}`, 400, "invalid", "body"},
	{"body too large", "POST", "/api/listeners/pitches", asAuthor, map[string]string{"body": bigBody}, 413, "too_large", "body"},
	{"body not UTF-8", "POST", "/api/listeners/pitches", asAuthor, `{"body":"` + invalidUTF8 + `"}`, 400, "invalid", ""},

	{"name missing", "POST", "/api/admin/users", asAdmin, `{"role":"author"}`, 400, "invalid", "name"},
	{"name of the wrong type", "POST", "/api/admin/users", asAdmin, `{"name":5,"role":"author"}`, 400, "invalid", "name"},
	{"name too long", "POST", "/api/admin/users", asAdmin, map[string]string{"name": longName, "role": "author"}, 400, "invalid", "name"},
	{"role missing", "POST", "/api/admin/users", asAdmin, `{"name":"cy"}`, 400, "invalid", "role"},
	{"name with NUL", "POST", "/api/admin/users", asAdmin, `{"name":"c\u0000y","role":"author"}`, 400, "invalid", "name"},
	{"role unknown", "POST", "/api/admin/users", asAdmin, `{"name":"cy","role":"root"}`, 400, "invalid", "role"},
	{"name taken, in another case", "POST", "/api/admin/users", asAdmin, `{"name":"ANN","role":"bot"}`, 409, "conflict", "name"},
	{"name taken", "POST", "/api/admin/users", asAdmin, `{"name":" ben ","role":"author"}`, 409, "conflict", "name"},

	{"dailyLimit missing", "PUT", "/api/admin/users/{author}/budget", asAdmin, `{}`, 400, "invalid", "dailyLimit"},
	{"dailyLimit negative", "PUT", "/api/admin/users/{author}/budget", asAdmin, `{"dailyLimit":-1}`, 400, "invalid", "dailyLimit"},
	{"dailyLimit fractional", "PUT", "/api/admin/users/{author}/budget", asAdmin, `{"dailyLimit":1.5}`, 400, "invalid", "dailyLimit"},
	{"dailyLimit of the wrong type", "PUT", "/api/admin/users/{author}/budget", asAdmin, `{"dailyLimit":"ten"}`, 400, "invalid", "dailyLimit"},
	{"dailyLimit huge", "PUT", "/api/admin/users/{author}/budget", asAdmin, `{"dailyLimit":10000001}`, 400, "invalid", "dailyLimit"},

	{"task unknown", "POST", "/api/admin/jobs/retry", asAdmin, `{"task":"bake"}`, 400, "invalid", "task"},
	{"kind unknown", "POST", "/api/admin/jobs/retry", asAdmin, `{"kind":"song"}`, 400, "invalid", "kind"},
	{"why unknown", "POST", "/api/admin/jobs/retry", asAdmin, `{"why":"tired"}`, 400, "invalid", "why"},
	{"state unknown", "POST", "/api/admin/jobs/retry", asAdmin, `{"state":"asleep"}`, 400, "invalid", "state"},
	{"userId of the wrong type", "POST", "/api/admin/jobs/retry", asAdmin, `{"userId":"2"}`, 400, "invalid", "userId"},
	{"userId negative", "POST", "/api/admin/jobs/retry", asAdmin, `{"userId":-2}`, 400, "invalid", "userId"},
	{"itemId fractional", "POST", "/api/admin/jobs/retry", asAdmin, `{"itemId":1.5}`, 400, "invalid", "itemId"},
	{"itemId negative", "POST", "/api/admin/jobs/retry", asAdmin, `{"itemId":-1}`, 400, "invalid", "itemId"},

	{"sort unknown", "GET", "/api/songs?sort=best", asAnon, nil, 400, "invalid", "sort"},

	{"task unknown", "GET", "/api/admin/jobs?task=bake", asAdmin, nil, 400, "invalid", "task"},
	{"kind unknown", "GET", "/api/admin/jobs?kind=song", asAdmin, nil, 400, "invalid", "kind"},
	{"why unknown", "GET", "/api/admin/jobs?why=tired", asAdmin, nil, 400, "invalid", "why"},
	{"state unknown", "GET", "/api/admin/jobs?state=asleep", asAdmin, nil, 400, "invalid", "state"},
	{"userId not a number", "GET", "/api/admin/jobs?userId=ann", asAdmin, nil, 400, "invalid", "userId"},
	{"userId negative", "GET", "/api/admin/jobs?userId=-1", asAdmin, nil, 400, "invalid", "userId"},
	{"itemId not a number", "GET", "/api/admin/jobs?itemId=1e3", asAdmin, nil, 400, "invalid", "itemId"},

	{"event unknown", "GET", "/api/admin/events?event=bake", asAdmin, nil, 400, "invalid", "event"},
	{"why unknown", "GET", "/api/admin/events?why=tired", asAdmin, nil, 400, "invalid", "why"},
	{"kind unknown", "GET", "/api/admin/events?kind=song", asAdmin, nil, 400, "invalid", "kind"},
	{"outcome unknown", "GET", "/api/admin/events?outcome=meh", asAdmin, nil, 400, "invalid", "outcome"},
	{"userId not a number", "GET", "/api/admin/events?userId=x", asAdmin, nil, 400, "invalid", "userId"},
	{"itemId negative", "GET", "/api/admin/events?itemId=-3", asAdmin, nil, 400, "invalid", "itemId"},
}

// send makes one request with a raw or JSON body and the given headers.
func (w *world) send(method, path string, as role, body any, headers ...string) owedtest.Response {
	w.t.Helper()
	if s, ok := body.(string); ok {
		return w.do(method, path, as, []byte(s), headers...)
	}
	return w.do(method, path, as, body, headers...)
}

// TestBadInput sends each route's bad inputs: each answers a clear 4xx in the error shape,
// naming the field at fault, and nothing in the database changes.
func TestBadInput(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		b := newBadWorld(t, db)
		routes := appRoutes(b.env)
		for _, c := range badCases {
			t.Run(c.method+" "+c.path+": "+c.name, func(t *testing.T) {
				b.t = t
				before := b.snapshot()
				r := b.send(c.method, b.fill(c.path), c.as, c.body)
				checkError(t, r, c.status, c.code, c.field)
				b.unchanged(t, before, c.name)
			})
		}

		// Every route that takes a JSON body refuses what is not one JSON object it knows.
		for _, route := range routes {
			rc, ok := routeMatrix[route]
			if !ok {
				continue
			}
			method, _, _ := strings.Cut(route, " ")
			b.t = t
			path, valid := rc.req(b.world)
			if valid == nil {
				continue
			}
			good, _ := json.Marshal(valid)
			var withUnknown map[string]any
			json.Unmarshal(good, &withUnknown)
			withUnknown["bogus"] = 1
			unknown, _ := json.Marshal(withUnknown)
			// The first key of the valid body given twice, and in capitals.
			first := ""
			for k := range withUnknown {
				if k != "bogus" && (first == "" || k < first) {
					first = k
				}
			}
			again, _ := json.Marshal(withUnknown[first])
			twice := `{"` + first + `":` + string(again) + `,` + strings.TrimPrefix(string(good), "{")
			capitals := strings.Replace(string(good), `"`+first+`":`, `"`+strings.ToUpper(first)+`":`, 1)
			for _, g := range []struct {
				name    string
				body    string
				headers []string
				status  int
				code    string
				field   string
			}{
				{"a text/plain body", string(good), []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type", ""},
				{"a form body", "title=x", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type", ""},
				{"no content type", string(good), []string{"Content-Type", ""}, 415, "unsupported_media_type", ""},
				{"malformed JSON", `{"title": "x",`, nil, 400, "invalid", ""},
				{"an empty body", ``, nil, 400, "invalid", ""},
				{"two JSON values", string(good) + ` {}`, nil, 400, "invalid", ""},
				{"an unknown field", string(unknown), nil, 400, "invalid", "bogus"},
				{"a list, not an object", `[` + string(good) + `]`, nil, 400, "invalid", ""},
				{"null", `null`, nil, 400, "invalid", ""},
				{"a string", `"x"`, nil, 400, "invalid", ""},
				{"a number", ` 5`, nil, 400, "invalid", ""},
				{"a key twice", twice, nil, 400, "invalid", first},
				{"a key in capitals", capitals, nil, 400, "invalid", strings.ToUpper(first)},
			} {
				if first == "" && (g.name == "a key twice" || g.name == "a key in capitals") {
					continue // a body of no fields has no key to repeat
				}
				t.Run(route+": "+g.name, func(t *testing.T) {
					b.t = t
					before := b.snapshot()
					r := b.send(method, path, rc.caller(), g.body, g.headers...)
					checkError(t, r, g.status, g.code, g.field)
					b.unchanged(t, before, g.name)
				})
			}
		}

		// No string field of any body reaches the database with a NUL byte (PostgreSQL refuses
		// those, which would be a 500): each is a 400 naming the field, and nothing changes.
		for _, route := range routes {
			rc, ok := routeMatrix[route]
			if !ok {
				continue
			}
			method, _, _ := strings.Cut(route, " ")
			b.t = t
			_, valid := rc.req(b.world)
			fields, _ := valid.(map[string]any)
			if fields == nil {
				if m, ok := valid.(map[string]string); ok {
					fields = map[string]any{}
					for k, v := range m {
						fields[k] = v
					}
				}
			}
			for name, v := range fields {
				if _, isString := v.(string); !isString {
					continue
				}
				t.Run(route+": NUL in "+name, func(t *testing.T) {
					b.t = t
					path, valid := rc.req(b.world)
					body := map[string]any{}
					raw, _ := json.Marshal(valid)
					json.Unmarshal(raw, &body)
					body[name] = "a\x00b"
					before := b.snapshot()
					r := b.send(method, path, rc.caller(), body)
					if r.Status == http.StatusUnauthorized { // a token with a NUL is simply not one
						checkError(t, r, http.StatusUnauthorized, "unauthorized", name)
					} else {
						checkError(t, r, http.StatusBadRequest, "invalid", name)
					}
					b.unchanged(t, before, "a NUL in "+name)
				})
			}
		}

		// Every route with an id in its path answers 404 for ids that are not positive
		// integers, and for ids of nothing.
		for _, route := range routes {
			rc, ok := routeMatrix[route]
			if !ok || !strings.Contains(route, ":") {
				continue
			}
			method, pattern, _ := strings.Cut(route, " ")
			for _, id := range []string{"abc", "-1", "0", "99999999999999999999", "987654"} {
				t.Run(route+": id "+id, func(t *testing.T) {
					b.t = t
					path, body := rc.req(b.world)
					segs, pat := strings.Split(path, "/"), strings.Split(pattern, "/")
					for i := range pat {
						if strings.HasPrefix(pat[i], ":") {
							segs[i] = url.PathEscape(id)
						}
					}
					before := b.snapshot()
					r := b.send(method, strings.Join(segs, "/"), rc.caller(), body)
					checkError(t, r, http.StatusNotFound, "not_found", "")
					b.unchanged(t, before, "a bad id")
				})
			}
		}

		// Every list documented with limit and cursor refuses bad values of either.
		var doc struct {
			Paths map[string]map[string]struct {
				Parameters []struct{ Name, In string }
			}
		}
		b.t = t
		b.do(http.MethodGet, "/api/openapi.json", asAnon, nil).Decode(t, &doc)
		for _, route := range routes {
			method, pattern, _ := strings.Cut(route, " ")
			rc, ok := routeMatrix[route]
			op, documented := doc.Paths[openAPIPath(pattern)][strings.ToLower(method)]
			if !ok || !documented {
				continue
			}
			var params []string
			for _, p := range op.Parameters {
				if p.In == "query" {
					params = append(params, p.Name)
				}
			}
			for _, bad := range []struct{ param, value string }{
				{"limit", "0"}, {"limit", "-1"}, {"limit", "ten"}, {"limit", "2.5"}, {"limit", "100000"},
				{"cursor", "not a cursor!"}, {"cursor", "bm9wZQ"}, {"cursor", "eyJpIjotNX0"}, {"cursor", strings.Repeat("e30", 200)},
			} {
				if !slices.Contains(params, bad.param) {
					continue
				}
				t.Run(route+": "+bad.param+"="+bad.value, func(t *testing.T) {
					b.t = t
					path, body := rc.req(b.world)
					before := b.snapshot()
					r := b.send(method, path+"?"+url.Values{bad.param: {bad.value}}.Encode(), rc.caller(), body)
					checkError(t, r, http.StatusBadRequest, "invalid", bad.param)
					b.unchanged(t, before, "a bad "+bad.param)
				})
			}
		}
	})
}

// openAPIPath turns an Echo path (/a/:id) into an OpenAPI one (/a/{id}).
func openAPIPath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, ":") {
			segs[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(segs, "/")
}

// TestLimitsAreInclusive: what is exactly at a limit is accepted; one past it is refused
// (TestBadInput).
func TestLimitsAreInclusive(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "sqlite:"+t.TempDir()+"/owed.db").quiet()
	title := strings.Repeat("é", 200)
	song := w.created("/api/listeners/songs", asAuthor, map[string]string{"title": title, "code": strings.Repeat("a", 64<<10)})
	if got := obj(song["song"])["title"]; got != title {
		t.Errorf("title %v, want the 200 characters sent", got)
	}
	id := num(obj(song["song"])["id"])
	w.created(fmt.Sprintf("/api/listeners/songs/%d/revisions", id), asAuthor, map[string]string{"title": title, "code": strings.Repeat("b", 64<<10)})
	w.created(fmt.Sprintf("/api/listeners/songs/%d/comments", id), asAuthor, map[string]string{"body": strings.Repeat("c", 8<<10)})
	w.created("/api/listeners/pitches", asAuthor, map[string]string{"body": strings.Repeat("p", 8<<10)})
	w.created("/api/admin/users", asAdmin, map[string]string{"name": strings.Repeat("n", 100), "role": "bot"})

	// A body far past every limit is refused before it is read whole.
	r := w.send(http.MethodPost, "/api/listeners/songs", asAuthor, map[string]string{"title": "t", "code": strings.Repeat("a", 3<<20)})
	checkError(t, r, http.StatusRequestEntityTooLarge, "too_large", "")
}
