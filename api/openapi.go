package api

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
)

var pathParam = regexp.MustCompile(`:([A-Za-z]+)`)

// OpenAPIPath turns an Echo path (/a/:id) into an OpenAPI one (/a/{id}).
func OpenAPIPath(p string) string { return pathParam.ReplaceAllString(p, "{$1}") }

// OpenAPI builds the OpenAPI 3.1 document from the route table.
func (a *API) OpenAPI() map[string]any {
	paths := map[string]map[string]any{}
	for _, r := range a.routes() {
		p := OpenAPIPath(r.path)
		if paths[p] == nil {
			paths[p] = map[string]any{}
		}
		op := map[string]any{"summary": r.summary, "operationId": operationID(r)}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(r.path, -1) {
			schema := map[string]any{"type": "integer", "minimum": 1}
			if m[1] == "kind" {
				schema = map[string]any{"type": "string", "enum": kinds}
			}
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": schema})
		}
		for _, q := range queryParams[r.method+" "+r.path] {
			schema := paramSchemas[r.method+" "+r.path+" "+q]
			if schema == nil {
				schema = map[string]any{"type": "string"}
			}
			params = append(params, map[string]any{"name": q, "in": "query", "required": false, "schema": schema})
		}
		if params != nil {
			op["parameters"] = params
		}
		if r.request != "" {
			op["requestBody"] = map[string]any{"required": !optionalBody[r.method+" "+r.path], "content": map[string]any{
				"application/json": map[string]any{"schema": ref(r.request)}}}
		}
		ok := map[string]any{"description": http.StatusText(r.status)}
		if r.response != "" {
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": ref(r.response)}}
		}
		if streamAnswers[r.method+" "+r.path] {
			ok["content"] = map[string]any{"text/event-stream": map[string]any{"schema": map[string]any{"type": "string",
				"description": "events `mine`: `id:` the view's ETag, `data:` the view as in GET /api/listeners/mine (schema Mine); `: ping` comments every 15 s; send Last-Event-ID to skip an event you hold"}}}
		}
		if mt, bin := binaryAnswers[r.method+" "+r.path]; bin {
			ok["content"] = map[string]any{mt: map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
		}
		responses := map[string]any{strconv.Itoa(r.status): ok, "default": map[string]any{
			"description": "An error", "content": map[string]any{"application/json": map[string]any{"schema": ref("Error")}}}}
		op["responses"] = responses
		if r.roles != nil {
			op["security"] = []any{map[string]any{"bearer": []any{}}, map[string]any{"session": []any{}}}
			op["x-roles"] = r.roles
		} else {
			op["security"] = []any{}
		}
		paths[p][strings.ToLower(r.method)] = op
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "owed", "version": a.Version,
			"description": "owed owes work to a community site's content and never loses it. Errors are {\"error\":{\"code\",\"message\",\"field\"}}; lists page with limit and an opaque cursor; times are RFC 3339 UTC."},
		"paths": paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{
				"bearer":  map[string]any{"type": "http", "scheme": "bearer"},
				"session": map[string]any{"type": "apiKey", "in": "cookie", "name": sessionCookie},
			},
			"schemas": schemas,
		},
	}
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

// queryParams documents the query parameters of the routes that take them.
var queryParams = map[string][]string{
	"GET /api/songs":                         {"sort", "limit", "cursor"},
	"GET /api/listeners/mine":                {"state", "kind", "limit", "cursor", "wait"},
	"GET /api/listeners/mine/stream":         {"state", "kind", "limit", "cursor"},
	"GET /api/pitches":                       {"limit", "cursor"},
	"GET /api/admin/jobs":                    {"id", "task", "kind", "why", "userId", "author", "itemId", "state", "sort", "limit", "cursor"},
	"GET /api/admin/events":                  {"event", "why", "userId", "kind", "itemId", "outcome", "limit", "cursor"},
	"GET /api/admin/budgets":                 {"limit", "cursor"},
	"GET /api/admin/users":                   {"limit", "cursor"},
	"GET /api/admin/webhooks":                {"limit", "cursor"},
	"GET /api/admin/webhooks/:id/deliveries": {"status", "limit", "cursor"},
	"GET /api/scrapes":                       {"chatId", "state", "limit", "cursor"},
	"GET /api/scrapes/:id/media":             {"state", "limit", "cursor"},
}

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

// paramSchemas types the query parameters whose values are bounded (the rest are strings).
var paramSchemas = map[string]map[string]any{
	"GET /api/listeners/mine wait": {"type": "integer", "minimum": 1, "maximum": 60,
		"description": "long poll: with a matching If-None-Match, hold the answer up to this many seconds until the view changes (200) or the wait ends (304)"},
	"GET /api/listeners/mine limit":        {"type": "integer", "minimum": 1, "maximum": 500, "default": 100},
	"GET /api/listeners/mine/stream limit": {"type": "integer", "minimum": 1, "maximum": 500, "default": 100},
	"GET /api/listeners/mine state":        {"type": "string", "enum": []string{"pending", "public", "blocked"}},
	"GET /api/listeners/mine/stream state": {"type": "string", "enum": []string{"pending", "public", "blocked"}},
	"GET /api/listeners/mine kind":         {"type": "string", "enum": []string{"revision", "comment", "pitch"}},
	"GET /api/listeners/mine/stream kind":  {"type": "string", "enum": []string{"revision", "comment", "pitch"}},
}

// Schema helpers keep the component list short to read.
func obj(props map[string]any, required ...string) map[string]any {
	o := map[string]any{"type": "object", "properties": props}
	if required != nil {
		o["required"] = required
	}
	return o
}

var (
	str      = map[string]any{"type": "string"}
	integer  = map[string]any{"type": "integer"}
	number   = map[string]any{"type": "number"}
	boolean  = map[string]any{"type": "boolean"}
	nullStr  = map[string]any{"type": []string{"string", "null"}}
	nullNum  = map[string]any{"type": []string{"number", "null"}}
	nullInt  = map[string]any{"type": []string{"integer", "null"}}
	dateTime = map[string]any{"type": "string", "format": "date-time"}
	nullTime = map[string]any{"type": []string{"string", "null"}, "format": "date-time"}
	cursor   = nullStr
	whyEnum  = map[string]any{"type": []string{"string", "null"}, "enum": []any{"unreachable", "upstream", "unanswered", "budget", "budget-unavailable", "held", nil}}
)

func list(of any) map[string]any { return map[string]any{"type": "array", "items": of} }

var webhookEvent = map[string]any{"type": "string", "enum": []string{"item.screened", "song.scored", "backfill.finished", "model.breaker", "*"}}

var schemas = map[string]any{
	"Error":          obj(map[string]any{"error": obj(map[string]any{"code": str, "message": str, "field": nullStr}, "code", "message", "field")}, "error"),
	"SessionRequest": obj(map[string]any{"token": str}, "token"),
	"Session":        obj(map[string]any{"user": ref("User")}),
	"User":           obj(map[string]any{"id": integer, "name": str, "role": map[string]any{"type": "string", "enum": []string{"author", "bot", "admin"}}}),
	"UserRequest":    obj(map[string]any{"name": str, "role": map[string]any{"type": "string", "enum": []string{"author", "bot", "admin"}}}, "name", "role"),
	"UserCreated":    obj(map[string]any{"id": integer, "name": str, "role": str, "token": map[string]any{"type": "string", "description": "the token, shown only now"}}),
	"UserPatch":      obj(map[string]any{"disabled": map[string]any{"type": "boolean"}}, "disabled"),
	"UserAdmin": obj(map[string]any{"id": integer, "name": str, "role": map[string]any{"type": "string", "enum": []string{"author", "bot", "admin"}},
		"disabled": map[string]any{"type": "boolean"}, "createdAt": dateTime}),
	"UserList":        obj(map[string]any{"users": list(ref("UserAdmin")), "nextCursor": cursor}),
	"SongRequest":     obj(map[string]any{"title": map[string]any{"type": "string", "maxLength": 200}, "code": map[string]any{"type": "string", "description": "at most 64 KiB"}}, "title", "code"),
	"RevisionRequest": obj(map[string]any{"title": map[string]any{"type": "string", "maxLength": 200}, "code": str}, "code"),
	"BodyRequest":     obj(map[string]any{"body": map[string]any{"type": "string", "description": "at most 8 KiB"}}, "body"),
	"Screen": obj(map[string]any{"state": map[string]any{"type": "string", "enum": []string{"pending", "public", "blocked"}},
		"verdict": map[string]any{"type": []string{"string", "null"}, "enum": []any{"allow", "block", nil}}, "confidence": nullNum,
		"why": whyEnum, "attempts": integer, "nextAttemptAt": nullTime}),
	"SongCreated": obj(map[string]any{"song": obj(map[string]any{"id": integer, "title": str}),
		"revision": obj(map[string]any{"id": integer, "songId": integer}), "screen": ref("Screen")}),
	"RevisionCreated": obj(map[string]any{"revision": obj(map[string]any{"id": integer, "songId": integer}), "screen": ref("Screen")}),
	"CommentCreated":  obj(map[string]any{"comment": obj(map[string]any{"id": integer, "songId": integer}), "screen": ref("Screen")}),
	"PitchCreated":    obj(map[string]any{"pitch": obj(map[string]any{"id": integer}), "screen": ref("Screen")}),
	"Score":           obj(map[string]any{"art": number, "artRuns": list(number), "criteria": map[string]any{"type": "object", "additionalProperties": number}, "model": str, "rubric": str}),
	"Mine": obj(map[string]any{
		"items": list(obj(map[string]any{"kind": str, "id": integer, "songId": integer, "state": str, "verdict": nullStr,
			"confidence": nullNum, "score": map[string]any{"oneOf": []any{ref("Score"), map[string]any{"type": "null"}}},
			"jobs": list(obj(map[string]any{"task": str, "why": whyEnum, "attempts": integer, "nextAttemptAt": dateTime}))})),
		"budget":     obj(map[string]any{"limit": integer, "spent": integer, "resetsAt": dateTime}),
		"nextCursor": cursor}),
	"Song":     obj(map[string]any{"id": integer, "title": str, "userId": integer, "art": nullNum, "createdAt": dateTime}),
	"SongList": obj(map[string]any{"songs": list(ref("Song")), "nextCursor": cursor}),
	"SongDetail": obj(map[string]any{"song": ref("Song"),
		"revisions": list(obj(map[string]any{"id": integer, "title": str, "code": str, "createdAt": dateTime, "score": map[string]any{"oneOf": []any{ref("Score"), map[string]any{"type": "null"}}}})),
		"comments":  list(obj(map[string]any{"id": integer, "userId": integer, "body": str, "createdAt": dateTime}))}),
	"PitchList": obj(map[string]any{"pitches": list(obj(map[string]any{"id": integer, "userId": integer, "body": str, "createdAt": dateTime})), "nextCursor": cursor}),
	"Job": obj(map[string]any{"id": integer, "task": str, "kind": str, "itemId": integer, "userId": integer, "dueAt": dateTime,
		"attempts": integer, "why": whyEnum, "status": nullInt, "leaseUntil": nullTime,
		"lastError": map[string]any{"type": []string{"string", "null"}, "maxLength": 500, "description": "the last attempt's error"},
		"userName":  str, "itemTitle": map[string]any{"type": []string{"string", "null"}, "description": "a revision's title, a comment's or pitch's first 80 characters"},
		"songId": nullInt}),
	"JobList": obj(map[string]any{"jobs": list(ref("Job")), "nextCursor": cursor, "total": map[string]any{"type": "integer", "description": "how many jobs the filter selects"}}),
	"JobDetail": obj(map[string]any{"job": ref("Job"),
		"item":   obj(map[string]any{"kind": str, "id": integer, "title": nullStr, "songId": nullInt}),
		"author": obj(map[string]any{"id": integer, "name": str}),
		"events": map[string]any{"type": "array", "items": ref("Event"), "description": "every attempt at the job's task on its item, newest first"}}),
	"JobFilter": obj(map[string]any{"id": integer, "task": str, "kind": str, "why": str, "userId": integer, "author": map[string]any{"type": "string", "description": "part of the author's name"},
		"itemId": integer, "state": str}),
	"Holds":        obj(map[string]any{"screen": boolean, "score": boolean, "deliveries": boolean}, "screen", "score", "deliveries"),
	"HoldsRequest": obj(map[string]any{"screen": boolean, "score": boolean, "deliveries": boolean}),
	"VerdictRequest": obj(map[string]any{"verdict": map[string]any{"type": "string", "enum": []string{"allow", "block"}},
		"note": map[string]any{"type": []string{"string", "null"}, "maxLength": 500}}, "verdict"),
	"Retried": obj(map[string]any{"retried": integer}),
	"ModelState": obj(map[string]any{"state": map[string]any{"type": "string", "enum": []string{"closed", "open", "probing"}},
		"since": nullTime, "failures": integer, "nextProbeAt": nullTime, "inFlight": integer, "cap": integer},
		"state", "since", "failures", "nextProbeAt", "inFlight", "cap"),
	"Event": obj(map[string]any{"id": integer, "at": dateTime, "event": str, "kind": str, "itemId": integer, "userId": integer,
		"outcome": str, "why": whyEnum, "status": nullInt, "upstreamMs": nullInt,
		"attempt": map[string]any{"type": "integer", "description": "attempts made before this one: 0 for the first"}, "confidence": nullNum,
		"art": nullNum, "requestBytes": nullInt, "runs": nullInt,
		"error":   map[string]any{"type": []string{"string", "null"}, "maxLength": 500, "description": "what went wrong, in words; never a secret"},
		"adminId": map[string]any{"type": []string{"integer", "null"}, "description": "outcome decided: the admin who decided"},
		"note":    map[string]any{"type": []string{"string", "null"}, "description": "outcome decided: the admin's note"},
		"verdict": map[string]any{"type": []string{"string", "null"}, "enum": []any{"allow", "block", nil}, "description": "outcome decided: the verdict decided"}}),
	"EventList":     obj(map[string]any{"events": list(ref("Event")), "nextCursor": cursor}),
	"Budget":        obj(map[string]any{"userId": integer, "name": str, "limit": integer, "spent": integer, "resetsAt": dateTime}),
	"BudgetList":    obj(map[string]any{"budgets": list(ref("Budget")), "nextCursor": cursor}),
	"BudgetRequest": obj(map[string]any{"dailyLimit": nullInt}, "dailyLimit"),
	"Stats":         obj(map[string]any{"jobs": map[string]any{"type": "object"}, "settled": list(map[string]any{"type": "object"}), "backfill": map[string]any{"type": "object"}, "health": map[string]any{"type": "object"}, "version": str}),
	"Plugins":       obj(map[string]any{"plugins": list(obj(map[string]any{"id": str, "title": str, "module": str}))}),

	"WebhookRequest": obj(map[string]any{"url": map[string]any{"type": "string", "format": "uri", "description": "http or https; not a loopback or private address unless OWED_WEBHOOKS_ALLOW_PRIVATE"},
		"events": map[string]any{"type": "array", "minItems": 1, "items": webhookEvent}}, "url", "events"),
	"Webhook": obj(map[string]any{"id": integer, "url": str, "events": list(webhookEvent), "active": boolean,
		"disabledReason": map[string]any{"type": []string{"string", "null"}, "enum": []any{"admin", "gone", nil}}, "createdAt": dateTime,
		"failing":    map[string]any{"type": "boolean", "description": "the newest attempted delivery is not delivered (the list only)"},
		"lastStatus": nullInt, "lastError": nullStr}),
	"WebhookCreated":  obj(map[string]any{"webhook": ref("Webhook"), "secret": map[string]any{"type": "string", "pattern": "^whsec_", "description": "the signing secret, shown only now"}}),
	"WebhookList":     obj(map[string]any{"webhooks": list(ref("Webhook")), "nextCursor": cursor}),
	"WebhookUpdate":   obj(map[string]any{"active": boolean}, "active"),
	"WebhookAnswer":   obj(map[string]any{"webhook": ref("Webhook")}),
	"DeliveryAttempt": obj(map[string]any{"attempt": integer, "at": dateTime, "status": nullInt, "latencyMs": integer, "error": nullStr}),
	"Delivery": obj(map[string]any{"id": integer, "webhookId": integer, "messageId": str, "event": str,
		"status":   map[string]any{"type": "string", "enum": []string{"pending", "delivered", "cancelled"}},
		"attempts": integer, "lastStatus": nullInt, "lastError": nullStr, "nextAttemptAt": nullTime, "deliveredAt": nullTime,
		"createdAt": dateTime, "attemptLog": list(ref("DeliveryAttempt")),
		"payload": map[string]any{"type": "object", "description": "the body sent (one delivery's own route only)"}}),
	"DeliveryList":   obj(map[string]any{"deliveries": list(ref("Delivery")), "nextCursor": cursor}),
	"DeliveryAnswer": obj(map[string]any{"delivery": ref("Delivery")}),

	"ScrapeRequest": obj(map[string]any{"chatId": map[string]any{"type": "string", "maxLength": 100}, "guildId": map[string]any{"type": []string{"string", "null"}, "maxLength": 100},
		"backend": map[string]any{"type": "string", "pattern": backendName.String(), "description": "the bot account kind, e.g. puppet or slopbot"},
		"mode":    map[string]any{"type": "string", "pattern": backendName.String()}}, "chatId", "backend", "mode"),
	"ScrapeCounts": obj(map[string]any{"pending": integer, "cached": integer, "failed": integer, "suspect": integer, "unverified": integer,
		"skipped": integer, "total": integer, "storedBytes": integer, "pendingByKind": ref("KindCounts")}),
	"KindCounts": obj(map[string]any{"image": integer, "gif": integer, "video": integer, "audio": integer}),
	"Scrape": obj(map[string]any{"id": integer, "chatId": str, "guildId": nullStr, "backend": str, "mode": str, "state": scrapeState,
		"downloaded": integer, "pushedAt": dateTime, "createdAt": dateTime, "updatedAt": dateTime, "counts": ref("ScrapeCounts")}),
	"ScrapeList":  obj(map[string]any{"scrapes": list(ref("Scrape")), "nextCursor": cursor}),
	"ScrapePatch": obj(map[string]any{"state": map[string]any{"type": "string", "enum": []string{"active", "paused", "done", "failed"}}, "downloaded": map[string]any{"type": "integer", "minimum": 0, "maximum": maxCount}}),
	"MediaPush": obj(map[string]any{"media": map[string]any{"type": "array", "minItems": 1, "maxItems": 1000, "items": obj(map[string]any{
		"url": map[string]any{"type": "string", "format": "uri", "maxLength": 4096, "description": "http or https"}, "kind": mediaKind,
		"bytes": map[string]any{"type": "integer", "minimum": 0, "maximum": maxCount, "description": "the declared size"}}, "url", "kind")}}, "media"),
	"Accepted": obj(map[string]any{"accepted": integer}),
	"Media": obj(map[string]any{"id": integer, "scrapeId": integer, "kind": mediaKind, "url": str, "bytes": nullInt, "state": mediaState,
		"storedBytes": integer, "updatedAt": dateTime, "previewUrl": nullStr}),
	"MediaList":        obj(map[string]any{"media": list(ref("Media")), "nextCursor": cursor}),
	"BackfillTarget":   obj(map[string]any{"chatId": str}),
	"BackfillSettings": obj(map[string]any{"batchSize": map[string]any{"type": "integer", "minimum": 1, "maximum": 500}, "batchPauseMs": map[string]any{"type": "integer", "minimum": 0, "maximum": 3600000}, "auto": boolean}, "batchSize", "batchPauseMs", "auto"),
	"BackfillMember": obj(map[string]any{"scrapeId": integer, "state": scrapeState, "backend": str, "mode": str, "pending": integer, "cached": integer,
		"failed": integer, "suspect": integer, "unverified": integer, "skipped": integer, "total": integer, "downloaded": integer, "bytes": integer, "pendingByKind": ref("KindCounts")}),
	"BackfillJob": obj(map[string]any{"chatId": str, "guildId": nullStr, "state": map[string]any{"type": "string", "enum": []string{"idle", "queued", "running", "paused", "done"}},
		"members": list(ref("BackfillMember")), "pending": integer, "cached": integer, "failed": integer, "skipped": integer, "total": integer, "downloaded": integer, "bytes": integer,
		"processed": integer, "startedAt": nullTime, "finishedAt": nullTime, "perMinute": number, "rateMeasured": boolean,
		"etaMs": nullInt, "etaStartMs": nullInt, "etaRunMs": nullInt, "etaTotalMs": nullInt,
		"position": map[string]any{"type": []string{"integer", "null"}, "minimum": 0, "description": "0 running, 1… queue order, null not scheduled"},
		"waitMs":   nullInt,
		"waitsFor": map[string]any{"type": []string{"string", "null"}, "enum": []any{"rate-limit", "walk", "queue", nil}}}),
	"BackendTotals": obj(map[string]any{"pending": integer, "cached": integer, "failed": integer, "skipped": integer, "total": integer}),
	"BackfillStatus": obj(map[string]any{"jobs": list(ref("BackfillJob")),
		"totals": obj(map[string]any{"pending": integer, "cached": integer, "failed": integer, "skipped": integer, "total": integer, "downloaded": integer, "bytes": integer,
			"perMinute": number, "etaMs": nullInt, "etaStartMs": nullInt, "etaRunMs": nullInt, "etaTotalMs": nullInt,
			"byBackend": map[string]any{"type": "object", "additionalProperties": ref("BackendTotals")}}),
		"settings": ref("BackfillSettings"), "limitedUntil": nullTime, "estimatedPerMinute": number, "walkingUntil": nullTime,
		"walkingChat": map[string]any{"type": []string{"string", "null"}, "description": "the chat whose walk holds the media-traffic lock"}}),
}

var (
	scrapeState = map[string]any{"type": "string", "enum": []string{"active", "paused", "done", "failed", "pending-delete", "deleting", "deleted"}}
	mediaKind   = map[string]any{"type": "string", "enum": []string{"image", "gif", "video", "audio"}}
	mediaState  = map[string]any{"type": "string", "enum": []string{"pending", "cached", "failed", "suspect", "unverified", "skipped"}}
)
