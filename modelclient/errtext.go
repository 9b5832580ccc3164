package modelclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// netError words a failed HTTP call without the URL *url.Error puts in front (the URL is
// configuration, and may carry a credential in its query).
func netError(err error, timeout time.Duration) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %v", timeout)
	}
	if errors.Is(err, context.Canceled) {
		return "the call was cancelled"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// MaxStatusErrorChars caps the words kept of a non-2xx answer: its status line and, for a JSON
// error answer, its message.
const MaxStatusErrorChars = 200

// statusError words a non-2xx answer: "HTTP 503: " and the error message of a JSON body
// ({"error": "…"}, {"error": {"message": "…"}}, {"message": "…"}), else the status's text
// (ask cuts it to MaxStatusErrorChars characters after taking the key out). Any other body is never kept: an answer is the
// model's (or whatever stands at its URL), and is shown to operators in events and lastError.
func statusError(status int, body []byte) string {
	msg := ""
	var j struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &j) == nil {
		var s string
		var o struct {
			Message string `json:"message"`
		}
		switch {
		case json.Unmarshal(j.Error, &s) == nil && s != "":
			msg = s
		case json.Unmarshal(j.Error, &o) == nil && o.Message != "":
			msg = o.Message
		default:
			msg = j.Message
		}
	}
	msg = strings.Join(strings.FieldsFunc(msg, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }), " ")
	msg = cmp.Or(msg, http.StatusText(status))
	if msg == "" {
		return fmt.Sprintf("HTTP %d", status)
	}
	return fmt.Sprintf("HTTP %d: %s", status, msg) // cut to MaxStatusErrorChars once redacted
}

// redact removes the key (sent as the Authorization header) from a message, should an
// answer or an error echo it, and cuts the message to MaxErrorChars characters.
func (c *Client) redact(msg string) string {
	if c.key != "" {
		msg = strings.ReplaceAll(msg, c.key, "[redacted]")
	}
	return Truncate(msg, MaxErrorChars)
}

// Truncate cuts s to at most n characters (runes), marking the cut with "…".
func Truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
