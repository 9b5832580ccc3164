package api

import (
	"time"

	"github.com/owed/owed/scheduler"
)

// scheduleEntryJSON is one entry of the periodic work (robfig/cron) in the overview.
type scheduleEntryJSON struct {
	Name      string     `json:"name" description:"what the entry runs: content sweep, backfill queue, backfill deletes, webhook deliveries, retention pruner, optimize"`
	EveryMs   int64      `json:"everyMs" minimum:"1" description:"its period, in milliseconds"`
	NextRunAt *timestamp `json:"nextRunAt" description:"when it runs next; null while this process runs no schedule"`
	LastRunAt *timestamp `json:"lastRunAt" description:"when it last ran; null before its first run"`
}

// scheduleOf is the schedule on the wire, in the order its entries were added ([] when none).
func scheduleOf(s *scheduler.Schedule) []scheduleEntryJSON {
	if s == nil {
		return []scheduleEntryJSON{}
	}
	return each(s.Entries(), func(e scheduler.ScheduleEntry) scheduleEntryJSON {
		return scheduleEntryJSON{Name: e.Name, EveryMs: e.Every.Milliseconds(), NextRunAt: nonZeroTime(e.Next), LastRunAt: nonZeroTime(e.Prev)}
	})
}

// nonZeroTime is t on the wire, or nil when t is zero.
func nonZeroTime(t time.Time) *timestamp {
	if t.IsZero() {
		return nil
	}
	return timePtr(&t)
}
