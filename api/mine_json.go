package api

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// The author's view is the answer every first view builds, and encoding/json, which finds its
// way through the answer by reflection, was a tenth of such a view's CPU. appendJSON writes
// the same bytes as json.Marshal of the same value (TestMineJSONEncodesAsEncodingJSON holds it
// to that for random answers and strings), field by field, in about a third of the time.

// appendJSON appends the view's JSON to b, as json.Marshal(m) would write it.
func (m *mineJSON) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"items":`...)
	if m.Items == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range m.Items {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = m.Items[i].appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = append(b, `,"budget":{"limit":`...)
	b = strconv.AppendInt(b, m.Budget.Limit, 10)
	b = append(b, `,"spent":`...)
	b = strconv.AppendInt(b, m.Budget.Spent, 10)
	b = append(b, `,"resetsAt":`...)
	b = appendJSONString(b, string(m.Budget.ResetsAt))
	b = append(b, `},"nextCursor":`...)
	b = appendJSONStringPtr(b, m.NextCursor)
	return append(b, '}'), nil
}

func (it *mineItem) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"kind":`...)
	b = appendJSONString(b, string(it.Kind))
	b = append(b, `,"id":`...)
	b = strconv.AppendInt(b, it.ID, 10)
	if it.SongID != nil {
		b = append(b, `,"songId":`...)
		b = strconv.AppendInt(b, *it.SongID, 10)
	}
	if it.Title != "" {
		b = append(b, `,"title":`...)
		b = appendJSONString(b, it.Title)
	}
	b = append(b, `,"createdAt":`...)
	b = appendJSONString(b, string(it.CreatedAt))
	b = append(b, `,"state":`...)
	b = appendJSONString(b, string(it.State))
	b = append(b, `,"verdict":`...)
	b = appendJSONStringPtr(b, (*string)(it.Verdict))
	b = append(b, `,"confidence":`...)
	if it.Confidence == nil {
		b = append(b, "null"...)
	} else if b, err = appendJSONFloat(b, *it.Confidence); err != nil {
		return nil, err
	}
	b = append(b, `,"score":`...)
	if it.Score == nil {
		b = append(b, "null"...)
	} else if b, err = it.Score.appendJSON(b); err != nil {
		return nil, err
	}
	b = append(b, `,"jobs":`...)
	if it.Jobs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range it.Jobs {
			if i > 0 {
				b = append(b, ',')
			}
			j := &it.Jobs[i]
			b = append(b, `{"task":`...)
			b = appendJSONString(b, string(j.Task))
			b = append(b, `,"why":`...)
			b = appendJSONStringPtr(b, (*string)(j.Why))
			b = append(b, `,"attempts":`...)
			b = strconv.AppendInt(b, int64(j.Attempts), 10)
			b = append(b, `,"nextAttemptAt":`...)
			b = appendJSONStringPtr(b, (*string)(j.NextAttemptAt))
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"appeal":`...)
	if a := it.Appeal; a == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"state":`...)
		b = appendJSONString(b, a.State)
		b = append(b, `,"note":`...)
		b = appendJSONStringPtr(b, a.Note)
		b = append(b, `,"at":`...)
		b = appendJSONString(b, string(a.At))
		b = append(b, `,"decidedAt":`...)
		b = appendJSONStringPtr(b, (*string)(a.DecidedAt))
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

func (s *scoreJSON) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"art":`...)
	if b, err = appendJSONFloat(b, s.Art); err != nil {
		return nil, err
	}
	b = append(b, `,"artRuns":`...)
	if s.ArtRuns == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, f := range s.ArtRuns {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSONFloat(b, f); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = append(b, `,"criteria":`...)
	if s.Criteria == nil {
		b = append(b, "null"...)
	} else {
		keys := make([]string, 0, len(s.Criteria))
		for k := range s.Criteria {
			keys = append(keys, k)
		}
		slices.Sort(keys) // as encoding/json orders a map's keys
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			if b, err = appendJSONFloat(b, s.Criteria[k]); err != nil {
				return nil, err
			}
		}
		b = append(b, '}')
	}
	b = append(b, `,"model":`...)
	b = appendJSONString(b, s.Model)
	b = append(b, `,"rubric":`...)
	b = appendJSONString(b, s.Rubric)
	return append(b, '}'), nil
}

// appendJSONStringPtr appends *s as a JSON string, or null.
func appendJSONStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendJSONString(b, *s)
}

// appendJSONString appends s as a JSON string. A string of printable ASCII that encoding/json
// leaves alone (no quote, backslash, or <, > and &, which it escapes for HTML) is copied; any
// other goes through encoding/json itself, so the escaping is always its own.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plainJSON[s[i]] {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// plainJSON holds the bytes encoding/json copies into a string as they are: printable ASCII
// but the quote, the backslash, and <, > and &.
var plainJSON = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendJSONFloat appends f as encoding/json writes a float64 (the shortest form that reads
// back as f: plain, or with an exponent below 1e-6 and from 1e21), and refuses NaN and the
// infinities as it does.
func appendJSONFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("json: unsupported value: %v", f)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-07 is written e-7
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}
