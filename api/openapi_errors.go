package api

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// errorCodes lists every Error.code the API sends, as the document's enum (a test checks it).
var errorCodes = []string{
	"invalid", "unauthorized", "forbidden", "csrf", "not_found", "method_not_allowed", "conflict",
	"too_large", "unsupported_media_type", "idempotency_in_flight", "idempotency_answer_not_kept",
	"idempotency_mismatch", "rate_limited", "unavailable", "insufficient_storage", "internal",
	"decided", "claimed", "not_blocked", "appealed", "same_moderator", "review", "leased", "held",
	"budget", "webhook_disabled", "in_flight", "error", "done",
	"no_candidate", "promoted", "not_promoted",
}

// routeErrors are the error answers particular to a route, beyond those of its kind.
var routeErrors = map[string]map[int][]string{
	"POST /api/admin/users":                             {409: {"conflict"}},
	"PATCH /api/admin/users/:id":                        {409: {"conflict"}},
	"POST /api/session":                                 {429: {"rate_limited"}},
	"POST /api/admin/model/probe":                       {409: {"unavailable"}},
	"POST /api/admin/jobs/:id/retry":                    {409: {"leased", "held", "budget", "review", "done"}},
	"POST /api/admin/items/:kind/:id/verdict":           {409: {"decided", "claimed", "same_moderator"}},
	"POST /api/admin/review/:kind/:id/claim":            {409: {"claimed"}},
	"DELETE /api/admin/review/:kind/:id/claim":          {409: {"claimed"}},
	"POST /api/listeners/items/:kind/:id/appeal":        {409: {"not_blocked", "appealed"}},
	"POST /api/admin/deliveries/:id/redeliver":          {409: {"webhook_disabled", "in_flight"}},
	"POST /api/admin/webhooks/deliveries/:id/redeliver": {409: {"webhook_disabled", "in_flight"}},
	"PATCH /api/scrapes/:id":                            {409: {"conflict"}},
	"POST /api/scrapes/:id/media":                       {409: {"conflict"}},
	"POST /api/admin/anchors":                           {404: {"not_found"}, 409: {"conflict"}},
	"POST /api/admin/shadow/promote":                    {409: {"no_candidate", "promoted"}},
	"POST /api/admin/shadow/rollback":                   {409: {"not_promoted"}},
}

// takesIdempotencyKey reports whether route r, a signed-in caller's write, takes an Idempotency-Key.
func takesIdempotencyKey(r route) bool { return r.roles != nil && isWrite(r.method) }

// errorAnswers are the error statuses route r may answer, each with its codes: what every
// route gives (401 for a bad credential, 503), what its kind adds (a body, a query, a path id,
// roles, a write, Idempotency-Key, a held connection), and routeErrors. 500 (internal) is the
// document's default answer.
func errorAnswers(r route) map[int][]string {
	out := map[int][]string{}
	add := func(status int, codes ...string) {
		for _, c := range codes {
			if !slices.Contains(out[status], c) {
				out[status] = append(out[status], c)
			}
		}
	}
	add(http.StatusUnauthorized, "unauthorized")
	if r.roles != nil {
		add(http.StatusForbidden, "forbidden")
	}
	if isWrite(r.method) {
		add(http.StatusForbidden, "csrf")
		add(http.StatusRequestEntityTooLarge, "too_large")
	}
	if r.request != nil || r.query != nil || takesIdempotencyKey(r) {
		add(http.StatusBadRequest, "invalid")
	}
	if r.request != nil {
		add(http.StatusUnsupportedMediaType, "unsupported_media_type")
	}
	if pathParam.MatchString(r.path) {
		add(http.StatusNotFound, "not_found")
	}
	if takesIdempotencyKey(r) {
		add(http.StatusConflict, "idempotency_in_flight", "idempotency_answer_not_kept")
		add(http.StatusUnprocessableEntity, "idempotency_mismatch")
		add(http.StatusTooManyRequests, "rate_limited")
	}
	if holdsConnection(r) {
		add(http.StatusTooManyRequests, "rate_limited")
	}
	add(http.StatusServiceUnavailable, "unavailable")
	if isWrite(r.method) {
		add(http.StatusInsufficientStorage, "insufficient_storage")
	}
	for status, codes := range routeErrors[r.method+" "+r.path] {
		add(status, codes...)
	}
	return out
}

// sharedErrors name the error answers many routes give alike, kept once as components.responses.
var sharedErrors = map[string]string{
	"400 invalid":        "BadRequest",
	"401 unauthorized":   "Unauthorized",
	"403 forbidden":      "Forbidden",
	"403 csrf":           "CSRF",
	"403 forbidden,csrf": "ForbiddenOrCSRF",
	"404 not_found":      "NotFound",
	"409 idempotency_in_flight,idempotency_answer_not_kept": "IdempotencyConflict",
	"413 too_large":              "TooLarge",
	"415 unsupported_media_type": "UnsupportedMediaType",
	"422 idempotency_mismatch":   "IdempotencyMismatch",
	"429 rate_limited":           "RateLimited",
	"503 unavailable":            "Unavailable",
	"507 insufficient_storage":   "InsufficientStorage",
}

// retryAfterHeader is the Retry-After header of the answers a client should retry later.
var retryAfterHeader = map[string]any{"Retry-After": map[string]any{
	"description": "seconds to wait before trying again",
	"schema":      map[string]any{"type": "integer", "minimum": 0}}}

// errorCodeMeaning says what a code means where its status alone does not.
var errorCodeMeaning = map[string]string{
	"idempotency_in_flight":       "the first request with this Idempotency-Key still runs; retry after Retry-After",
	"idempotency_answer_not_kept": "the first request with this Idempotency-Key succeeded but its answer is not kept; read the resource",
	"idempotency_mismatch":        "this Idempotency-Key was used for a request of another meaning (method, path, query or JSON body)",
	"csrf":                        "a browser write without the X-Owed-Request header",
	"rate_limited":                "too many writes, sign-ins, probes, or streams and long polls of this user; retry after Retry-After",
	"unavailable":                 "the database does not answer, or too many streams in this process; retry after Retry-After",
	"insufficient_storage":        "the database cannot take writes; nothing was written; retry after Retry-After",
}

// errorResponse is the answer of status with codes: the error schema, the codes listed in the
// description and in x-error-codes, and Retry-After where a code sends it.
func errorResponse(status int, codes []string) map[string]any {
	var parts []string
	retry := false
	for _, c := range codes {
		part := "`" + c + "`"
		if m, ok := errorCodeMeaning[c]; ok {
			part += " (" + m + ")"
		}
		parts = append(parts, part)
		retry = retry || c == "idempotency_in_flight" || c == "rate_limited" || c == "unavailable" && status == http.StatusServiceUnavailable || c == "insufficient_storage"
	}
	answer := map[string]any{
		"description":   http.StatusText(status) + ": " + strings.Join(parts, ", "),
		"x-error-codes": codes,
		"content":       map[string]any{"application/json": map[string]any{"schema": ref("Error")}},
	}
	if retry {
		answer["headers"] = retryAfterHeader
	}
	return answer
}

// addErrorAnswers declares route r's error answers in responses, sharing the common ones
// through shared (components.responses), and 500 as the default.
func addErrorAnswers(r route, responses, shared map[string]any) {
	for status, codes := range errorAnswers(r) {
		code := strconv.Itoa(status)
		name, ok := sharedErrors[code+" "+strings.Join(codes, ",")]
		if !ok {
			responses[code] = errorResponse(status, codes)
			continue
		}
		if shared[name] == nil {
			shared[name] = errorResponse(status, codes)
		}
		responses[code] = responseRef(name)
	}
	if shared["Internal"] == nil {
		shared["Internal"] = map[string]any{"description": "A fault of the server (500, code `internal`), logged there; its text says nothing more",
			"content": map[string]any{"application/json": map[string]any{"schema": ref("Error")}}}
	}
	responses["default"] = responseRef("Internal")
}

func responseRef(name string) map[string]any {
	return map[string]any{"$ref": "#/components/responses/" + name}
}
