package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/owed/owed/owedtest"
)

// TestUnknownFieldRefusedBySchemaAndServer: the document is exactly as strict as the server
// about request bodies. A body with a field its route does not read, at the top or nested, is
// refused by the route's request schema (a JSON Schema validator reading the served document)
// and by the server (400 naming the field), on every route that reads a body.
func TestUnknownFieldRefusedBySchemaAndServer(t *testing.T) {
	t.Parallel()
	owedtest.Dialects(t, func(t *testing.T, db string) {
		w := newWorld(t, db)
		songID, _ := w.song(asAuthor, "")
		ids := map[string]string{"song": idText(songID), "author": idText(w.uid[asAuthor]), "user": idText(w.uid[asOther]),
			"pitch": idText(w.pitch(asAuthor, "")), "webhook": "", "scrape": ""}
		hook := w.do(http.MethodPost, "/api/admin/webhooks", asAdmin, map[string]any{"url": "https://93.184.215.14/h", "events": []string{"*"}})
		ids["webhook"] = idText((num(obj(hook.JSON()["webhook"])["id"])))
		scrape := w.do(http.MethodPost, "/api/scrapes", asBot, map[string]any{"chatId": "c", "backend": "puppet", "mode": "history"})
		ids["scrape"] = idText((num(scrape.JSON()["id"])))

		raw := w.do(http.MethodGet, "/api/openapi.json", asAnon, nil).Body
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource(docURL, doc); err != nil {
			t.Fatal(err)
		}
		escape := strings.NewReplacer("~", "~0", "/", "~1").Replace
		bodies := []struct{ body, field string }{{`{"unknownField":1}`, "unknownField"}}
		for _, r := range bodyRoutes {
			path := strings.Replace(strings.Replace(r.pattern, ":kind", r.fixture, 1), ":id", ids[r.fixture], 1)
			sch, err := c.Compile(docURL + "#/paths/" + url.PathEscape(escape(openAPIPath(r.pattern))) + "/" + strings.ToLower(r.method) +
				"/requestBody/content/application~1json/schema")
			if err != nil {
				t.Fatalf("%s %s: %v", r.method, r.pattern, err)
			}
			cases := bodies
			if r.pattern == "/api/scrapes/:id/media" {
				cases = append(cases, struct{ body, field string }{`{"media":[{"url":"https://cdn.example/a.png","kind":"image","x":1}]}`, "x"})
			}
			for _, b := range cases {
				v, _ := jsonschema.UnmarshalJSON(strings.NewReader(b.body))
				if err := sch.Validate(v); err == nil || !strings.Contains(err.Error(), "additional properties '"+b.field+"' not allowed") {
					t.Errorf("%s %s %s: the schema says %v, want the field refused", r.method, r.pattern, b.body, err)
				}
				res := w.do(r.method, path, r.as, b.body)
				var e struct {
					Error struct{ Code, Message, Field string }
				}
				json.Unmarshal(res.Body, &e)
				if res.Status != http.StatusBadRequest || e.Error.Code != "invalid" || !strings.HasSuffix(e.Error.Field, b.field) {
					t.Errorf("%s %s %s: the server answered %d %s, want 400 naming %s", r.method, path, b.body, res.Status, res.Body, b.field)
				}
			}
		}
	})
}

// TestEmptyQueryValuesRefused: a documented query parameter given empty (?limit=) is refused
// as any malformed value, 400 naming it, on every route that takes one; the document says so
// (no parameter allows an empty value, every plain string parameter has minLength 1).
func TestEmptyQueryValuesRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "sqlite:"+t.TempDir()+"/owed.db")
	w.env.App.API.CloseStreams() // a stream that took an empty value ends after its first event, not never
	hook := w.do(http.MethodPost, "/api/admin/webhooks", asAdmin, map[string]any{"url": "https://93.184.215.14/h", "events": []string{"*"}})
	scrape := w.do(http.MethodPost, "/api/scrapes", asBot, map[string]any{"chatId": "c", "backend": "puppet", "mode": "history"})
	ids := map[string]string{"webhook": idText((num(obj(hook.JSON()["webhook"])["id"]))), "scrape": idText((num(scrape.JSON()["id"])))}
	var doc map[string]any
	if err := json.Unmarshal(w.do(http.MethodGet, "/api/openapi.json", asAnon, nil).Body, &doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range queryRoutes {
		path := strings.Replace(r.pattern, ":id", ids[r.fixture], 1)
		for _, p := range r.params {
			checkError(t, w.do(http.MethodGet, path+"?"+p+"=", r.as, nil), http.StatusBadRequest, "invalid", p)
		}
		for _, p := range list(obj(obj(obj(doc["paths"])[openAPIPath(r.pattern)])["get"])["parameters"]) {
			s := obj(obj(p)["schema"])
			if obj(p)["in"] == "query" && (obj(p)["allowEmptyValue"] == true || s["type"] == "string" && s["format"] == nil && s["enum"] == nil && s["minLength"] == nil) {
				t.Errorf("%s: the document lets %s be empty: %v", r.pattern, obj(p)["name"], p)
			}
		}
	}
}

func idText(id int64) string { return strconv.FormatInt(id, 10) }
