package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
)

// strictBody refuses what encoding/json lets through into t: a body that is not an object, a key
// given twice, a key that names a field other than exactly. A body that is not JSON is left to
// the decoder.
func strictBody(body []byte, t reflect.Type) error {
	if !json.Valid(body) {
		return nil // not one JSON value: the decoder's own error says so
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] != '{' {
		return invalid("", "the request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var fault *Error
	if err := strictValue(dec, t, ""); errors.As(err, &fault) {
		return fault
	}
	return nil
}

// strictValue reads one JSON value from dec at path, checking its objects against t (nil: any).
func strictValue(dec *json.Decoder, t reflect.Type, path string) error {
	t = checkedType(t)
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		return strictObject(dec, t, path)
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for dec.More() {
			if err := strictValue(dec, elem, path); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ']'
		return err
	}
	return nil
}

// checkedType is t without pointers, or nil when any shape is taken (raw JSON, an interface).
func checkedType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[json.RawMessage]() || t != nil && t.Kind() == reflect.Interface {
		return nil
	}
	return t
}

// strictObject reads an object's members after its '{', refusing a key given twice and, when t
// is a struct, a key that names none of its fields.
func strictObject(dec *json.Decoder, t reflect.Type, path string) error {
	fields, elem := memberTypes(t)
	seen := map[string]bool{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := kt.(string)
		field := key
		if path != "" {
			field = path + "." + key
		}
		if seen[key] {
			return invalid(field, "the field "+field+" is given twice")
		}
		seen[key] = true
		next := elem
		if fields != nil {
			ft, ok := fields[key]
			if !ok {
				return invalid(field, "unknown field "+field+unknownHint(key, fields))
			}
			next = ft
		}
		if err := strictValue(dec, next, field); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

// memberTypes says what an object decoded into t may hold: a struct's fields, a map's elements.
func memberTypes(t reflect.Type) (fields map[string]reflect.Type, elem reflect.Type) {
	if t == nil {
		return nil, nil
	}
	switch t.Kind() {
	case reflect.Struct:
		fields = map[string]reflect.Type{}
		for _, f := range reflect.VisibleFields(t) {
			if name, _, ok := jsonName(f); ok {
				fields[name] = f.Type
			}
		}
	case reflect.Map:
		elem = t.Elem()
	}
	return fields, elem
}

// unknownHint names the field a key differs from only in case.
func unknownHint(key string, fields map[string]reflect.Type) string {
	for name := range fields {
		if strings.EqualFold(name, key) {
			return " (field names match exactly: " + name + ")"
		}
	}
	return ""
}
