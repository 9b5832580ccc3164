package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOpenAPIForGeneratedClients: what a client generator needs is in the document, for every
// route of its kind: writes of a signed-in caller take Idempotency-Key and may answer 409, 422,
// 429 and 507, every operation 401 and 503, each error status declared with the error schema
// and the codes it may carry, the answers to retry carry Retry-After; floats
// are doubles; no enum lists null; every limit has its maximum and every required string its
// minLength; the view's ETag, If-None-Match and 304 and the stream's Last-Event-ID and media
// type are declared; servers and a license are given; deprecated aliases are marked.
func TestOpenAPIForGeneratedClients(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "sqlite:"+t.TempDir()+"/owed.db")
	var doc map[string]any
	if err := json.Unmarshal(w.do(http.MethodGet, "/api/openapi.json", asAnon, nil).Body, &doc); err != nil {
		t.Fatal(err)
	}
	if len(list(doc["servers"])) == 0 {
		t.Error("no servers")
	}
	if obj(obj(doc["info"])["license"])["name"] == nil {
		t.Error("no license")
	}
	comps := obj(doc["components"])
	resolve := func(v any) map[string]any {
		m := obj(v)
		if ref, ok := m["$ref"].(string); ok {
			kind, name, _ := strings.Cut(strings.TrimPrefix(ref, "#/components/"), "/")
			return obj(obj(comps[kind])[name])
		}
		return m
	}
	for path, item := range obj(doc["paths"]) {
		for method, o := range obj(item) {
			op, where := obj(o), strings.ToUpper(method)+" "+path
			responses := obj(op["responses"])
			params := map[string]map[string]any{}
			for _, p := range list(op["parameters"]) {
				params[obj(p)["in"].(string)+":"+obj(p)["name"].(string)] = obj(p)
			}
			// Every error answer is declared by status, with the error schema and its codes;
			// the ones to retry later carry Retry-After.
			want := map[string]string{"401": "unauthorized", "503": "unavailable"}
			if op["security"] != nil && len(list(op["security"])) > 0 {
				want["403"] = "forbidden"
			}
			if method != "get" {
				want["507"] = "insufficient_storage"
				want["403"] = "csrf"
			}
			if params["header:Idempotency-Key"] != nil {
				want["409"], want["422"], want["429"] = "idempotency_in_flight", "idempotency_mismatch", "rate_limited"
			}
			if op["requestBody"] != nil {
				want["400"], want["413"], want["415"] = "invalid", "too_large", "unsupported_media_type"
			}
			if strings.Contains(path, "{") {
				want["404"] = "not_found"
			}
			for status, code := range want {
				answer := resolve(responses[status])
				if answer == nil {
					t.Errorf("%s: no %s answer", where, status)
					continue
				}
				if ref, _ := obj(obj(obj(answer["content"])["application/json"])["schema"])["$ref"].(string); ref != "#/components/schemas/Error" {
					t.Errorf("%s: %s answer is not the error schema: %v", where, status, answer)
				}
				if !slices.Contains(list(answer["x-error-codes"]), any(code)) || !strings.Contains(answer["description"].(string), "`"+code+"`") {
					t.Errorf("%s: %s answer does not list the code %s: %v", where, status, code, answer)
				}
				if (status == "429" || status == "503" || status == "507" || code == "idempotency_in_flight") && obj(answer["headers"])["Retry-After"] == nil {
					t.Errorf("%s: %s answer without Retry-After", where, status)
				}
			}
			if _, loose := responses["4XX"]; loose {
				t.Errorf("%s: a 4XX answer: declare each status", where)
			}
			if p := params["query:limit"]; p != nil {
				if max, ok := obj(p["schema"])["maximum"].(float64); !ok || max < 1 {
					t.Errorf("%s: limit has no maximum: add the route and its handler's maximum to limitMaxima (api/openapi_traits.go)", where)
				} else {
					// The server takes the maximum and refuses one more.
					route := strings.NewReplacer("{id}", "1").Replace(path)
					as := asAdmin
					if strings.HasPrefix(path, "/api/listeners/") {
						as = asAuthor
					} else if strings.HasPrefix(path, "/api/scrapes") {
						as = asBot
					}
					if strings.Contains(path, "{id}") || strings.HasSuffix(path, "/stream") {
						continue // the id may not exist, a stream does not end; the other routes cover the rule
					}
					n := int(max)
					if r := w.do(http.MethodGet, route+"?limit="+strconv.Itoa(n), as, nil); r.Status != http.StatusOK {
						t.Errorf("%s: limit=%d (the documented maximum) answered %d %s", where, n, r.Status, r.Body)
					}
					checkError(t, w.do(http.MethodGet, route+"?"+url.Values{"limit": {strconv.Itoa(n + 1)}}.Encode(), as, nil), http.StatusBadRequest, "invalid", "limit")
				}
			}
			if op["requestBody"] != nil {
				schema := resolve(obj(obj(obj(op["requestBody"])["content"])["application/json"])["schema"])
				props := obj(schema["properties"])
				for _, name := range list(schema["required"]) {
					p := obj(props[name.(string)])
					if p["type"] == "string" && p["minLength"] == nil {
						t.Errorf("%s: required string %s has no minLength", where, name)
					}
				}
			}
		}
	}

	mine := obj(obj(obj(doc["paths"])["/api/listeners/mine"])["get"])
	if obj(obj(mine["responses"])["304"]) == nil || obj(obj(obj(mine["responses"])["200"])["headers"])["ETag"] == nil ||
		!slices.ContainsFunc(list(mine["parameters"]), func(p any) bool { return obj(p)["name"] == "If-None-Match" }) {
		t.Errorf("GET /api/listeners/mine does not declare If-None-Match, ETag and 304: %v", mine)
	}
	stream := obj(obj(obj(doc["paths"])["/api/listeners/mine/stream"])["get"])
	if obj(obj(obj(stream["responses"])["200"])["content"])["text/event-stream"] == nil ||
		!slices.ContainsFunc(list(stream["parameters"]), func(p any) bool { return obj(p)["name"] == "Last-Event-ID" }) {
		t.Errorf("the stream does not declare text/event-stream and Last-Event-ID: %v", stream)
	}
	if obj(obj(obj(doc["paths"])["/api/admin/webhooks/deliveries/{id}"])["get"])["deprecated"] != true {
		t.Error("the old delivery path is not marked deprecated")
	}
	if obj(obj(doc["paths"])["/api/admin/deliveries/{id}"])["get"] == nil {
		t.Error("no /api/admin/deliveries/{id}")
	}

	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if slices.Contains(list(x["enum"]), nil) {
				t.Errorf("%s: an enum lists null", where)
			}
			if x["type"] == "number" && x["format"] != "double" {
				t.Errorf("%s: a number without format double", where)
			}
			for k, e := range x {
				walk(where+"/"+k, e)
			}
		case []any:
			for _, e := range x {
				walk(where, e)
			}
		}
	}
	walk("#", doc)
	daily := obj(obj(obj(obj(comps["schemas"])["BudgetRequest"])["properties"])["dailyLimit"])
	if types, _ := daily["type"].([]any); len(types) != 2 || types[0] != "integer" || types[1] != "null" {
		t.Errorf("dailyLimit is not typed integer or null: %v", daily)
	}
}
