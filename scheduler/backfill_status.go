package scheduler

import (
	"context"
	"math"
	"sort"
	"time"

	"github.com/owed/owed/models"
)

// BackfillSettings are the queue's settings as the API shows and takes them.
type BackfillSettings struct {
	// BatchSize is how many rows one batch previews (1..500).
	BatchSize int `json:"batchSize"`
	// BatchPauseMs is the cooldown between batches.
	BatchPauseMs int64 `json:"batchPauseMs"`
	// Auto starts jobs with pending rows when owed starts.
	Auto bool `json:"auto"`
}

// BackfillMember is one member scrape of a job with its counts.
type BackfillMember struct {
	ScrapeID int64  `json:"scrapeId"`
	State    string `json:"state"`
	Backend  string `json:"backend"`
	Mode     string `json:"mode"`
	Pending  int64  `json:"pending"`
	Cached   int64  `json:"cached"`
	Failed   int64  `json:"failed"`
	// Suspect rows wait for their one delayed retry.
	Suspect int64 `json:"suspect"`
	// Unverified rows failed their retry too.
	Unverified int64 `json:"unverified"`
	// Skipped rows have no preview (video, audio).
	Skipped    int64 `json:"skipped"`
	Total      int64 `json:"total"`
	Downloaded int64 `json:"downloaded"`
	// Bytes is the size of the stored previews.
	Bytes         int64             `json:"bytes"`
	PendingByKind models.KindCounts `json:"pendingByKind"`
}

// BackfillJobStatus is one chat's job as the status shows it.
type BackfillJobStatus struct {
	ChatID  string  `json:"chatId"`
	GuildID *string `json:"guildId"`
	// State is idle, queued (started, but another job holds the queue), running, paused or done.
	State      string           `json:"state"`
	Members    []BackfillMember `json:"members"`
	Pending    int64            `json:"pending"`
	Cached     int64            `json:"cached"`
	Failed     int64            `json:"failed"`
	Skipped    int64            `json:"skipped"`
	Total      int64            `json:"total"`
	Downloaded int64            `json:"downloaded"`
	Bytes      int64            `json:"bytes"`
	// Processed is the rows handled since this run started.
	Processed  int64   `json:"processed"`
	StartedAt  *string `json:"startedAt"`
	FinishedAt *string `json:"finishedAt"`
	// PerMinute is the run's measured rate once it has lasted 30 s, else the settings' estimate.
	PerMinute    float64 `json:"perMinute"`
	RateMeasured bool    `json:"rateMeasured"`
	// EtaMs is the time to clear the pending rows at PerMinute; null when nothing is pending.
	EtaMs *int64 `json:"etaMs"`
	// EtaStartMs is the wait for the jobs ahead in the execution order; null when not scheduled.
	EtaStartMs *int64 `json:"etaStartMs"`
	// EtaRunMs is the time this job needs once it starts.
	EtaRunMs *int64 `json:"etaRunMs"`
	// EtaTotalMs is start plus run: when the job should finish; null when not scheduled.
	EtaTotalMs *int64 `json:"etaTotalMs"`
}

// BackendTotals are the counts of one backend's member scrapes.
type BackendTotals struct {
	Pending int64 `json:"pending"`
	Cached  int64 `json:"cached"`
	Failed  int64 `json:"failed"`
	Skipped int64 `json:"skipped"`
	Total   int64 `json:"total"`
}

// BackfillTotals span every member scrape, listed or hidden.
type BackfillTotals struct {
	Pending    int64                     `json:"pending"`
	Cached     int64                     `json:"cached"`
	Failed     int64                     `json:"failed"`
	Skipped    int64                     `json:"skipped"`
	Total      int64                     `json:"total"`
	Downloaded int64                     `json:"downloaded"`
	Bytes      int64                     `json:"bytes"`
	PerMinute  float64                   `json:"perMinute"`
	EtaMs      *int64                    `json:"etaMs"`
	EtaStartMs *int64                    `json:"etaStartMs"`
	EtaRunMs   *int64                    `json:"etaRunMs"`
	EtaTotalMs *int64                    `json:"etaTotalMs"`
	ByBackend  map[string]*BackendTotals `json:"byBackend"`
}

// BackfillStatus is the whole queue as GET /api/backfill shows it.
type BackfillStatus struct {
	Jobs     []BackfillJobStatus `json:"jobs"`
	Totals   BackfillTotals      `json:"totals"`
	Settings BackfillSettings    `json:"settings"`
	// LimitedUntil is set while a rate limit holds the queue.
	LimitedUntil *string `json:"limitedUntil"`
	// EstimatedPerMinute is the rate the settings and media gaps allow, cooldowns aside.
	EstimatedPerMinute float64 `json:"estimatedPerMinute"`
	// WalkingUntil is set while a walk holds the media-traffic lock: when it lapses unless
	// the walk pushes again.
	WalkingUntil *string `json:"walkingUntil"`
	// WalkingChat names the chat whose walk holds the lock, while WalkingUntil is set.
	WalkingChat *string `json:"walkingChat"`
}

// BackfillSummary is the overview's line about the backfill.
type BackfillSummary struct {
	Pending      int64   `json:"pending"`
	PerMinute    float64 `json:"perMinute"`
	EtaMs        *int64  `json:"etaMs"`
	Running      *string `json:"running"` // the chat whose job runs now
	LimitedUntil *string `json:"limitedUntil"`
	WalkingUntil *string `json:"walkingUntil"` // a walk holds the media-traffic lock until then
	WalkingChat  *string `json:"walkingChat"`  // the chat it walks
}

// seedBackends are always present in the totals by backend, as the bot's two account kinds.
var seedBackends = []string{"puppet", "slopbot"}

const statusTime = "2006-01-02T15:04:05.000Z07:00"

func isoMs(ms int64) *string {
	s := time.UnixMilli(ms).UTC().Format(statusTime)
	return &s
}

func isoMsPtr(ms *int64) *string {
	if ms == nil {
		return nil
	}
	return isoMs(*ms)
}

func ptr[T any](v T) *T { return &v }

// EstimatedPerMinute is the rate the settings and gaps allow: one row per mean gap plus its
// share of the pause between batches.
func EstimatedPerMinute(s BackfillSettings, minGap, maxGap time.Duration) float64 {
	perRow := float64(minGap.Milliseconds()+maxGap.Milliseconds())/2 + float64(s.BatchPauseMs)/float64(max(1, s.BatchSize))
	if perRow > 0 {
		return 60_000 / perRow
	}
	return idleRowsPerMinute
}

// Summary is the overview's line: pending rows, rate, ETA, the running chat and the rate limit.
func (b *Backfill) Summary(ctx context.Context) (BackfillSummary, error) {
	st, err := b.Status(ctx)
	if err != nil {
		return BackfillSummary{}, err
	}
	out := BackfillSummary{Pending: st.Totals.Pending, PerMinute: st.Totals.PerMinute, EtaMs: st.Totals.EtaMs, LimitedUntil: st.LimitedUntil,
		WalkingUntil: st.WalkingUntil, WalkingChat: st.WalkingChat}
	for _, j := range st.Jobs {
		if j.State == models.BackfillRunning {
			out.Running = ptr(j.ChatID)
			break
		}
	}
	return out, nil
}

// Status is the live state of every job, with totals, settings and the rate limit. It reads
// the maintained counters, the job rows and the runner row: a few thousand rows whatever the
// number of media rows.
func (b *Backfill) Status(ctx context.Context) (BackfillStatus, error) {
	set, err := b.Settings(ctx)
	if err != nil {
		return BackfillStatus{}, err
	}
	members, err := b.store.BackfillMembers(ctx, "")
	if err != nil {
		return BackfillStatus{}, err
	}
	jobs, err := b.store.BackfillJobs(ctx)
	if err != nil {
		return BackfillStatus{}, err
	}
	runner, err := b.store.BackfillRunnerState(ctx)
	if err != nil {
		return BackfillStatus{}, err
	}
	walkUntil, walking, err := b.Walking(ctx)
	if err != nil {
		return BackfillStatus{}, err
	}
	minGap, maxGap := b.engine.Gaps()
	now := b.clock.Now()
	in := statusInput{now: now.UnixMilli(), bootMs: b.bootMs, settings: set, minGap: minGap, maxGap: maxGap,
		members: members, jobs: jobs, runner: runner}
	if lim := b.engine.RateLimit(); lim.Active {
		in.localLimit = lim.Until.UnixMilli()
	}
	st := computeStatus(in)
	if walking {
		st.WalkingUntil = isoMs(walkUntil.UnixMilli())
		chat, err := b.store.WalkingChat(ctx)
		if err != nil {
			return BackfillStatus{}, err
		}
		if chat != "" {
			st.WalkingChat = &chat
		}
	}
	if b.metrics != nil {
		rate := 0.0
		for _, j := range st.Jobs {
			if j.State == models.BackfillRunning && j.RateMeasured {
				rate = j.PerMinute
			}
		}
		limited := 0.0
		if st.LimitedUntil != nil {
			limited = 1
		}
		b.metrics.Backfill.WithLabelValues("rows_per_minute").Set(rate)
		b.metrics.Backfill.WithLabelValues("pending").Set(float64(st.Totals.Pending))
		b.metrics.Backfill.WithLabelValues("rate_limited").Set(limited)
	}
	return st, nil
}

type statusInput struct {
	now, bootMs    int64
	settings       BackfillSettings
	minGap, maxGap time.Duration
	members        []models.BackfillMember // by scrape id
	jobs           []models.BackfillJob    // in execution order
	runner         models.BackfillRunner
	localLimit     int64 // this process's engine rate limit, epoch ms; 0 when none
}

type chatGroup struct {
	chatID  string
	guildID *string
	members []BackfillMember
}

// computeStatus is the status arithmetic, apart from the database so it can be checked on
// fixed figures.
func computeStatus(in statusInput) BackfillStatus {
	estimate := EstimatedPerMinute(in.settings, in.minGap, in.maxGap)

	// Chats in the order of their first member scrape.
	var groups []*chatGroup
	byChat := map[string]*chatGroup{}
	for _, m := range in.members {
		g := byChat[m.ChatID]
		if g == nil {
			g = &chatGroup{chatID: m.ChatID}
			byChat[m.ChatID] = g
			groups = append(groups, g)
		}
		if g.guildID == nil {
			g.guildID = m.GuildID
		}
		c := m.Counts
		g.members = append(g.members, BackfillMember{ScrapeID: m.ID, State: m.State, Backend: m.Backend, Mode: m.Mode,
			Pending: c.Pending, Cached: c.Cached, Failed: c.Failed, Suspect: c.Suspect, Unverified: c.Unverified,
			Skipped: c.Skipped, Total: c.Total, Downloaded: m.Downloaded, Bytes: c.StoredBytes, PendingByKind: c.PendingByKind})
	}

	tracked := make(map[string]*models.BackfillJob, len(in.jobs))
	for i := range in.jobs {
		tracked[in.jobs[i].ChatID] = &in.jobs[i]
	}
	var claimed string
	if in.runner.Live(in.now) && in.runner.ChatID != nil {
		claimed = *in.runner.ChatID
	}

	jobs := make([]BackfillJobStatus, 0, len(groups))
	for _, g := range groups {
		j := BackfillJobStatus{ChatID: g.chatID, GuildID: g.guildID, State: "idle", Members: g.members}
		for _, m := range g.members {
			j.Pending += m.Pending
			j.Cached += m.Cached
			j.Failed += m.Failed
			j.Skipped += m.Skipped
			j.Total += m.Total
			j.Downloaded = satAdd(j.Downloaded, m.Downloaded)
			j.Bytes = satAdd(j.Bytes, m.Bytes)
		}
		t := tracked[g.chatID]
		// A fully backfilled chat is listed only when its job worked since this process started.
		if j.Pending == 0 && (t == nil || t.ActiveAt < in.bootMs) {
			continue
		}
		perMinute := estimate
		if t != nil {
			j.State = t.State
			if t.State == models.BackfillRunning && claimed != "" && claimed != g.chatID {
				j.State = "queued"
			}
			j.Processed = t.Processed
			j.StartedAt = isoMsPtr(t.StartedAt)
			j.FinishedAt = isoMsPtr(t.FinishedAt)
			if t.PerMinute != nil {
				perMinute, j.RateMeasured = *t.PerMinute, true
			}
		}
		if j.Pending > 0 && perMinute > 0 {
			j.EtaMs = ptr(roundMs(float64(j.Pending) / perMinute * 60_000))
		}
		j.PerMinute = round1(perMinute)
		jobs = append(jobs, j)
	}

	// Waiting times follow the execution order: started jobs in the order they were first
	// started, then the others as listed; each scheduled job starts after those ahead of it.
	index := make(map[string]int, len(jobs))
	for i := range jobs {
		index[jobs[i].ChatID] = i
	}
	var order []int
	seen := map[string]bool{}
	for _, t := range in.jobs {
		if i, ok := index[t.ChatID]; ok {
			order = append(order, i)
			seen[t.ChatID] = true
		}
	}
	for i := range jobs {
		if !seen[jobs[i].ChatID] {
			order = append(order, i)
		}
	}
	ahead := 0.0
	for _, i := range order {
		j := &jobs[i]
		scheduled := j.State == models.BackfillRunning || j.State == "queued" || j.State == models.BackfillPaused
		runMs := 0.0
		if j.Pending > 0 {
			runMs = float64(j.Pending) / max(0.01, j.PerMinute) * 60_000
		}
		j.EtaRunMs = ptr(roundMs(runMs))
		if scheduled {
			j.EtaStartMs = ptr(roundMs(ahead))
			j.EtaTotalMs = ptr(roundMs(ahead + runMs))
			ahead += runMs
		}
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Pending > jobs[b].Pending })

	// Totals span every member scrape, the hidden chats' too.
	tot := BackfillTotals{ByBackend: map[string]*BackendTotals{}}
	for _, name := range seedBackends {
		tot.ByBackend[name] = &BackendTotals{}
	}
	for _, g := range groups {
		for _, m := range g.members {
			tot.Pending += m.Pending
			tot.Cached += m.Cached
			tot.Failed += m.Failed
			tot.Skipped += m.Skipped
			tot.Total += m.Total
			tot.Downloaded = satAdd(tot.Downloaded, m.Downloaded)
			tot.Bytes = satAdd(tot.Bytes, m.Bytes)
			bt := tot.ByBackend[m.Backend]
			if bt == nil {
				bt = &BackendTotals{}
				tot.ByBackend[m.Backend] = bt
			}
			bt.Pending += m.Pending
			bt.Cached += m.Cached
			bt.Failed += m.Failed
			bt.Skipped += m.Skipped
			bt.Total += m.Total
		}
	}
	rate := estimate
	for _, t := range in.jobs {
		if t.State == models.BackfillRunning && t.PerMinute != nil && *t.PerMinute != 0 {
			rate = *t.PerMinute
			break
		}
	}
	tot.PerMinute = round1(rate)
	if tot.Pending > 0 {
		tot.EtaStartMs = ptr(int64(0))
		if rate > 0 {
			eta := roundMs(float64(tot.Pending) / rate * 60_000)
			tot.EtaMs, tot.EtaRunMs, tot.EtaTotalMs = ptr(eta), ptr(eta), ptr(eta)
		}
	}

	st := BackfillStatus{Jobs: jobs, Totals: tot, Settings: in.settings, EstimatedPerMinute: round1(estimate)}
	limited := in.localLimit
	if in.runner.Live(in.now) && in.runner.LimitedUntil != nil {
		limited = max(limited, *in.runner.LimitedUntil)
	}
	if limited > in.now {
		st.LimitedUntil = isoMs(limited)
	}
	return st
}

// satAdd adds two counts that are never negative, stopping at the largest int64 instead of
// wrapping: the API bounds each count an integration sends (2^53-1), but a sum over many
// scrapes, or rows written before that bound, must not turn negative.
func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
