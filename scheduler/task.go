package scheduler

import (
	"context"
	"fmt"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
)

// task is what one kind of owed model work does with a claimed job; Content.run does the rest,
// the same for every task: the model slots (taken before the claim, see taskKinds), the breaker,
// the charge, the ask's deadline, and how the run ends (Content.finish: the attempt, its why
// and backoff, the release or the put-off). A task is made for one job (Content.taskFor) and
// used once, in order: event, subject, ask, record.
//
// Adding a kind of work: see "Adding a task" in docs/architecture.md (the task, its entry in
// taskKinds, the task's value in models and in the migrations' CHECK and CASEs).
type task interface {
	// event is the job's attempt event as the task starts it: named after the task, with what
	// it adds (a score, its runs). run fills in the attempt's outcome.
	event() models.Event
	// subject loads what the job is about and builds the request; ok is false when the item
	// is gone (it was deleted since, and its trigger took the job too). An error is the
	// database failing, or a *refusal: a request the model client would refuse to send.
	subject(ctx context.Context) (ok bool, err error)
	// ask calls the model with the request subject built.
	ask(ctx context.Context, model *modelclient.Client) modelclient.Reply
	// record keeps an answered reply and its event, ev, which it completes with what the answer
	// says: Done when kept, Gone when the item went meanwhile or already has its answer. A reply
	// lacking what the task needs is not kept: lack says what is missing, for the attempt's
	// error, and the attempt fails as unanswered.
	record(ctx context.Context, reply modelclient.Reply, ev *models.Event) (out Outcome, lack string, err error)
}

// taskKind is one task this process runs: how to make its work for a job. The model calls one
// ask makes (the slots a job holds, and what its author is charged) are the task's own
// (models.Task.Calls), which the budget's SQL shares.
type taskKind struct {
	make func(c *Content, job models.Job, live liveModel) task
}

// taskKinds is every task this process runs, by the job's task column.
var taskKinds = map[models.Task]taskKind{
	models.TaskScreen: {make: func(c *Content, job models.Job, _ liveModel) task {
		return &screenTask{store: c.store, job: job, below: c.cfg.ReviewBelow[job.Kind]}
	}},
	models.TaskScore: {make: func(c *Content, job models.Job, live liveModel) task {
		return &scoreTask{store: c.store, job: job, model: live.name, rubric: live.rubric}
	}},
}

// maxCalls is the most model calls any task makes: a claim takes room for that many per job.
var maxCalls = func() int {
	n := 1
	for t := range taskKinds {
		n = max(n, t.Calls())
	}
	return n
}()

// callsOf is the model calls a job of task t makes; 0 for a task this process does not run
// (its run ends as refused before any call).
func callsOf(t models.Task) int {
	if _, ok := taskKinds[t]; !ok {
		return 0
	}
	return t.Calls()
}

// taskFor is the work of the job's task, or a *refusal for a task this process does not run
// (a newer replica's, or a row written by hand).
func (c *Content) taskFor(job models.Job, live liveModel) (task, error) {
	k, ok := taskKinds[job.Task]
	if !ok {
		return nil, &refusal{fmt.Errorf("owed does not run %q jobs", job.Task)}
	}
	return k.make(c, job, live), nil
}

// unchargedTask is a task whose calls this job charges to no author: a re-score, owed by a
// promotion or rollback, of a revision its author was charged for once already.
type unchargedTask interface{ uncharged() bool }

// refusal is work owed will not send to the model: a request the model client would refuse
// (a *modelclient.LimitError), or a task this process does not run. Its run ends as an attempt
// with why refused and the backoff, so it shows in the console and never loops unseen.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// attemptEvent is the event of an attempt at job, named name, before its outcome is known.
func attemptEvent(job models.Job, name models.Task) models.Event {
	return models.Event{Event: name, Kind: job.Kind, ItemID: job.ItemID, UserID: job.UserID, Attempt: job.Attempts, JobID: &job.ID}
}
