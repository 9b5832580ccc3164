package modelclient

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Kinds of screened items (ScreenRequest.Kind).
const (
	KindRevision = "revision"
	KindComment  = "comment"
	KindPitch    = "pitch"
)

// Limits the client refuses. The write path checks the same limits so a
// listener hears about them at once (413/400) instead of a job that could
// never run.
const (
	MaxTitleChars = 200      // title, in characters (runes)
	MaxCodeBytes  = 64 << 10 // song code, in bytes
	MaxTextBytes  = 8 << 10  // comment and pitch body, in bytes
)

// Subject is what is screened: a revision's song title and code, or a
// comment's or pitch's body as Text with an empty Title.
type Subject struct{ Title, Text string }

// ScreenRequest asks for a verdict on one item.
type ScreenRequest struct {
	Kind    string // KindRevision, KindComment or KindPitch
	Subject Subject
}

// ScoreRequest asks the critic for the art of one song revision.
type ScoreRequest struct {
	Model  string // critic model name; empty: Config.Model
	Rubric string // rubric id
	Title  string // song title
	Code   string // song code
	Spec   string // rubric text
}

// LimitError is a request the client refuses to send. Field names what is
// wrong: "code", "body" or "text" is too large (TooLarge, HTTP 413); "title"
// is too long and "kind" is unknown (HTTP 400). Limit is the limit broken,
// in the field's unit (bytes, or characters for a title; 0 for kind).
type LimitError struct {
	Field   string
	Limit   int
	Message string
}

func (e *LimitError) Error() string { return e.Message }

// TooLarge reports whether the refusal is about size (413) rather than a
// malformed request (400).
func (e *LimitError) TooLarge() bool {
	return e.Field == "code" || e.Field == "body" || e.Field == "text"
}

// CheckScreen returns a *LimitError when Screen would refuse req, else nil.
// A revision's Text is its code (Field "code"); a comment's or pitch's is
// its body (Field "body").
func CheckScreen(req ScreenRequest) error {
	switch req.Kind {
	case KindRevision:
		if err := checkTitle(req.Subject.Title); err != nil {
			return err
		}
		return checkBytes("code", req.Subject.Text, MaxCodeBytes)
	case KindComment, KindPitch:
		if err := checkTitle(req.Subject.Title); err != nil {
			return err
		}
		return checkBytes("body", req.Subject.Text, MaxTextBytes)
	default:
		return &LimitError{
			Field:   "kind",
			Message: fmt.Sprintf("kind %q: want %s, %s or %s", req.Kind, KindRevision, KindComment, KindPitch),
		}
	}
}

// CheckScore returns a *LimitError when Score would refuse req, else nil.
// The rubric spec is the operator's, not a listener's, so it is not limited.
func CheckScore(req ScoreRequest) error {
	if err := checkTitle(req.Title); err != nil {
		return err
	}
	return checkBytes("code", req.Code, MaxCodeBytes)
}

func checkTitle(title string) error {
	if n := utf8.RuneCountInString(title); n > MaxTitleChars {
		return &LimitError{
			Field:   "title",
			Limit:   MaxTitleChars,
			Message: fmt.Sprintf("title is %d characters; at most %d are allowed", n, MaxTitleChars),
		}
	}
	return nil
}

func checkBytes(field, s string, limit int) error {
	if len(s) > limit {
		return &LimitError{
			Field:   field,
			Limit:   limit,
			Message: fmt.Sprintf("%s is %d bytes; at most %d (%d KiB) are allowed", field, len(s), limit, limit>>10),
		}
	}
	return nil
}

// The relay wire shapes. The openai dialect sends the same JSON as the user
// message, so a model sees one request format whatever carries it.
type (
	relayScreen struct {
		Task    string       `json:"task"`
		Kind    string       `json:"kind"`
		Subject relaySubject `json:"subject"`
	}
	relaySubject struct {
		Title string `json:"title"`
		Text  string `json:"text"`
	}
	relayScore struct {
		Task   string    `json:"task"`
		Model  string    `json:"model"`
		Rubric string    `json:"rubric"`
		Song   relaySong `json:"song"`
		Spec   string    `json:"spec"`
	}
	relaySong struct {
		Title string `json:"title"`
		Code  string `json:"code"`
	}
)

func (c *Client) screenBody(req ScreenRequest) []byte {
	relay := encode(relayScreen{
		Task:    "screen",
		Kind:    req.Kind,
		Subject: relaySubject{Title: req.Subject.Title, Text: req.Subject.Text},
	})
	if c.api == APIOpenAI {
		return chatRequest(c.model, screenInstructions, relay, "verdict", verdictSchema, screenTemperature)
	}
	return relay
}

func (c *Client) scoreBody(req ScoreRequest) []byte {
	model := cmp.Or(req.Model, c.model)
	relay := encode(relayScore{
		Task:   "score",
		Model:  model,
		Rubric: req.Rubric,
		Song:   relaySong{Title: req.Title, Code: req.Code},
		Spec:   req.Spec,
	})
	if c.api == APIOpenAI {
		return chatRequest(model, scoreInstructions, relay, "art", artSchema, scoreTemperature)
	}
	return relay
}

// encode marshals v without HTML escaping: song code is full of <, > and &,
// and escaping each as \u003c would inflate the request up to six times.
func encode(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only strings and fixed structs are encoded here.
		panic(fmt.Sprintf("modelclient: encoding a request: %v", err))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
