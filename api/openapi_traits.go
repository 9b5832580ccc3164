package api

import (
	"slices"
	"strconv"
)

// conditionalAnswers are the routes that answer with an ETag and honour If-None-Match (304).
var conditionalAnswers = map[string]bool{
	"GET /api/listeners/mine": true,
}

// limitMaxima are the largest page sizes (limit) of the lists (a test checks each).
var limitMaxima = map[string]int{
	"GET /api/listeners/mine":                mineMaxLimit,
	"GET /api/songs":                         200,
	"GET /api/pitches":                       200,
	"GET /api/admin/users":                   1000,
	"GET /api/admin/budgets":                 1000,
	"GET /api/admin/jobs":                    500,
	"GET /api/admin/events":                  500,
	"GET /api/admin/audit":                   500,
	"GET /api/admin/webhooks":                500,
	"GET /api/admin/webhooks/:id/deliveries": 200,
	"GET /api/scrapes":                       500,
	"GET /api/scrapes/:id/media":             1000,
}

// deprecatedRoutes are routes kept as aliases of another, named here.
var deprecatedRoutes = map[string]string{
	"GET /api/admin/webhooks/deliveries/:id":            "GET /api/admin/deliveries/{id}",
	"POST /api/admin/webhooks/deliveries/:id/redeliver": "POST /api/admin/deliveries/{id}/redeliver",
}

// holdsConnection reports whether a route may hold its answer (a stream, or a long poll).
func holdsConnection(r route) bool {
	if streamAnswers[r.method+" "+r.path] {
		return true
	}
	return slices.Contains(queryNames(r.query), "wait")
}

// traits adds to op what r's method and tables say: headers, 304, deprecation.
func traits(r route, op map[string]any, ok map[string]any, responses map[string]any) {
	key := r.method + " " + r.path
	var params []any
	if p, has := op["parameters"].([]any); has {
		params = p
	}
	if takesIdempotencyKey(r) {
		params = append(params, map[string]any{"name": "Idempotency-Key", "in": "header", "required": false,
			"description": "makes a retry safe: a repeat with the same key and the same request (method, path, query, and JSON body compared as JSON: whitespace and key order aside) replays the first answer (Idempotent-Replayed: true); another request answers 422 idempotency_mismatch; while the first runs, 409 idempotency_in_flight with Retry-After",
			"schema":      map[string]any{"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x21-\\x7e]+$"}})
		addHeader(ok, "Idempotent-Replayed", "true when this answer is the replay of an earlier request with the same Idempotency-Key",
			map[string]any{"type": "string", "enum": []any{"true"}})
	}
	if conditionalAnswers[key] {
		params = append(params, map[string]any{"name": "If-None-Match", "in": "header", "required": false,
			"description": "the ETag of the view you hold: 304 when it is still current (with wait, after holding the answer)",
			"schema":      map[string]any{"type": "string"}})
		addHeader(ok, "ETag", "the view's strong ETag; send it back as If-None-Match", map[string]any{"type": "string"})
		responses["304"] = map[string]any{"description": "Not Modified: the view is still the one If-None-Match names",
			"headers": map[string]any{"ETag": map[string]any{"description": "the view's ETag", "schema": map[string]any{"type": "string"}}}}
	}
	if streamAnswers[key] {
		params = append(params, map[string]any{"name": "Last-Event-ID", "in": "header", "required": false,
			"description": "the id of the last event you hold, quotes included (an ETag): the first event is skipped while the view is still that one",
			"schema":      map[string]any{"type": "string"}})
	}
	if params != nil {
		op["parameters"] = params
	}
	if alias, ok := deprecatedRoutes[key]; ok {
		op["deprecated"] = true
		op["description"] = "Deprecated alias of " + alias + ", kept for existing clients. " + op["description"].(string)
	}
}

func addHeader(answer map[string]any, name, description string, schema map[string]any) {
	headers, _ := answer["headers"].(map[string]any)
	if headers == nil {
		headers = map[string]any{}
		answer["headers"] = headers
	}
	headers[name] = map[string]any{"description": description, "schema": schema}
}

// limitParam adds the route's page size maximum to its limit parameter's schema.
func limitParam(r route, name string, schema map[string]any) {
	if name != "limit" {
		return
	}
	if max, ok := limitMaxima[r.method+" "+r.path]; ok {
		schema["maximum"] = max
		schema["description"] = "the page size, 1 to " + strconv.Itoa(max)
	}
}
