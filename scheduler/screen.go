package scheduler

import (
	"context"
	"fmt"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
)

// screenTask screens one item: a single model call for its verdict, kept with its confidence.
type screenTask struct {
	store *models.Store
	job   models.Job
	req   modelclient.ScreenRequest // built by subject
	below float64                   // the review band of the item's kind (0: off)
}

func (t *screenTask) event() models.Event { return attemptEvent(t.job, models.TaskScreen) }

func (t *screenTask) subject(ctx context.Context) (bool, error) {
	subject, ok, err := t.store.ScreenSubject(ctx, t.job.Kind, t.job.ItemID)
	if err != nil || !ok {
		return false, err
	}
	t.req = screenRequest(t.job.Kind, subject)
	if err := modelclient.CheckScreen(t.req); err != nil {
		return false, &refusal{err}
	}
	return true, nil
}

func (t *screenTask) ask(ctx context.Context, model *modelclient.Client) modelclient.Reply {
	return model.Screen(ctx, t.req)
}

func (t *screenTask) record(ctx context.Context, reply modelclient.Reply, ev *models.Event) (Outcome, string, error) {
	v := reply.Verdict
	if v == nil {
		return Pending, "answer has no verdict", nil
	}
	ev.Outcome, ev.Confidence = models.EventOutcome(v.Verdict), &v.Confidence
	if v.Confidence < t.below {
		// Unsure: a moderator decides, with the model's verdict as a suggestion.
		why := models.WhyReview
		ev.Outcome, ev.Why = models.OutcomePending, &why
		if _, err := t.store.EnterReview(ctx, t.job, models.Verdict(v.Verdict), v.Confidence, *ev); err != nil {
			return Pending, "", fmt.Errorf("send %s %d to review: %w", t.job.Kind, t.job.ItemID, err)
		}
		return Pending, "", nil
	}
	recorded, err := t.store.RecordScreen(ctx, t.job.Kind, t.job.ItemID, models.Verdict(v.Verdict), v.Confidence, *ev)
	if err != nil {
		return Pending, "", fmt.Errorf("record screen of %s %d: %w", t.job.Kind, t.job.ItemID, err)
	}
	if !recorded {
		return Gone, "", nil
	}
	return Done, "", nil
}
