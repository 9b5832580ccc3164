package api

import (
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
)

var pathParam = regexp.MustCompile(`:([A-Za-z]+)`)

// OpenAPI builds the OpenAPI 3.1 document from the route table and the handlers' Go types.
func (a *API) OpenAPI() map[string]any {
	m := newSchemaMaker()
	m.answer(reflect.TypeFor[errorJSON]())
	shared := map[string]any{}
	paths := map[string]map[string]any{}
	for _, r := range a.routes() {
		p := pathParam.ReplaceAllString(r.path, "{$1}") // an Echo path (/a/:id) as OpenAPI's (/a/{id})
		if paths[p] == nil {
			paths[p] = map[string]any{}
		}
		op := map[string]any{"summary": r.summary, "operationId": operationID(r)}
		describe(r, op)
		var params []any
		for _, p := range pathParam.FindAllStringSubmatch(r.path, -1) {
			schema := map[string]any{"type": "integer", "minimum": 1}
			if p[1] == "kind" {
				schema = map[string]any{"type": "string", "enum": enumLists["kind"]}
			}
			params = append(params, map[string]any{"name": p[1], "in": "path", "required": true, "schema": schema})
		}
		params = append(params, m.queryParams(r)...)
		if params != nil {
			op["parameters"] = params
		}
		if r.request != nil {
			op["requestBody"] = map[string]any{"required": !optionalBody[r.method+" "+r.path], "content": map[string]any{
				"application/json": map[string]any{"schema": m.request(reflect.TypeOf(r.request))}}}
		}
		ok := map[string]any{"description": http.StatusText(r.status)}
		if r.response != nil {
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": m.answer(reflect.TypeOf(r.response))}}
		}
		if streamAnswers[r.method+" "+r.path] {
			// ogen's client would read the stream to its end (it has none): it gets the
			// answer raw, at the headers, as the other Go generators do.
			ok["content"] = map[string]any{"text/event-stream": map[string]any{"schema": m.mineEvent(), "x-ogen-raw-response": true}}
		}
		if mt, bin := binaryAnswers[r.method+" "+r.path]; bin {
			ok["content"] = map[string]any{mt: map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
		}
		responses := map[string]any{strconv.Itoa(r.status): ok}
		addErrorAnswers(r, responses, shared)
		traits(r, op, ok, responses)
		op["responses"] = responses
		if r.roles != nil {
			op["security"] = []any{map[string]any{"bearer": []any{}}, map[string]any{"sessionCookie": []any{}}}
			op["x-roles"] = r.roles
		} else {
			op["security"] = []any{}
		}
		paths[p][strings.ToLower(r.method)] = op
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "owed", "version": a.Version,
			"description": "owed owes work to a community site's content and never loses it. Errors are {\"error\":{\"code\",\"message\",\"field\"}}; lists page with limit and an opaque cursor; times are RFC 3339 UTC.",
			"license":     map[string]any{"name": "Proprietary", "identifier": "LicenseRef-owed-proprietary"},
			"contact":     map[string]any{"name": "The operators of this owed"}},
		"tags":    tagList(),
		"servers": []any{map[string]any{"url": "/", "description": "the owed that serves this document"}},
		"paths":   paths,
		"components": map[string]any{
			"responses": shared,
			"securitySchemes": map[string]any{
				"bearer":        map[string]any{"type": "http", "scheme": "bearer"},
				"sessionCookie": map[string]any{"type": "apiKey", "in": "cookie", "name": sessionCookie},
			},
			"schemas": m.components,
		},
	}
}

// mineEvent is the schema of the data of one event of the view's stream: text/event-stream
// read as it comes (never whole: it does not end). Generators that know the media type (hey-api,
// ogen) make a stream of these, each event's data parsed as JSON.
func (m *schemaMaker) mineEvent() map[string]any {
	m.components["MineEvent"] = map[string]any{
		"description": "The data of one event of the view's stream, JSON on one line. Event `mine` (`id:` the view's ETag, to send back as Last-Event-ID) carries the view as GET /api/listeners/mine answers it (Mine), at once and on every change; event `error`, the stream's last, the error (Error), with `retry:` (milliseconds) after a fault. Between events `: ping` comments every 15 s carry no event.",
		"oneOf":       []any{m.answer(reflect.TypeFor[mineJSON]()), m.answer(reflect.TypeFor[errorJSON]())}}
	return ref("MineEvent")
}

// queryParams documents route r's query parameters: its query struct's fields, by query tag.
func (m *schemaMaker) queryParams(r route) []any {
	if r.query == nil {
		return nil
	}
	var params []any
	for _, f := range reflect.VisibleFields(reflect.TypeOf(r.query)) {
		name := f.Tag.Get("query")
		if name == "" {
			continue
		}
		schema := m.request(f.Type)
		applyTags(schema, f.Tag)
		if _, has := schema["minLength"]; schema["type"] == "string" && schema["format"] == nil && !has {
			schema["minLength"] = 1 // an empty value is refused (onceEach)
		}
		limitParam(r, name, schema)
		params = append(params, map[string]any{"name": name, "in": "query", "required": false, "schema": schema})
	}
	return params
}

// queryNames lists the query parameters a route's query struct q names.
func queryNames(q any) []string {
	if q == nil {
		return nil
	}
	var names []string
	for _, f := range reflect.VisibleFields(reflect.TypeOf(q)) {
		if name := f.Tag.Get("query"); name != "" {
			names = append(names, name)
		}
	}
	return names
}

func operationID(r route) string {
	id := strings.ToLower(r.method)
	for _, part := range strings.Split(strings.TrimPrefix(r.path, "/api/"), "/") {
		part = strings.TrimPrefix(part, ":")
		if part == "" {
			continue
		}
		id += strings.ToUpper(part[:1]) + part[1:]
	}
	return strings.NewReplacer(".", "", "-", "").Replace(id)
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

func (a *API) openAPI(c echo.Context) error { return c.JSON(http.StatusOK, a.OpenAPI()) }

// optionalBody lists the routes whose request body may be left out altogether.
var optionalBody = map[string]bool{
	"POST /api/backfill/start": true,
	"POST /api/backfill/pause": true,
}

// binaryAnswers names the media type of the routes that answer something other than JSON.
var binaryAnswers = map[string]string{
	"GET /api/media/:id/preview": "image/jpeg",
}

// streamAnswers names the routes that answer server-sent events.
var streamAnswers = map[string]bool{
	"GET /api/listeners/mine/stream": true,
}
