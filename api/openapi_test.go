package api_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// TestOpenAPIMatchesTheRoutes: the served document is OpenAPI 3, documents every route under
// /api and nothing else, declares each path parameter, and every $ref resolves.
func TestOpenAPIMatchesTheRoutes(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "sqlite:"+t.TempDir()+"/owed.db")
	r := w.do(http.MethodGet, "/api/openapi.json", asAnon, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("openapi.json: %d", r.Status)
	}
	var doc map[string]any
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.") {
		t.Errorf("openapi = %v, want 3.x", doc["openapi"])
	}
	if title, _ := obj(doc["info"])["title"].(string); title == "" {
		t.Errorf("info.title is missing")
	}

	var documented []string
	for path, item := range obj(doc["paths"]) {
		for method, op := range obj(item) {
			documented = append(documented, strings.ToUpper(method)+" "+path)
			where := strings.ToUpper(method) + " " + path
			params := map[string]bool{}
			for _, p := range list(obj(op)["parameters"]) {
				if obj(p)["in"] == "path" {
					params[obj(p)["name"].(string)] = true
				}
			}
			for _, m := range regexp.MustCompile(`\{(\w+)\}`).FindAllStringSubmatch(path, -1) {
				if !params[m[1]] {
					t.Errorf("%s does not declare its path parameter %s", where, m[1])
				}
			}
			responses := obj(obj(op)["responses"])
			ok := false
			for code := range responses {
				ok = ok || strings.HasPrefix(code, "2")
			}
			if !ok {
				t.Errorf("%s documents no success answer", where)
			}
			if _, has := responses["default"]; !has {
				t.Errorf("%s does not document its errors", where)
			}
		}
	}
	sort.Strings(documented)
	var routed []string
	for _, rt := range w.env.App.Echo.Routes() {
		if rt.Method != echo.RouteNotFound && strings.HasPrefix(rt.Path, "/api/") {
			routed = append(routed, rt.Method+" "+openAPIPath(rt.Path))
		}
	}
	sort.Strings(routed)
	routed = slices.Compact(routed)
	for _, r := range routed {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in the OpenAPI document", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routed, d) {
			t.Errorf("the OpenAPI document has %s, which is not routed", d)
		}
	}

	// Every route that takes a body documents one, and no other does.
	for _, route := range appRoutes(w.env) {
		rc, ok := routeMatrix[route]
		method, path, _ := strings.Cut(route, " ")
		if !ok || !strings.HasPrefix(path, "/api/") {
			continue
		}
		w.t = t
		_, body := rc.req(w)
		op := obj(obj(obj(doc["paths"])[openAPIPath(path)])[strings.ToLower(method)])
		if _, has := op["requestBody"]; has != (body != nil) {
			t.Errorf("%s: requestBody documented %v, but the route takes a body: %v", route, has, body != nil)
		}
	}

	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "$ref" {
					ref, _ := e.(string)
					kind, name, _ := strings.Cut(strings.TrimPrefix(ref, "#/components/"), "/")
					if _, exists := obj(obj(doc["components"])[kind])[name]; !strings.HasPrefix(ref, "#/components/") || !exists {
						t.Errorf("%s: $ref %q does not resolve", where, ref)
					}
					continue
				}
				walk(where+"/"+k, e)
			}
		case []any:
			for _, e := range x {
				walk(where, e)
			}
		}
	}
	walk("#", doc)
}

// TestOpenAPIWhyEnumsListTheSpecsWhys: every `why` the document describes (a job's, an event's,
// an item's screen, the breaker's) allows each why value the SPEC names, written out here rather
// than read from models.Whys: SPEC section 1's five, `held`, `breaker`, `review`, and the two of
// section 9, `refused` (the model client refused the request before sending) and `unavailable`
// (the database failed during the run), both attempts with the backoff.
func TestOpenAPIWhyEnumsListTheSpecsWhys(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "sqlite:"+t.TempDir()+"/owed.db")
	r := w.do(http.MethodGet, "/api/openapi.json", asAnon, nil)
	var doc any
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatalf("openapi.json: %d, %v", r.Status, err)
	}
	spec := []string{"unreachable", "upstream", "unanswered", "budget", "budget-unavailable", "held", "breaker", "review", "refused", "unavailable"}
	schemas := obj(obj(obj(doc)["components"])["schemas"])
	// enumOf is a schema's enum, through a nullable field's oneOf and a component's $ref.
	var enumOf func(s map[string]any) []any
	enumOf = func(s map[string]any) []any {
		if ref, ok := s["$ref"].(string); ok {
			return enumOf(obj(schemas[strings.TrimPrefix(ref, "#/components/schemas/")]))
		}
		enum := list(s["enum"])
		for _, alt := range list(s["oneOf"]) {
			enum = append(enum, enumOf(obj(alt))...)
		}
		return enum
	}
	found := map[string][]any{} // where: the enum of its why
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if why := obj(obj(v["properties"])["why"]); why != nil {
				found[where] = enumOf(why)
			}
			for k, c := range v {
				walk(where+"/"+k, c)
			}
		case []any:
			for _, c := range v {
				walk(where, c)
			}
		}
	}
	walk("", doc)
	if len(found) < 4 {
		t.Fatalf("the document describes %d objects with a why (%v); want the job's, the event's, the screen's and the breaker's at least", len(found), found)
	}
	for where, enum := range found {
		for _, why := range spec {
			if !slices.Contains(enum, any(why)) {
				t.Errorf("%s: why %q is not in its enum %v", where, why, enum)
			}
		}
	}
}
