package scheduler

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/owed/owed/models"
)

// BackfillSettings are the queue's settings: batch size (1..MaxBatchSize), pause in ms, auto.
type BackfillSettings = models.BackfillSettings

// BackfillMember is one member scrape of a job with its counts.
type BackfillMember struct {
	ScrapeID int64
	State    string
	Backend  string
	Mode     string
	Pending  int64
	Cached   int64
	Failed   int64
	// Suspect rows wait for their one delayed retry.
	Suspect int64
	// Unverified rows failed their retry too.
	Unverified int64
	// Skipped rows have no preview (video, audio).
	Skipped    int64
	Total      int64
	Downloaded int64
	// Bytes is the size of the stored previews.
	Bytes         int64
	PendingByKind models.KindCounts
}

// BackfillJobStatus is one chat's job as the status shows it.
type BackfillJobStatus struct {
	ChatID  string
	GuildID *string
	// State is idle, queued (behind a job, or held by a wait), running, paused or done.
	State   string
	Members []BackfillMember
	BackfillCounts
	// Processed is the rows this run settled, each once, at most the job's settled rows.
	Processed int64
	// StartedAt is when this run's first batch began; nil before.
	StartedAt  *time.Time
	FinishedAt *time.Time
	// PerMinute is the run's measured rate once it has run 30 s (waits counted: WaitedMs); else
	// the queue's latest measured rate; else the settings' estimate.
	PerMinute    float64
	RateMeasured bool
	// WaitedMs is the rate-limit waits its measured rate counts (models.WaitsCountFrom), ms.
	WaitedMs int64
	// Eta is the time to clear the pending rows at PerMinute (the running job's includes the
	// wait in hand); nil when nothing is pending.
	Eta *time.Duration
	// EtaStart is the wait until the job starts; nil when not scheduled (idle, paused, done).
	EtaStart *time.Duration
	// EtaRun is the time this job needs once it runs, waits aside.
	EtaRun *time.Duration
	// EtaTotal, Position (0 running, 1… the queue) and Wait (the rate limit or walk wait in
	// its ETAs) are nil when not scheduled.
	EtaTotal *time.Duration
	Position *int
	Wait     *time.Duration
	// WaitsFor is what the job's start or next batch waits for (WaitReasons); nil when none.
	WaitsFor *string
}

// BackfillCounts are the rows of member scrapes by preview state, and the bytes stored.
type BackfillCounts struct {
	Pending    int64
	Cached     int64
	Failed     int64
	Skipped    int64
	Total      int64
	Downloaded int64
	// Bytes is the size of the stored previews.
	Bytes int64
}

// add adds a member's counts.
func (c *BackfillCounts) add(m BackfillMember) {
	c.Pending += m.Pending
	c.Cached += m.Cached
	c.Failed += m.Failed
	c.Skipped += m.Skipped
	c.Total += m.Total
	c.Downloaded = satAdd(c.Downloaded, m.Downloaded)
	c.Bytes = satAdd(c.Bytes, m.Bytes)
}

// BackendTotals are the counts of one backend's member scrapes.
type BackendTotals struct {
	Pending int64
	Cached  int64
	Failed  int64
	Skipped int64
	Total   int64
}

// BackfillTotals span every member scrape, listed or hidden.
type BackfillTotals struct {
	BackfillCounts
	PerMinute float64
	Eta       *time.Duration
	EtaStart  *time.Duration
	EtaRun    *time.Duration
	EtaTotal  *time.Duration
	ByBackend map[string]*BackendTotals
}

// BackfillStatus is the whole queue: what GET /api/backfill shows.
type BackfillStatus struct {
	Jobs     []BackfillJobStatus
	Totals   BackfillTotals
	Settings BackfillSettings
	// LimitedUntil is set while a rate limit holds the queue.
	LimitedUntil *time.Time
	// EstimatedPerMinute is the rate the settings and media gaps allow, cooldowns aside.
	EstimatedPerMinute float64
	// WalkingUntil is when the walk's media-traffic lock lapses, while one holds it.
	WalkingUntil *time.Time
	// WalkingChat names the chat whose walk holds the lock, while WalkingUntil is set.
	WalkingChat *string
}

// BackfillSummary is the overview's line about the backfill.
type BackfillSummary struct {
	Pending      int64
	PerMinute    float64
	Eta          *time.Duration
	Running      *string // the chat whose job runs now
	LimitedUntil *time.Time
	WalkingUntil *time.Time // a walk holds the media-traffic lock until then
	WalkingChat  *string    // the chat it walks
}

// seedBackends are always present in the totals by backend, as the bot's two account kinds.
var seedBackends = []string{"puppet", "slopbot"}

// msTime is an epoch-ms instant as a time in UTC.
func msTime(ms int64) *time.Time {
	t := time.UnixMilli(ms).UTC()
	return &t
}

// msDuration is a duration in ms rounded to a whole ms, halves up (roundMs).
func msDuration(x float64) time.Duration { return time.Duration(roundMs(x)) * time.Millisecond }

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
	out := BackfillSummary{Pending: st.Totals.Pending, PerMinute: st.Totals.PerMinute, Eta: st.Totals.Eta, LimitedUntil: st.LimitedUntil,
		WalkingUntil: st.WalkingUntil, WalkingChat: st.WalkingChat}
	if i := slices.IndexFunc(st.Jobs, func(j BackfillJobStatus) bool { return j.State == models.BackfillRunning }); i >= 0 {
		out.Running = ptr(st.Jobs[i].ChatID)
	}
	return out, nil
}

// Status is the live state of every job, with totals, settings and the rate limit.
func (b *Backfill) Status(ctx context.Context) (BackfillStatus, error) {
	in := statusInput{bootMs: b.bootMs}
	var err error
	if in.settings, err = b.Settings(ctx); err != nil {
		return BackfillStatus{}, err
	}
	if in.members, err = b.store.BackfillMembers(ctx, ""); err != nil {
		return BackfillStatus{}, err
	}
	if in.jobs, err = b.store.BackfillJobs(ctx); err != nil {
		return BackfillStatus{}, err
	}
	if in.runner, err = b.store.BackfillRunnerState(ctx); err != nil {
		return BackfillStatus{}, err
	}
	walkUntil, walking, err := b.Walking(ctx)
	if err != nil {
		return BackfillStatus{}, err
	}
	in.minGap, in.maxGap = b.engine.Gaps()
	in.now = b.clock.Now().UnixMilli()
	if lim := b.engine.RateLimit(); lim.Active {
		in.localLimit = lim.Until.UnixMilli()
	}
	if walking {
		in.walkUntil = walkUntil.UnixMilli()
		if in.walkChat, err = b.store.WalkingChat(ctx); err != nil {
			return BackfillStatus{}, err
		}
	}
	st := computeStatus(in)
	if b.metrics != nil {
		rate := 0.0
		for _, j := range st.Jobs {
			if j.State == models.BackfillRunning && j.RateMeasured {
				rate = j.PerMinute
			}
		}
		b.metrics.Backfill.WithLabelValues("rows_per_minute").Set(rate)
		b.metrics.Backfill.WithLabelValues("pending").Set(float64(st.Totals.Pending))
		b.metrics.Backfill.WithLabelValues("rate_limited").Set(boolGauge(st.LimitedUntil != nil))
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
	localLimit     int64  // this process's engine rate limit, epoch ms; 0 when none
	walkUntil      int64  // when the walk lock lapses, epoch ms; 0 when no walk holds it
	walkChat       string // the chat whose walk holds the lock
}

type chatGroup struct {
	chatID  string
	guildID *string
	members []BackfillMember
}

// What a job waits for (BackfillJobStatus.WaitsFor).
const (
	WaitRateLimit = "rate-limit"
	WaitWalk      = "walk"
	WaitQueue     = "queue"
)

// WaitReasons lists every value of BackfillJobStatus.WaitsFor.
var WaitReasons = []string{WaitRateLimit, WaitWalk, WaitQueue}

// computeStatus is the status arithmetic, apart from the database.
func computeStatus(in statusInput) BackfillStatus {
	estimate := EstimatedPerMinute(in.settings, in.minGap, in.maxGap)
	groups := groupMembers(in.members)
	jobs, order := jobFigures(in, groups)
	st := BackfillStatus{Settings: in.settings, EstimatedPerMinute: round1(estimate)}
	if limited := limitedUntil(in); limited > in.now {
		st.LimitedUntil = msTime(limited)
	}
	if in.walkUntil > in.now {
		st.WalkingUntil = msTime(in.walkUntil)
		if in.walkChat != "" {
			st.WalkingChat = ptr(in.walkChat)
		}
	}
	hold, reason := holdOf(in)
	lastEnd := schedule(in, jobs, order, estimate, hold, reason)
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Pending > jobs[b].Pending })
	st.Jobs = jobs
	st.Totals = totals(in, groups, estimate, lastEnd)
	return st
}

// groupMembers groups the member scrapes into chats, in the order of each chat's first scrape.
func groupMembers(members []models.BackfillMember) []*chatGroup {
	var groups []*chatGroup
	byChat := map[string]*chatGroup{}
	for _, m := range members {
		g := byChat[m.ChatID]
		if g == nil {
			g = &chatGroup{chatID: m.ChatID}
			byChat[m.ChatID] = g
			groups = append(groups, g)
		}
		g.guildID = cmp.Or(g.guildID, m.GuildID)
		c := m.Counts
		g.members = append(g.members, BackfillMember{ScrapeID: m.ID, State: m.State, Backend: m.Backend, Mode: m.Mode,
			Pending: c.Pending, Cached: c.Cached, Failed: c.Failed, Suspect: c.Suspect, Unverified: c.Unverified,
			Skipped: c.Skipped, Total: c.Total, Downloaded: m.Downloaded, Bytes: c.StoredBytes, PendingByKind: c.PendingByKind})
	}
	return groups
}

// jobFigures makes each listed chat's job with its counts, state and measured rate, in run order.
func jobFigures(in statusInput, groups []*chatGroup) (jobs []BackfillJobStatus, order []int) {
	tracked := make(map[string]*models.BackfillJob, len(in.jobs))
	for i := range in.jobs {
		tracked[in.jobs[i].ChatID] = &in.jobs[i]
	}
	jobs = make([]BackfillJobStatus, 0, len(groups))
	for _, g := range groups {
		j := BackfillJobStatus{ChatID: g.chatID, GuildID: g.guildID, State: "idle", Members: g.members}
		for _, m := range g.members {
			j.add(m)
		}
		t := tracked[g.chatID]
		if j.Pending == 0 && (t == nil || t.ActiveAt.UnixMilli() < in.bootMs) {
			continue
		}
		if t != nil {
			j.State = t.State
			// A member that left took its settled rows along.
			var settled int64
			for _, m := range g.members {
				settled += m.Cached + m.Skipped + m.Failed + m.Unverified
			}
			j.Processed = min(t.Processed, settled)
			j.WaitedMs = t.CountedWaitMs()
			j.StartedAt = t.StartedAt
			j.FinishedAt = t.FinishedAt
			if t.PerMinute != nil {
				j.PerMinute, j.RateMeasured = *t.PerMinute, true
			}
		}
		jobs = append(jobs, j)
	}

	order = runOrder(jobs, in.jobs)
	markQueued(jobs, order, in)
	return jobs, order
}

// runOrder is the indexes of jobs in run order: the stored ones in order, then the others.
func runOrder(jobs []BackfillJobStatus, stored []models.BackfillJob) []int {
	index := make(map[string]int, len(jobs))
	for i := range jobs {
		index[jobs[i].ChatID] = i
	}
	order := make([]int, 0, len(jobs))
	seen := map[string]bool{}
	for _, t := range stored {
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
	return order
}

// markQueued shows every job stored as running but the one that holds the queue as queued:
// the runner's claimed job, or, with none claimed, the first running one in the run order.
func markQueued(jobs []BackfillJobStatus, order []int, in statusInput) {
	head := ""
	if in.runner.Live(time.UnixMilli(in.now)) && in.runner.ChatID != nil {
		head = *in.runner.ChatID
	}
	for _, i := range order {
		if jobs[i].State != models.BackfillRunning {
			continue
		}
		head = cmp.Or(head, jobs[i].ChatID)
		if jobs[i].ChatID != head {
			jobs[i].State = "queued"
		}
	}
}

// limitedUntil is the rate limit holding the queue (this engine's or the live runner's), epoch ms.
func limitedUntil(in statusInput) int64 {
	limited := in.localLimit
	if in.runner.Live(time.UnixMilli(in.now)) && in.runner.LimitedUntil != nil {
		limited = max(limited, in.runner.LimitedUntil.UnixMilli())
	}
	return limited
}

// holdOf is the wait in hand before the queue's next batch: the runner waits out the rate
// limit, then the walk, so the later of the two ends it; reason names that one.
func holdOf(in statusInput) (ms float64, reason string) {
	limit, walk := limitedUntil(in)-in.now, in.walkUntil-in.now
	switch {
	case walk > 0 && walk >= limit:
		return float64(walk), WaitWalk
	case limit > 0:
		return float64(limit), WaitRateLimit
	}
	return 0, ""
}

// schedule walks the run order and sets each scheduled job's rate (its own, else liveRate,
// else the estimate), ETAs, position and wait; it returns when the last scheduled job should
// end (ms from now), nil when none is.
func schedule(in statusInput, jobs []BackfillJobStatus, order []int, estimate, hold float64, reason string) (lastEnd *float64) {
	live := liveRate(jobs, order, in)
	ahead, position := hold, 0
	for _, i := range order {
		j := &jobs[i]
		rate := j.PerMinute
		if !j.RateMeasured || rate <= 0 {
			// A measured 0 (a run that settled nothing) is no rate to divide by either.
			j.RateMeasured = false
			rate = estimate
			if live > 0 {
				rate = live
			}
		}
		j.PerMinute = round1(rate)
		runMs := 0.0
		if j.Pending > 0 && rate > 0 {
			runMs = float64(j.Pending) / rate * 60_000
			j.Eta = ptr(msDuration(runMs))
		} else if j.Pending > 0 {
			runMs = float64(j.Pending) / 0.01 * 60_000
		}
		j.EtaRun = ptr(msDuration(runMs))
		switch j.State {
		case models.BackfillRunning:
			j.Position, j.EtaStart = ptr(0), ptr(time.Duration(0))
			if j.Eta != nil {
				j.Eta = ptr(msDuration(hold + runMs))
			}
			if reason != "" {
				j.WaitsFor = ptr(reason)
				if j.StartedAt == nil {
					// The wait holds its first batch: queued at the head.
					j.State, j.EtaStart = "queued", ptr(msDuration(hold))
				}
			}
		case "queued":
			position++
			j.Position, j.EtaStart, j.WaitsFor = ptr(position), ptr(msDuration(ahead)), ptr(WaitQueue)
		default:
			continue
		}
		j.Wait = ptr(msDuration(hold))
		j.EtaTotal = ptr(msDuration(ahead + runMs))
		ahead += runMs
		lastEnd = ptr(ahead)
	}
	return lastEnd
}

// liveRate is the queue's latest measured rate: the running job's, else that of the job that
// worked last; 0 when none has one.
func liveRate(jobs []BackfillJobStatus, order []int, in statusInput) float64 {
	for _, i := range order {
		if j := jobs[i]; j.State == models.BackfillRunning && j.RateMeasured && j.PerMinute > 0 {
			return j.PerMinute
		}
	}
	rate, at := 0.0, int64(0)
	for _, t := range in.jobs {
		if t.PerMinute != nil && *t.PerMinute > 0 && t.ActiveAt.UnixMilli() > at {
			rate, at = *t.PerMinute, t.ActiveAt.UnixMilli()
		}
	}
	return rate
}

// totals span every member scrape, the hidden chats' too, at the first running job's measured
// rate, else the estimate; EtaTotal is the end of the last scheduled job.
func totals(in statusInput, groups []*chatGroup, estimate float64, lastEnd *float64) BackfillTotals {
	tot := BackfillTotals{ByBackend: map[string]*BackendTotals{}}
	for _, name := range seedBackends {
		tot.ByBackend[name] = &BackendTotals{}
	}
	for _, g := range groups {
		for _, m := range g.members {
			tot.add(m)
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
		tot.EtaStart = ptr(time.Duration(0))
		if rate > 0 {
			run := float64(tot.Pending) / rate * 60_000
			hold := 0.0
			if lastEnd != nil {
				hold, _ = holdOf(in)
			}
			tot.Eta, tot.EtaRun = ptr(msDuration(hold+run)), ptr(msDuration(run))
		}
	}
	if lastEnd != nil {
		tot.EtaTotal = ptr(msDuration(*lastEnd))
	}
	return tot
}

// satAdd adds two non-negative counts, saturating at the largest int64 instead of wrapping.
func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
