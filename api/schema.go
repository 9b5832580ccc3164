package api

import (
	"encoding/json"
	"maps"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/owed/owed/models"
	"github.com/owed/owed/scheduler"
)

// The OpenAPI schemas are made from the Go types the handlers answer and read, so the document
// cannot describe a shape the code does not send. A field's schema comes from its Go type; its
// struct tags add what the type cannot say:
//
//	json:"name"          the property (omitempty: the property may be absent)
//	enum:"list"          the allowed values: the list of that name in enumLists
//	minimum, maximum     number bounds
//	minLength, maxLength string bounds; minItems, maxItems array bounds
//	format, pattern      string format and pattern (or the name of one in patterns)
//	description          what the field means
//	required:"true"      a request field that must be given (in answers every field not
//	                     omitempty is required)
//	nullable:"true"      a request field that may be null (in answers every pointer is nullable)
//	type                 the JSON type of a field read raw (json.RawMessage): "integer|null"
//
// A named struct becomes a component, named after the type without a JSON suffix.

// enumLists are the lists of values a field's enum tag names. They are the domain's own lists
// (models.Whys, models.Kinds, …), so a new value is documented where it is defined. A field
// names its list rather than the list following from its Go type, because some fields take
// part of a type's values (the scrape states a PATCH may set) or more (a filter's "none").
var enumLists = map[string][]string{
	"why":            names(models.Whys),
	"role":           names(models.Roles),
	"kind":           names(models.Kinds),
	"task":           names(models.Tasks),
	"verdict":        names(models.Verdicts),
	"screenState":    names(models.ItemStates),
	"jobState":       names(models.JobStates),
	"whyFilter":      names(whyFilter),
	"outcome":        names(models.EventOutcomes),
	"doneOutcome":    names(models.DoneOutcomes),
	"jobSort":        jobSorts,
	"songSort":       songSorts,
	"breakerState":   breakerStates,
	"webhookEvent":   models.WebhookEvents,
	"disabledReason": disabledReasons,
	"deliveryStatus": names(models.DeliveryStatuses),
	"scrapeState":    names(models.ScrapeStates),
	"scrapeSettable": names(settableScrapeStates),
	"scrapeListable": names(listableScrapeStates),
	"mediaKind":      names(models.MediaKinds),
	"mediaState":     names(models.MediaStates),
	"backfillState":  backfillStates,
	"waitsFor":       scheduler.WaitReasons,
	"reviewReason":   names(models.ReviewReasons),
	"reviewClaim":    names(models.ReviewClaimFilters),
	"appealState":    appealStates,
	"auditAction":    auditActions,
	"errorCode":      errorCodes,
}

// patterns are the regular expressions a pattern tag may name instead of spelling one out.
var patterns = map[string]*regexp.Regexp{"backendName": backendName}

// typeSchemas are the schemas of the types that JSON does not show as their Go kind suggests.
var typeSchemas = map[reflect.Type]map[string]any{
	reflect.TypeFor[timestamp]():       {"type": "string", "format": "date-time"},
	reflect.TypeFor[json.RawMessage](): {},
}

// schemaMaker makes schemas and collects the components they refer to.
type schemaMaker struct {
	components map[string]any
	named      map[string]componentOf
}

// componentOf is what a component was made from: a type, read (request) or sent.
type componentOf struct {
	t       reflect.Type
	request bool
}

func newSchemaMaker() *schemaMaker {
	return &schemaMaker{components: map[string]any{}, named: map[string]componentOf{}}
}

// answer is the schema of a value the API sends of type t.
func (m *schemaMaker) answer(t reflect.Type) map[string]any { return m.of(t, false) }

// request is the schema of a value the API reads into type t.
func (m *schemaMaker) request(t reflect.Type) map[string]any { return m.of(t, true) }

func (m *schemaMaker) of(t reflect.Type, request bool) map[string]any {
	if s, ok := typeSchemas[t]; ok {
		return maps.Clone(s)
	}
	switch t.Kind() {
	case reflect.Pointer:
		s := m.of(t.Elem(), request)
		if request {
			return s
		}
		return nullable(s)
	case reflect.Struct:
		if t.Name() == "" {
			return m.object(t, request)
		}
		name := componentName(t)
		// A type read and sent would need two schemas (pointers mean optional in one, null in
		// the other), and two types of one name would share one.
		if other, ok := m.named[name]; ok && other != (componentOf{t, request}) {
			panic("openapi: component " + name + " is made from " + other.t.String() + " and " + t.String() + ", read and sent")
		}
		if _, done := m.components[name]; !done {
			m.named[name] = componentOf{t, request}
			m.components[name] = map[string]any{} // a type that contains itself refers to itself
			m.components[name] = m.object(t, request)
		}
		return ref(name)
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": m.of(t.Elem(), request)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": m.of(t.Elem(), request)}
	case reflect.Interface:
		return map[string]any{}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32:
		return map[string]any{"type": "number", "format": "float"}
	case reflect.Float64:
		return map[string]any{"type": "number", "format": "double"} // not float: a generated client would lose digits
	}
	panic("openapi: no schema for " + t.String())
}

// object is the schema of a struct: its JSON fields with what their tags say.
func (m *schemaMaker) object(t reflect.Type, request bool) map[string]any {
	props := map[string]any{}
	var required []string
	for _, f := range reflect.VisibleFields(t) {
		name, omitempty, ok := jsonName(f)
		if !ok {
			continue
		}
		t := f.Type
		if !request && omitempty && t.Kind() == reflect.Pointer {
			t = t.Elem() // left out when nil, never null
		}
		s := m.of(t, request)
		if request && f.Tag.Get("nullable") == "true" {
			s = nullable(s)
		}
		if list := f.Tag.Get("enum"); list != "" && isNullable(s) {
			// A nullable enum is a named enum or null: null is not one of the values, so a
			// generated client makes a pointer to the enum type, not a fake "<nil>" value.
			s = nullable(m.enum(list))
			if d := f.Tag.Get("description"); d != "" {
				s["description"] = d
			}
		} else {
			applyTags(s, f.Tag)
		}
		req := request && f.Tag.Get("required") == "true"
		if _, has := s["minLength"]; req && s["type"] == "string" && !has {
			s["minLength"] = 1 // a required string is never empty: the handlers refuse ""
		}
		props[name] = s
		if req || !request && !omitempty {
			required = append(required, name)
		}
	}
	o := map[string]any{"type": "object", "properties": props}
	if request {
		o["additionalProperties"] = false // bind refuses an unknown field
	}
	if required != nil {
		o["required"] = required
	}
	return o
}

// jsonName is the property a struct field is sent as; ok is false for a field JSON leaves out.
func jsonName(f reflect.StructField) (name string, omitempty, ok bool) {
	if !f.IsExported() || f.Anonymous {
		return "", false, false
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false, false
	}
	name, opts, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name, strings.Contains(","+opts+",", ",omitempty,"), true
}

// applyTags adds a field's enum, bounds, format and description to its schema s.
func applyTags(s map[string]any, tag reflect.StructTag) {
	target := s
	if s["type"] == "array" {
		target = s["items"].(map[string]any)
	}
	if list := tag.Get("enum"); list != "" {
		values, ok := enumLists[list]
		if !ok {
			panic("openapi: no list of values named " + list)
		}
		target["enum"] = enumOf(values)
	}
	if v := tag.Get("type"); v != "" {
		// The JSON type of a field read raw (json.RawMessage), "integer|null" for a union.
		if types := strings.Split(v, "|"); len(types) > 1 {
			target["type"] = types
		} else {
			target["type"] = v
		}
	}
	if v := tag.Get("format"); v != "" {
		target["format"] = v
	}
	if v := tag.Get("pattern"); v != "" {
		if re, ok := patterns[v]; ok {
			v = re.String()
		}
		target["pattern"] = v
	}
	for _, k := range []string{"minimum", "maximum", "minLength", "maxLength", "default"} {
		if v := tag.Get(k); v != "" {
			target[k] = number(v)
		}
	}
	for _, k := range []string{"minItems", "maxItems"} {
		if v := tag.Get(k); v != "" {
			s[k] = number(v)
		}
	}
	if v := tag.Get("description"); v != "" {
		s["description"] = v
	}
}

func enumOf(values []string) []any {
	return each(values, func(v string) any { return v })
}

// enum is a reference to the component of the list of values named list (its name, exported).
func (m *schemaMaker) enum(list string) map[string]any {
	values, ok := enumLists[list]
	if !ok {
		panic("openapi: no list of values named " + list)
	}
	r := []rune(list)
	r[0] = unicode.ToUpper(r[0])
	name := string(r)
	if _, isStruct := m.named[name]; isStruct {
		panic("openapi: the list " + list + " and a type share the component name " + name)
	}
	m.components[name] = map[string]any{"type": "string", "enum": enumOf(values)}
	return ref(name)
}

func number(v string) any {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		panic("openapi: " + v + " is not a number")
	}
	return f
}

// nullable allows null besides what s allows.
func nullable(s map[string]any) map[string]any {
	if _, isRef := s["$ref"]; isRef {
		return map[string]any{"oneOf": []any{s, map[string]any{"type": "null"}}}
	}
	if t, ok := s["type"].(string); ok {
		s["type"] = []string{t, "null"}
	}
	return s
}

func isNullable(s map[string]any) bool {
	t, _ := s["type"].([]string)
	return len(t) == 2 && t[1] == "null"
}

// componentName names a struct's component: the Go name, exported, without a JSON suffix.
func componentName(t reflect.Type) string {
	name := strings.TrimSuffix(t.Name(), "JSON")
	r := []rune(name)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}
