package api

import (
	"strconv"
	"time"

	"github.com/owed/owed/models"
)

func itoa(n int) string { return strconv.Itoa(n) }

// timeFormat is how every time goes out (models.TimeFormat, shared with webhook payloads).
const timeFormat = models.TimeFormat

// timestamp is a time on the wire, in timeFormat; its schema is a date-time string.
type timestamp string

// msTime is time.UnixMilli(ms).UTC().Format(timeFormat), written digit by digit for speed.
func msTime(ms int64) timestamp {
	t := time.UnixMilli(ms).UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return timestamp(t.Format(timeFormat))
	}
	hour, min, sec := t.Clock()
	var b [24]byte
	put := func(at, v, width int) {
		for i := at + width - 1; i >= at; i-- {
			b[i] = byte('0' + v%10)
			v /= 10
		}
	}
	put(0, year, 4)
	b[4] = '-'
	put(5, int(month), 2)
	b[7] = '-'
	put(8, day, 2)
	b[10] = 'T'
	put(11, hour, 2)
	b[13] = ':'
	put(14, min, 2)
	b[16] = ':'
	put(17, sec, 2)
	b[19] = '.'
	put(20, t.Nanosecond()/1e6, 3)
	b[23] = 'Z'
	return timestamp(b[:])
}

// timeStr is t on the wire.
func timeStr(t time.Time) timestamp { return msTime(t.UnixMilli()) }

// timePtr is t on the wire, or nil.
func timePtr(t *time.Time) *timestamp {
	if t == nil {
		return nil
	}
	return new(timeStr(*t))
}

// msOf is a duration on the wire: whole ms, or nil.
func msOf(d *time.Duration) *int64 {
	if d == nil {
		return nil
	}
	return new(d.Milliseconds())
}
