package api

import (
	"slices"
	"strconv"
)

// What the OpenAPI document says of a route beyond its types is made here from the route's
// method and from a few tables of routes, so that a route added anywhere gets the same
// declarations as its like: every write documents Idempotency-Key, 429, 507; every route 503
// and the error schema for its 4xx answers; a list its limit's maximum.

// conditionalAnswers are the routes that answer with an ETag and honour If-None-Match (304).
var conditionalAnswers = map[string]bool{
	"GET /api/listeners/mine": true,
}

// limitMaxima are the largest page sizes (limit) of the lists; a larger one answers 400. A
// test checks each against the server (the maximum accepted, one more refused), and that
// every route with a limit has one here.
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

// holdsConnection reports whether a route may hold its answer (a stream, or a long poll: a
// query with wait), so that it counts against OWED_STREAMS_PER_USER and OWED_MAX_STREAMS.
func holdsConnection(r route) bool {
	if streamAnswers[r.method+" "+r.path] {
		return true
	}
	return slices.Contains(queryNames(r.query), "wait")
}

// retryAfterHeader is the Retry-After header of the answers a client should retry later.
var retryAfterHeader = map[string]any{"Retry-After": map[string]any{
	"description": "seconds to wait before trying again",
	"schema":      map[string]any{"type": "integer", "minimum": 0}}}

// sharedResponses are the answers many operations share, as components.responses.
func sharedResponses(errorSchema map[string]any) map[string]any {
	content := map[string]any{"application/json": map[string]any{"schema": errorSchema}}
	return map[string]any{
		"Error": map[string]any{"description": "An error: bad input (400, code invalid), no or a bad credential (401), not allowed (403), not found (404), a conflict (409), too large (413), not JSON (415), an Idempotency-Key reused with another body (422)",
			"content": content},
		"RateLimited": map[string]any{"description": "Too many requests (code rate_limited): the write limit, or too many streams and long polls of this user; retry after Retry-After",
			"headers": retryAfterHeader, "content": content},
		"Unavailable": map[string]any{"description": "Unavailable (code unavailable): the database does not answer, or too many streams in this process; retry after Retry-After",
			"headers": retryAfterHeader, "content": content},
		"InsufficientStorage": map[string]any{"description": "Insufficient storage (code insufficient_storage): the database's disk is full; nothing was written; retry after Retry-After",
			"headers": retryAfterHeader, "content": content},
	}
}

func responseRef(name string) map[string]any {
	return map[string]any{"$ref": "#/components/responses/" + name}
}

// traits adds to op (an operation of route r, its success answer ok) what r's method and
// tables say: headers, the answers every route of its kind may give, deprecation.
func traits(r route, op map[string]any, ok map[string]any, responses map[string]any) {
	key := r.method + " " + r.path
	var params []any
	if p, has := op["parameters"].([]any); has {
		params = p
	}
	if isWrite(r.method) {
		params = append(params, map[string]any{"name": "Idempotency-Key", "in": "header", "required": false,
			"description": "makes a retry safe: a repeat with the same key and body replays the first answer (Idempotent-Replayed: true); another body answers 422 idempotency_mismatch; while the first runs, 409 idempotency_in_flight",
			"schema":      map[string]any{"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x21-\\x7e]+$"}})
		addHeader(ok, "Idempotent-Replayed", "true when this answer is the replay of an earlier request with the same Idempotency-Key",
			map[string]any{"type": "string", "enum": []any{"true"}})
		responses["429"] = responseRef("RateLimited")
		responses["507"] = responseRef("InsufficientStorage")
	}
	if holdsConnection(r) {
		responses["429"] = responseRef("RateLimited")
	}
	responses["503"] = responseRef("Unavailable")
	responses["4XX"] = responseRef("Error")
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
		op["description"] = "Deprecated alias of " + alias + ", kept for existing clients."
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
