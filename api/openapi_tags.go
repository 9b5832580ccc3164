package api

import (
	"strings"

	"github.com/owed/owed/models"
)

// docTags group the operations by path prefix: the first that matches names an operation's tag.
var docTags = []struct{ prefix, name, description string }{
	{"/api/openapi.json", "document", "This OpenAPI document"},
	{"/api/session", "session", "Browser sessions: a token exchanged for a cookie"},
	{"/api/listeners/", "listeners", "An author's own items, their screens, scores and budget; the live view (long poll, stream)"},
	{"/api/songs", "public", "What anyone may read: public songs and pitches"},
	{"/api/pitches", "public", ""},
	{"/api/admin/webhooks", "webhooks", "Webhook subscriptions, their deliveries and secrets"},
	{"/api/admin/deliveries", "webhooks", ""},
	{"/api/admin/review", "moderation", "The review queue and verdicts by hand"},
	{"/api/admin/items/", "moderation", ""},
	{"/api/admin/backfill", "backfill", "The media backfill queue, its settings and the walk lock"},
	{"/api/backfill", "backfill", ""},
	{"/api/scrapes", "scrapes", "The scrape bot's scrapes and media rows, and their previews"},
	{"/api/media/", "scrapes", ""},
	{"/api/admin/", "operators", "Users, budgets, owed jobs, holds, events, the model, the audit trail"},
}

// tagOf is the tag of the operation at path.
func tagOf(path string) string {
	for _, t := range docTags {
		if strings.HasPrefix(path, t.prefix) {
			return t.name
		}
	}
	panic("openapi: no tag for " + path + ": add its prefix to docTags")
}

// tagList is the document's list of tags, each once, with its description.
func tagList() []any {
	var out []any
	for _, t := range docTags {
		if t.description != "" {
			out = append(out, map[string]any{"name": t.name, "description": t.description})
		}
	}
	return out
}

// describe gives op (of route r) its tag and a description: who may call it, and Idempotency-Key.
func describe(r route, op map[string]any) {
	op["tags"] = []any{tagOf(r.path)}
	who := "Anyone may call it, signed in or not."
	if r.roles != nil {
		who = "Callers: " + strings.Join(names(r.roles), ", ") + " (a bearer token, or a browser session cookie)."
	}
	if len(r.roles) == len(models.Roles) {
		who = "Callers: any signed-in user (a bearer token, or a browser session cookie)."
	}
	if r.path == ticketPath {
		who += " A browser's EventSource, which cannot send Authorization, gives ?ticket= instead (POST /api/listeners/mine/ticket)."
	}
	if takesIdempotencyKey(r) {
		who += " Send an Idempotency-Key to make a retry safe."
	}
	op["description"] = who
}
