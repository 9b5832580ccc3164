package api

import (
	"cmp"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
)

// Error is an answer a client can act on, the only error whose text reaches a client.
type Error struct {
	Status  int
	Code    string
	Message string
	Field   string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// MarshalJSON writes the SPEC's shape: field is null, not absent, when no field is at fault.
func (e *Error) MarshalJSON() ([]byte, error) { return json.Marshal(e.detail()) }

func (e *Error) detail() errorDetail {
	var field *string
	if e.Field != "" {
		field = &e.Field
	}
	return errorDetail{e.Code, e.Message, field}
}

// errorJSON is every error answer: {"error":{"code","message","field"}}.
type errorJSON struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string  `json:"code" enum:"errorCode" description:"what went wrong, stable: each error answer of an operation lists its codes"`
	Message string  `json:"message"`
	Field   *string `json:"field" description:"the field at fault; null when no field is"`
}

func invalid(field, msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "invalid", Message: msg, Field: field}
}

func tooLarge(field, msg string) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: msg, Field: field}
}

// notFoundOf answers the store's not-found: "<what> not found", what the store says was missing.
func notFoundOf(err error) *Error {
	what := models.NotFoundWhat(err)
	if what == "" {
		what = "resource"
	}
	return notFound(what)
}

func notFound(what string) *Error {
	return &Error{Status: http.StatusNotFound, Code: "not_found", Message: what + " not found"}
}

var (
	errUnauthorized = &Error{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "a valid bearer token is required"}
	errForbidden    = &Error{Status: http.StatusForbidden, Code: "forbidden", Message: "this token may not do that"}
	errCSRF         = &Error{Status: http.StatusForbidden, Code: "csrf", Message: "browser writes need the X-Owed-Request header"}
)

// The answers to a database fault: nothing was written, so the client may try again.
var (
	errUnavailable = &Error{Status: http.StatusServiceUnavailable, Code: "unavailable",
		Message: "the database did not answer; nothing was written, try again shortly"}
	errStorage = &Error{Status: http.StatusInsufficientStorage, Code: "insufficient_storage",
		Message: "the database cannot take writes (storage full or read-only); nothing was written"}
	errNotPrimary = &Error{Status: http.StatusServiceUnavailable, Code: "unavailable",
		Message: "the database server reached is not the primary; nothing was written, try again shortly"}
	errTimeout = &Error{Status: http.StatusServiceUnavailable, Code: "unavailable",
		Message: "the database was busy past its lock or statement timeout; nothing was written, try again shortly"}
)

// faultAnswers are the answers to each class of database fault, with how it is logged.
var faultAnswers = map[models.Fault]struct {
	out   *Error
	level slog.Level
	why   string
}{
	models.FaultTransient:  {errUnavailable, slog.LevelWarn, "the database did not answer"},
	models.FaultStorage:    {errStorage, slog.LevelError, "the database takes no writes"},
	models.FaultNotPrimary: {errNotPrimary, slog.LevelError, "the database server is not the primary"},
	models.FaultTimeout:    {errTimeout, slog.LevelWarn, "a database timeout"},
}

// retryAfterSeconds is the Retry-After of 503 and 507 answers.
const retryAfterSeconds = "2"

// statusCodes name the error code of an HTTP status Echo raised itself (others: "error").
var statusCodes = map[int]string{
	http.StatusBadRequest: "invalid", http.StatusUnauthorized: "unauthorized", http.StatusForbidden: "forbidden",
	http.StatusNotFound: "not_found", http.StatusMethodNotAllowed: "method_not_allowed", http.StatusConflict: "conflict",
	http.StatusRequestEntityTooLarge: "too_large", http.StatusUnsupportedMediaType: "unsupported_media_type",
	http.StatusTooManyRequests: "rate_limited", http.StatusServiceUnavailable: "unavailable",
	http.StatusInsufficientStorage: "insufficient_storage",
}

// ErrorHandler answers every error in the SPEC's shape: *Error and Echo's own as they say; the
// store's not-found and forbidden as 404 and 403; a database fault as 503 or 507 with
// Retry-After; anything else, a bug, logged whole and answered as a bare 500.
func ErrorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		var out *Error
		var he *echo.HTTPError
		switch {
		case errors.As(err, &out):
		case errors.Is(err, models.ErrNotFound):
			out = notFoundOf(err)
		case errors.Is(err, models.ErrForbidden):
			out = errForbidden
		case faultAnswers[models.FaultOf(err)].out != nil:
			fa := faultAnswers[models.FaultOf(err)]
			log.Log(c.Request().Context(), fa.level, "request failed: "+fa.why, "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
			out = fa.out
		case errors.As(err, &he) && he.Code < 500:
			msg := http.StatusText(he.Code)
			if m, ok := he.Message.(string); ok && m != "" {
				msg = m
			}
			out = &Error{Status: he.Code, Code: cmp.Or(statusCodes[he.Code], "error"), Message: msg}
		default:
			log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
			out = &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"}
			if errors.As(err, &he) && he.Code == http.StatusServiceUnavailable {
				out = &Error{Status: he.Code, Code: "unavailable", Message: "service unavailable"}
			}
		}
		if out.Status == http.StatusServiceUnavailable || out.Status == http.StatusInsufficientStorage {
			if c.Response().Header().Get("Retry-After") == "" {
				c.Response().Header().Set("Retry-After", retryAfterSeconds)
			}
		}
		if c.Request().Method == http.MethodHead {
			c.NoContent(out.Status)
			return
		}
		c.JSON(out.Status, errorJSON{out.detail()})
	}
}
