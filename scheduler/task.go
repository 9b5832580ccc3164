package scheduler

import (
	"context"
	"fmt"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
)

// task is what one kind of model work does with a claimed job, made for one job and used once,
// in order: event, subject, ask, record; Content.run does the rest, the same for every task
// (docs/architecture.md, "Adding a task").
type task interface {
	// event is the job's attempt event as the task starts it; run fills in the outcome.
	event() models.Event
	// subject loads the item and builds the request; ok is false when the item is gone. An
	// error is the database failing, or a *refusal.
	subject(ctx context.Context) (ok bool, err error)
	// ask calls the model with the request subject built.
	ask(ctx context.Context, model *modelclient.Client) modelclient.Reply
	// record keeps an answered reply and completes ev: Done when kept, Gone when the item went
	// or already has its answer; lack says what a reply missed (the attempt fails unanswered).
	record(ctx context.Context, reply modelclient.Reply, ev *models.Event) (out Outcome, lack string, err error)
}

// taskKinds is every task this process runs, by the job's task column: how to make its work
// for a job (its model calls are models.Task.Calls, which the budget's SQL shares).
var taskKinds = map[models.Task]func(c *Content, job models.Job, live liveModel) task{
	models.TaskScreen: func(c *Content, job models.Job, _ liveModel) task {
		return &screenTask{store: c.store, job: job, below: c.cfg.ReviewBelow[job.Kind]}
	},
	models.TaskScore: func(c *Content, job models.Job, live liveModel) task {
		return &scoreTask{store: c.store, job: job, model: live.name, rubric: live.rubric}
	},
}

// maxCalls is the most model calls any task makes: a claim takes room for that many per job.
var maxCalls = func() int {
	n := 1
	for t := range taskKinds {
		n = max(n, t.Calls())
	}
	return n
}()

// callsOf is the model calls a job of task t makes; 0 for a task this process does not run.
func callsOf(t models.Task) int {
	if _, ok := taskKinds[t]; !ok {
		return 0
	}
	return t.Calls()
}

// taskFor is the work of the job's task, or a *refusal for a task this process does not run.
func (c *Content) taskFor(job models.Job, live liveModel) (task, error) {
	newTask, ok := taskKinds[job.Task]
	if !ok {
		return nil, &refusal{fmt.Errorf("owed does not run %q jobs", job.Task)}
	}
	return newTask(c, job, live), nil
}

// unchargedTask is a task whose calls this job charges to no author: a re-score, owed by a
// promotion or rollback, of a revision its author was charged for once already.
type unchargedTask interface{ uncharged() bool }

// refusal is work owed will not send to the model (a request the client would refuse, or a
// task this process does not run): an attempt with why refused and the backoff.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// attemptEvent is the event of an attempt at job, named name, before its outcome is known.
func attemptEvent(job models.Job, name models.Task) models.Event {
	return models.Event{Event: name, Kind: job.Kind, ItemID: job.ItemID, UserID: job.UserID, Attempt: job.Attempts, JobID: &job.ID}
}
