package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

// bind decodes a JSON body strictly into v: the right media type, an object whose keys name
// v's fields exactly and once each (strictBody), one value. Its errors name the field at fault.
func bind(c echo.Context, v any) error {
	req := c.Request()
	if mt, _, _ := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType)); mt != echo.MIMEApplicationJSON {
		return &Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type", Message: "send JSON with Content-Type: application/json"}
	}
	body, err := readBody(req)
	if err != nil {
		return err
	}
	if !utf8.Valid(body) {
		// encoding/json would quietly turn the bad bytes into U+FFFD and keep mangled text.
		return invalid("", "the request body is not UTF-8")
	}
	if err := strictBody(body, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			return invalid(te.Field, "the field "+te.Field+" must be a "+jsonType(te.Type.Kind().String()))
		case errors.As(err, &se), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
			return invalid("", "the request body is not valid JSON")
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return invalid(f, "unknown field "+f)
		}
		return invalid("", "the request body is not the expected JSON")
	}
	// More alone would let a stray '}' or ']' after the value through.
	if _, err := dec.Token(); err != io.EOF {
		return invalid("", "the request body must hold one JSON value")
	}
	return nil
}

// readBody reads a request's whole body and leaves it to be read again. A size limit's failure
// (http.MaxBytesReader's, or the BodyLimit middleware's for a body of unknown length, chunked,
// which it cuts off with echo.ErrStatusRequestEntityTooLarge) is 413.
func readBody(req *http.Request) ([]byte, error) {
	body, err := io.ReadAll(req.Body)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) || errors.Is(err, echo.ErrStatusRequestEntityTooLarge):
		return nil, tooLarge("", "the request body is too large")
	case err != nil:
		return nil, invalid("", "the request body could not be read")
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

func jsonType(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"), strings.HasPrefix(kind, "float"):
		return "number"
	case kind == "bool":
		return "boolean"
	case kind == "slice":
		return "list"
	case kind == "map", kind == "struct":
		return "object"
	}
	return kind
}

// pathIDAndBody reads the path's {id}, then the JSON body into v (bind).
func pathIDAndBody(c echo.Context, v any) (int64, error) {
	id, err := pathID(c, "id")
	if err != nil {
		return 0, err
	}
	return id, bind(c, v)
}

// pathID reads a positive integer id from the path.
func pathID(c echo.Context, name string) (int64, error) {
	id, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, notFound("resource")
	}
	return id, nil
}

// queryID reads an optional positive integer from the query.
func queryID(c echo.Context, name string) (int64, error) {
	v := c.QueryParam(name)
	if v == "" {
		return 0, nil
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, invalid(name, name+" must be a positive integer")
	}
	return id, nil
}

// queryLimit reads a page size: def when absent, 1..max.
func queryLimit(c echo.Context, def, max int) (int, error) {
	v := c.QueryParam("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, invalid("limit", "limit must be between 1 and "+strconv.Itoa(max))
	}
	return n, nil
}

// oneOf checks an optional enumerated query value.
func oneOf[T ~string](c echo.Context, name string, allowed ...T) (T, error) {
	v := T(c.QueryParam(name))
	if v == "" {
		return "", nil
	}
	if slices.Contains(allowed, v) {
		return v, nil
	}
	return "", invalid(name, name+" must be one of "+strings.Join(names(allowed), ", "))
}

// names is a list of a domain type's values as text.
func names[T ~string](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

// Cursors are opaque to clients: base64url of a small JSON value.
func encodeCursor(v any) *string {
	b, _ := json.Marshal(v)
	s := base64.RawURLEncoding.EncodeToString(b)
	return &s
}

func decodeCursor(c echo.Context, v any) (bool, error) {
	raw := c.QueryParam("cursor")
	if raw == "" {
		return false, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil || len(b) > 256 || json.Unmarshal(b, v) != nil {
		return false, invalid("cursor", "cursor is not one this server gave out")
	}
	return true, nil
}

// idPage reads the page size (def when absent, 1..max) and the id cursor of a list paged by id.
func idPage(c echo.Context, def, max int) (limit int, cursor int64, err error) {
	if limit, err = queryLimit(c, def, max); err != nil {
		return 0, 0, err
	}
	cursor, err = readIDCursor(c)
	return limit, cursor, err
}

// each is rows as their wire type, [] rather than null when there are none.
func each[R, J any](rows []R, toJSON func(R) J) []J {
	out := make([]J, 0, len(rows))
	for _, r := range rows {
		out = append(out, toJSON(r))
	}
	return out
}

// pageOf is one page of rows as their wire type, with the cursor to the next page (a list
// answer puts its two keys in alphabetical order, as the map it once was did). The cursor,
// made from the last row, is given only when the page is full, so a client stops at a short page.
func pageOf[R, J any](rows []R, limit int, toJSON func(R) J, cursor func(R) any) ([]J, *string) {
	var next *string
	if len(rows) > 0 && len(rows) == limit {
		next = encodeCursor(cursor(rows[len(rows)-1]))
	}
	return each(rows, toJSON), next
}

// pageQuery are the query parameters of a list paged by an opaque cursor.
type pageQuery struct {
	Limit  int    `query:"limit" minimum:"1" description:"the page size"`
	Cursor string `query:"cursor" description:"the nextCursor of the page before"`
}

type idCursor struct {
	ID int64 `json:"i"`
}

// readIDCursor reads an id cursor; 0 when absent.
func readIDCursor(c echo.Context) (int64, error) {
	cur, err := pageCursor(c, func(cur idCursor) bool { return cur.ID > 0 })
	if cur == nil {
		return 0, err
	}
	return cur.ID, nil
}

// pageCursor reads the cursor, nil when absent; one that is not valid is not one this server
// gave out.
func pageCursor[C any](c echo.Context, valid func(C) bool) (*C, error) {
	var cur C
	if ok, err := decodeCursor(c, &cur); err != nil || !ok {
		return nil, err
	}
	if !valid(cur) {
		return nil, invalid("cursor", "cursor is not one this server gave out")
	}
	return &cur, nil
}

// itemPath reads an item's {kind} and {id} from the path; a bad one is "<what> not found".
func itemPath(c echo.Context, what string) (models.Kind, int64, error) {
	kind := models.Kind(c.Param("kind"))
	if !slices.Contains(models.Kinds, kind) {
		return "", 0, notFound(what)
	}
	id, err := pathID(c, "id")
	return kind, id, err
}
