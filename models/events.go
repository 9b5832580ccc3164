package models

import (
	"context"
	"encoding/json"
	"strings"
)

// eventFields are the events table's columns as the store writes them (all but id), in order:
// the one list every write and read of events is made from. value is a column's value as a
// statement binds it; set reads it back from a row's column i.
var eventFields = []struct {
	name, sqlType string
	value         func(e *Event) any
	set           func(e *Event, r *row, i int)
}{
	{"at", "bigint", func(e *Event) any { return e.At.UnixMilli() }, func(e *Event, r *row, i int) { e.At = r.time(i) }},
	{"event", "text", func(e *Event) any { return string(e.Event) }, func(e *Event, r *row, i int) { e.Event = Task(r.str(i)) }},
	{"kind", "text", func(e *Event) any { return string(e.Kind) }, func(e *Event, r *row, i int) { e.Kind = Kind(r.str(i)) }},
	{"item_id", "bigint", func(e *Event) any { return e.ItemID }, func(e *Event, r *row, i int) { e.ItemID = r.int64(i) }},
	{"user_id", "bigint", func(e *Event) any { return e.UserID }, func(e *Event, r *row, i int) { e.UserID = r.int64(i) }},
	{"outcome", "text", func(e *Event) any { return string(e.Outcome) },
		func(e *Event, r *row, i int) { e.Outcome = EventOutcome(r.str(i)) }},
	{"why", "text", func(e *Event) any { return nullable(e.Why, func(w Why) any { return string(w) }) },
		func(e *Event, r *row, i int) { e.Why = textp[Why](r, i) }},
	{"status", "integer", func(e *Event) any { return nullable(e.Status, func(n int) any { return int64(n) }) },
		func(e *Event, r *row, i int) { e.Status = r.intp(i) }},
	{"upstream_ms", "bigint", func(e *Event) any { return nullable(e.UpstreamMs, func(n int64) any { return n }) },
		func(e *Event, r *row, i int) { e.UpstreamMs = r.int64p(i) }},
	{"attempt", "integer", func(e *Event) any { return int64(e.Attempt) }, func(e *Event, r *row, i int) { e.Attempt = int(r.int64(i)) }},
	{"confidence", "double precision", func(e *Event) any { return nullable(e.Confidence, func(f float64) any { return f }) },
		func(e *Event, r *row, i int) { e.Confidence = r.floatp(i) }},
	{"art", "double precision", func(e *Event) any { return nullable(e.Art, func(f float64) any { return f }) },
		func(e *Event, r *row, i int) { e.Art = r.floatp(i) }},
	{"request_bytes", "bigint", func(e *Event) any { return nullable(e.RequestBytes, func(n int64) any { return n }) },
		func(e *Event, r *row, i int) { e.RequestBytes = r.int64p(i) }},
	{"runs", "integer", func(e *Event) any { return nullable(e.Runs, func(n int) any { return int64(n) }) },
		func(e *Event, r *row, i int) { e.Runs = r.intp(i) }},
	{"error", "text", func(e *Event) any { return nullable(e.Error, func(s string) any { return s }) },
		func(e *Event, r *row, i int) { e.Error = r.strp(i) }},
	{"admin_id", "bigint", func(e *Event) any { return nullable(e.AdminID, func(n int64) any { return n }) },
		func(e *Event, r *row, i int) { e.AdminID = r.int64p(i) }},
	{"note", "text", func(e *Event) any { return nullable(e.Note, func(s string) any { return s }) },
		func(e *Event, r *row, i int) { e.Note = r.strp(i) }},
	{"verdict", "text", func(e *Event) any { return nullable(e.Verdict, func(v Verdict) any { return string(v) }) },
		func(e *Event, r *row, i int) { e.Verdict = textp[Verdict](r, i) }},
	{"job_id", "bigint", func(e *Event) any { return nullable(e.JobID, func(n int64) any { return n }) },
		func(e *Event, r *row, i int) { e.JobID = r.int64p(i) }},
	{"public_reason", "text", func(e *Event) any { return nullable(e.Reason, func(s string) any { return s }) },
		func(e *Event, r *row, i int) { e.Reason = r.strp(i) }},
}

// nullable is f(*p), or nil (NULL) when p is nil.
func nullable[T any](p *T, f func(T) any) any {
	if p == nil {
		return nil
	}
	return f(*p)
}

// eventColumns are the events table's columns as written, eventFields' names in order.
var eventColumns = func() string {
	names := make([]string, len(eventFields))
	for i, f := range eventFields {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}()

// insertEventSQL inserts one event, an argument for each of eventFields.
var insertEventSQL = `INSERT INTO events (` + eventColumns + `) VALUES (?` + strings.Repeat(", ?", len(eventFields)-1) + `) RETURNING id`

func (s *Store) insertEvent(ctx context.Context, ev *Event) error {
	if ev.At.IsZero() {
		ev.At = fromMillis(s.nowMs())
	}
	args := make([]any, len(eventFields))
	for i, f := range eventFields {
		args[i] = f.value(ev)
	}
	return wrap(s.scan(ctx, s.db, &ev.ID, insertEventSQL, args...), "insert event")
}

// scanEvents reads rows of id and eventColumns, and closes rows (an empty page is not nil).
func scanEvents(rows *queryRows, sizeHint int) ([]Event, error) {
	return scanRows(rows, 1+len(eventFields), sizeHint, (*row).event)
}

// event reads the row's first columns: id and eventColumns.
func (r *row) event() Event {
	e := Event{ID: r.int64(0)}
	for i, f := range eventFields {
		f.set(&e, r, i+1)
	}
	return e
}

// screenRow is a verdict and its event as one JSON object of a batch (see fromJSON).
type screenRow struct {
	kind       Kind
	itemID     int64
	verdict    Verdict
	confidence float64
	at         int64
	ev         Event
}

// screenColumns are screenRow's columns: the verdict's, then the event's (eventFields).
var screenColumns = func() []column {
	cols := []column{{"kind", "text"}, {"item_id", "bigint"}, {"verdict", "text"}, {"confidence", "double precision"}, {"at", "bigint"}}
	for _, f := range eventFields {
		cols = append(cols, column{"e_" + f.name, f.sqlType})
	}
	return cols
}()

// insertScreenEvents inserts the events of v's rows (those joined to s, on PostgreSQL).
var insertScreenEvents = func() string {
	vals := make([]string, len(eventFields))
	for i, f := range eventFields {
		vals[i] = "v.e_" + f.name
	}
	return `INSERT INTO events (` + eventColumns + `)
	SELECT ` + strings.Join(vals, ", ") + ` FROM v`
}()

func newScreenRow(c screenCall, now int64) screenRow {
	ev := c.ev
	if ev.At.IsZero() {
		ev.At = fromMillis(now)
	}
	return screenRow{kind: c.kind, itemID: c.itemID, verdict: c.verdict, confidence: c.confidence, at: now, ev: ev}
}

// MarshalJSON writes the row keyed by screenColumns' names.
func (r screenRow) MarshalJSON() ([]byte, error) {
	obj := make(map[string]any, len(screenColumns))
	for i, v := range []any{string(r.kind), r.itemID, string(r.verdict), r.confidence, r.at} {
		obj[screenColumns[i].name] = v
	}
	for _, f := range eventFields {
		obj["e_"+f.name] = f.value(&r.ev)
	}
	return json.Marshal(obj)
}
