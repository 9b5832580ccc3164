package scheduler

import (
	"context"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
)

// task is what one kind of owed model work does with a claimed job; Content.run does the rest,
// the same for every task: the breaker and the model slots, the charge, the ask's deadline,
// the backoff and the attempt's event. A task is made for one job (Content.taskFor) and used
// once, in order: event, subject, ask, record.
//
// Adding a kind of work is writing a task and choosing it in taskFor.
type task interface {
	// calls is how many model calls one ask makes: the model slots it holds and what the
	// author is charged.
	calls() int
	// event is the job's attempt event as the task starts it: named after the task, with what
	// it adds (a score, its runs). run fills in the attempt's outcome.
	event() models.Event
	// subject loads what the job is about and builds the request; ok is false when the item
	// is gone (it was deleted since, and its trigger took the job too). An error means the job
	// cannot be run: the database failed, or the model client would refuse the request.
	subject(ctx context.Context) (ok bool, err error)
	// ask calls the model with the request subject built.
	ask(ctx context.Context, model *modelclient.Client) modelclient.Reply
	// record keeps an answered reply and its event, ev, which it completes with what the answer
	// says: Done when kept, Gone when the item went meanwhile or already has its answer. A reply
	// lacking what the task needs is not kept: lack says what is missing, for the attempt's
	// error, and the attempt fails as unanswered.
	record(ctx context.Context, reply modelclient.Reply, ev *models.Event) (out Outcome, lack string, err error)
}

// taskFor is the work of the job's task: a screen, else a score.
func (c *Content) taskFor(job models.Job) task {
	if job.Task == models.TaskScreen {
		return &screenTask{store: c.store, job: job, below: c.cfg.ReviewBelow[job.Kind]}
	}
	return &scoreTask{store: c.store, job: job, model: c.cfg.ModelName}
}

// attemptEvent is the event of an attempt at job, named name, before its outcome is known.
func attemptEvent(job models.Job, name models.Task) models.Event {
	return models.Event{Event: name, Kind: job.Kind, ItemID: job.ItemID, UserID: job.UserID, Attempt: job.Attempts}
}
