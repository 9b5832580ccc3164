package models

import (
	"fmt"
	"strings"
)

// The domain's values, as stored and as the API names them, each a string type with its list.

// Kind is a kind of listener item.
type Kind string

// Kinds of item.
const (
	KindRevision Kind = "revision"
	KindComment  Kind = "comment"
	KindPitch    Kind = "pitch"
)

// Kinds lists every kind of item.
var Kinds = []Kind{KindRevision, KindComment, KindPitch}

// Task is a kind of owed work on an item; an attempt's event is named after its task.
type Task string

// Tasks.
const (
	TaskScreen Task = "screen" // a verdict on any item
	TaskScore  Task = "score"  // a score of an allowed revision
)

// Tasks lists every task.
var Tasks = []Task{TaskScreen, TaskScore}

// The model calls one run of each task makes (Task.Calls; taskCallsSQL is written from them).
const (
	ScreenCalls = 1
	ScoreCalls  = 3 // the critic is asked three times; the mean is kept
)

// Calls is how many model calls one run of the task makes (0 for an unknown task).
func (t Task) Calls() int {
	switch t {
	case TaskScreen:
		return ScreenCalls
	case TaskScore:
		return ScoreCalls
	}
	return 0
}

// taskCallsSQL is Task.Calls of a content_jobs row's task, in SQL.
var taskCallsSQL = func() string {
	var b strings.Builder
	b.WriteString("CASE task")
	for _, t := range Tasks {
		fmt.Fprintf(&b, " WHEN '%s' THEN %d", t, t.Calls())
	}
	b.WriteString(" ELSE 0 END")
	return b.String()
}()

// Verdict is a screen's decision on an item.
type Verdict string

// Verdicts.
const (
	VerdictAllow Verdict = "allow"
	VerdictBlock Verdict = "block"
)

// Verdicts lists every verdict.
var Verdicts = []Verdict{VerdictAllow, VerdictBlock}

// Why is the reason a job waits.
type Why string

// Why a job waits.
const (
	WhyUnreachable       Why = "unreachable"
	WhyUpstream          Why = "upstream"
	WhyUnanswered        Why = "unanswered"
	WhyBudget            Why = "budget"
	WhyBudgetUnavailable Why = "budget-unavailable"
	// WhyHeld is shown, never stored: the job's task is held (see Holds).
	WhyHeld Why = "held"
	// WhyUnavailable: the database failed while the job ran (also shown for an unreadable new item).
	WhyUnavailable Why = "unavailable"
	// WhyRefused: the request was refused before sending; nothing asked or charged.
	WhyRefused Why = "refused"
	// WhyReview: the model was unsure and the item waits for a moderator (see EnterReview).
	WhyReview Why = "review"
	// WhyBreaker: not asked while the model's breaker is open; no attempt was made.
	WhyBreaker Why = "breaker"
)

// Whys lists every reason a job can wait, in display order: the one list of why values. A why
// a job's row keeps (all but held and breaker) also widens content_jobs.why's CHECK in a
// migration (TestStoredWhysMatchTheCheck).
var Whys = []Why{WhyUnreachable, WhyUpstream, WhyUnanswered, WhyBudget, WhyBudgetUnavailable, WhyHeld,
	WhyBreaker, WhyReview, WhyUnavailable, WhyRefused}

// EventOutcome is how an attempt (an event) ended.
type EventOutcome string

// Event outcomes.
const (
	OutcomeAllow      EventOutcome = EventOutcome(VerdictAllow) // a screen's verdict
	OutcomeBlock      EventOutcome = EventOutcome(VerdictBlock) // a screen's verdict
	OutcomeScored     EventOutcome = "scored"                   // a score was recorded
	OutcomePending    EventOutcome = "pending"                  // the job was rescheduled with a why
	OutcomeDecided    EventOutcome = "decided"                  // a verdict recorded by hand
	OutcomeOverturned EventOutcome = "overturned"               // a verdict changed by hand
)

// EventOutcomes lists every outcome of an event.
var EventOutcomes = []EventOutcome{OutcomeAllow, OutcomeBlock, OutcomeScored, OutcomePending, OutcomeDecided, OutcomeOverturned}

// Role is what a user may do.
type Role string

// Roles.
const (
	RoleAuthor Role = "author"
	RoleBot    Role = "bot"
	RoleAdmin  Role = "admin"
)

// Roles lists every role.
var Roles = []Role{RoleAuthor, RoleBot, RoleAdmin}

// JobState is where a job stands in the queue, from its due time and lease (a filter, not stored).
type JobState string

// Job states.
const (
	JobDue     JobState = "due"     // due now and not leased
	JobWaiting JobState = "waiting" // due later
	JobLeased  JobState = "leased"  // claimed and running
	// JobDone is a settled job, listed for a while after (ListDoneJobs): owed no more.
	JobDone JobState = "done"
)

// JobStates lists every job state.
var JobStates = []JobState{JobDue, JobWaiting, JobLeased, JobDone}

// DoneOutcomes are the outcomes of an attempt that settles its job (a done job's outcome).
var DoneOutcomes = []EventOutcome{OutcomeAllow, OutcomeBlock, OutcomeScored, OutcomeDecided}

// ItemState is an item's state as the author's view names it.
type ItemState string

// Item states.
const (
	StatePending ItemState = "pending" // no verdict yet
	StatePublic  ItemState = "public"  // allowed
	StateBlocked ItemState = "blocked"
)

// ItemStates lists every item state.
var ItemStates = []ItemState{StatePending, StatePublic, StateBlocked}

// DeliveryStatus is where a webhook delivery stands (cancelled when its subscription is disabled).
type DeliveryStatus string

// Delivery states.
const (
	DeliveryPending   DeliveryStatus = "pending"
	DeliveryDelivered DeliveryStatus = "delivered"
	DeliveryCancelled DeliveryStatus = "cancelled"
)

// DeliveryStatuses lists every delivery status.
var DeliveryStatuses = []DeliveryStatus{DeliveryPending, DeliveryDelivered, DeliveryCancelled}

// ScrapeState is where a scrape stands: active while the bot walks the chat; paused, done and
// failed scrapes are backfill members; a delete goes pending-delete → deleting → deleted.
type ScrapeState string

// Scrape states.
const (
	ScrapeActive        ScrapeState = "active"
	ScrapePaused        ScrapeState = "paused"
	ScrapeDone          ScrapeState = "done"
	ScrapeFailed        ScrapeState = "failed"
	ScrapePendingDelete ScrapeState = "pending-delete"
	ScrapeDeleting      ScrapeState = "deleting"
	ScrapeDeleted       ScrapeState = "deleted"
)

// ScrapeStates lists every scrape state.
var ScrapeStates = []ScrapeState{ScrapeActive, ScrapePaused, ScrapeDone, ScrapeFailed, ScrapePendingDelete, ScrapeDeleting, ScrapeDeleted}

// MediaKind is a kind of media a scrape found.
type MediaKind string

// Media kinds.
const (
	MediaImage MediaKind = "image"
	MediaGIF   MediaKind = "gif"
	MediaVideo MediaKind = "video"
	MediaAudio MediaKind = "audio"
)

// MediaKinds lists every kind of media.
var MediaKinds = []MediaKind{MediaImage, MediaGIF, MediaVideo, MediaAudio}

// MediaState is where a media row's preview stands.
type MediaState string

// Media preview states.
const (
	MediaPending    MediaState = "pending"
	MediaCached     MediaState = "cached"
	MediaFailed     MediaState = "failed"
	MediaSuspect    MediaState = "suspect"
	MediaUnverified MediaState = "unverified"
	MediaSkipped    MediaState = "skipped"
)

// MediaStates lists every preview state of media.
var MediaStates = []MediaState{MediaPending, MediaCached, MediaFailed, MediaSuspect, MediaUnverified, MediaSkipped}

// Settled reports whether a row in this state is done with for good (not pending nor suspect).
func (m MediaState) Settled() bool {
	switch m {
	case MediaCached, MediaSkipped, MediaFailed, MediaUnverified:
		return true
	}
	return false
}
