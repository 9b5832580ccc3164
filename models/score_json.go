package models

import (
	"strconv"
	"strings"
)

// A score's runs and criteria are kept as JSON (art_runs, criteria), and every view of a
// scored revision reads them back: by json.Unmarshal, a twentieth of the author's view's CPU.
// They are written by owed as a flat array of numbers and a flat object of plain names to
// numbers; scoreRuns and scoreCriteria read exactly those shapes, and say when the text is
// anything else (a name with an escape, a number out of range, bad JSON), for
// json.Unmarshal to read as before. TestScoreJSONReadsAsUnmarshal holds them to
// json.Unmarshal's results.

// scoreRuns reads s as a JSON array of numbers; ok is false when it is not one this reads.
func scoreRuns(s string) (runs []float64, ok bool) {
	p := scoreText{s: s}
	if !p.byte('[') {
		return nil, false
	}
	runs = make([]float64, 0, 4)
	if p.byte(']') {
		return runs, p.end()
	}
	for {
		f, ok := p.number()
		if !ok {
			return nil, false
		}
		runs = append(runs, f)
		if p.byte(']') {
			return runs, p.end()
		}
		if !p.byte(',') {
			return nil, false
		}
	}
}

// scoreCriteria reads s as a JSON object of names without escapes to numbers, each name once;
// ok is false when it is not one this reads.
func scoreCriteria(s string) (criteria map[string]float64, ok bool) {
	p := scoreText{s: s}
	if !p.byte('{') {
		return nil, false
	}
	criteria = make(map[string]float64, 8)
	if p.byte('}') {
		return criteria, p.end()
	}
	for {
		name, ok := p.name()
		if !ok || !p.byte(':') {
			return nil, false
		}
		f, ok := p.number()
		if _, twice := criteria[name]; !ok || twice {
			return nil, false
		}
		criteria[name] = f
		if p.byte('}') {
			return criteria, p.end()
		}
		if !p.byte(',') {
			return nil, false
		}
	}
}

// scoreText reads JSON text from the left.
type scoreText struct {
	s string
	i int
}

func (p *scoreText) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

// byte reads c (after any space), if it comes next.
func (p *scoreText) byte(c byte) bool {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end says whether only space is left.
func (p *scoreText) end() bool {
	p.space()
	return p.i == len(p.s)
}

// name reads a string of printable ASCII without a backslash.
func (p *scoreText) name() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	n := strings.IndexByte(p.s[p.i:], '"')
	if n < 0 {
		return "", false
	}
	name := p.s[p.i : p.i+n]
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c >= 0x7f || c == '\\' {
			return "", false
		}
	}
	p.i += n + 1
	return name, true
}

// number reads a JSON number (-?int frac? exp?) that is a finite float64.
func (p *scoreText) number() (float64, bool) {
	p.space()
	start := p.i
	digits := func() int {
		from := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		return p.i - from
	}
	if p.i < len(p.s) && p.s[p.i] == '-' {
		p.i++
	}
	lead := p.i
	if n := digits(); n == 0 || n > 1 && p.s[lead] == '0' {
		return 0, false
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return 0, false
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(p.s[start:p.i], 64)
	return f, err == nil
}
