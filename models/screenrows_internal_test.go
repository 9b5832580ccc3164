package models

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"
)

// The batch of verdicts travels as JSON written by hand (screenRowsJSON); it must read back as
// encoding/json's encoding of the same rows does (jsonParam, which compacts what the rows'
// MarshalJSON writes, so the same hand-written code), and each event text as it was written,
// whatever it holds: the second comparison is the one that judges the escaping.
func TestScreenRowsJSONReadsAsEncodingJSON(t *testing.T) {
	t.Parallel()
	why := Why("upstream")
	status := 503
	conf := 0.25
	controls, notUTF8, quotes, backslashes := "\n\x01", "\xff\xfe", `""`, `\\`
	msg := "a \"quoted\" <tag> & \\ back\tslash\nnew line, ünïcode, \u2028, \x01"
	rows := []screenRow{
		{kind: KindPitch, itemID: 1, verdict: VerdictAllow, confidence: 0.9, at: 1700000000000,
			ev: Event{At: time.UnixMilli(1700000000001), Event: TaskScreen, Kind: KindPitch, ItemID: 1, UserID: 7,
				Outcome: OutcomeAllow, Confidence: &conf}},
		{kind: KindComment, itemID: 2, verdict: VerdictBlock, confidence: 1, at: 1700000000002,
			ev: Event{At: time.UnixMilli(1700000000003), Event: TaskScreen, Kind: KindComment, ItemID: 2, UserID: 8,
				Outcome: EventOutcome("block"), Why: &why, Status: &status, Error: &msg, Note: &msg}},
		// Text of control characters only, and bytes that are not UTF-8 only: both escaped.
		{kind: KindComment, itemID: 3, verdict: VerdictBlock, confidence: 1, at: 1700000000004,
			ev: Event{At: time.UnixMilli(1700000000005), Event: TaskScreen, Kind: KindComment, ItemID: 3, UserID: 8,
				Outcome: EventOutcome("block"), Error: &notUTF8, Note: &controls}},
		// Quotes only, backslashes only.
		{kind: KindComment, itemID: 4, verdict: VerdictBlock, confidence: 1, at: 1700000000006,
			ev: Event{At: time.UnixMilli(1700000000007), Event: TaskScreen, Kind: KindComment, ItemID: 4, UserID: 8,
				Outcome: EventOutcome("block"), Error: &quotes, Note: &backslashes}},
	}
	ours, err := screenRowsJSON(rows)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := jsonParam(rows)
	if err != nil {
		t.Fatal(err)
	}
	var a, b []map[string]any
	if err := json.Unmarshal([]byte(ours), &a); err != nil {
		t.Fatalf("screenRowsJSON wrote invalid JSON %s: %v", ours, err)
	}
	if err := json.Unmarshal([]byte(theirs), &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("screenRowsJSON reads as\n%v\nencoding/json's as\n%v", a, b)
	}
	if !utf8.ValidString(ours) {
		t.Fatalf("screenRowsJSON wrote bytes that are not UTF-8: %q", ours)
	}
	if len(a) != 4 || a[1]["e_error"] != msg || a[2]["e_note"] != controls || a[3]["e_error"] != quotes ||
		a[3]["e_note"] != backslashes {
		t.Fatalf("the event's error reads back as %q, want %q", a[1]["e_error"], msg)
	}
}
