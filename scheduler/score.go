package scheduler

import (
	"context"
	"fmt"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
)

// scoreTask scores one revision under the rubric: ScoreRuns model calls, whose mean is kept.
type scoreTask struct {
	store  *models.Store
	job    models.Job
	model  string                   // the critic model named in the request and kept with the score
	rubric string                   // the rubric asked for and kept with the score (a key of Rubrics)
	req    modelclient.ScoreRequest // built by subject
	songID int64                    // the revision's song, for errors
	// rescore: the revision has a score under another rubric, which this one replaces (owed by
	// a promotion or rollback; charged to nobody).
	rescore bool
}

func (t *scoreTask) uncharged() bool { return t.rescore }

func (t *scoreTask) event() models.Event {
	ev := attemptEvent(t.job, models.TaskScore)
	runs := ScoreRuns
	ev.Runs = &runs
	return ev
}

func (t *scoreTask) subject(ctx context.Context) (bool, error) {
	rev, ok, err := t.store.ScoreSubject(ctx, t.job.ItemID)
	if err != nil || !ok {
		return false, err
	}
	t.songID = rev.SongID
	t.rescore = rev.Rubric != nil && *rev.Rubric != t.rubric
	if t.req, err = scoreRequest(t.model, t.rubric, rev); err != nil {
		return false, &refusal{err}
	}
	return true, nil
}

func (t *scoreTask) ask(ctx context.Context, model *modelclient.Client) modelclient.Reply {
	return model.Score(ctx, t.req, ScoreRuns)
}

func (t *scoreTask) record(ctx context.Context, reply modelclient.Reply, ev *models.Event) (Outcome, string, error) {
	if len(reply.Runs) != ScoreRuns {
		return Pending, fmt.Sprintf("answered %d run(s) of %d", len(reply.Runs), ScoreRuns), nil
	}
	mean := modelclient.Mean(reply.Runs)
	ev.Outcome, ev.Art = "scored", &mean.Art
	record := t.store.RecordScore
	if t.rescore {
		record = t.store.ReplaceScore
	}
	recorded, err := record(ctx, models.Score{RevisionID: t.job.ItemID, Art: mean.Art, ArtRuns: mean.ArtRuns,
		Criteria: mean.Criteria, Model: t.model, Rubric: t.rubric}, *ev)
	if err != nil {
		return Pending, "", fmt.Errorf("record score of revision %d (song %d): %w", t.job.ItemID, t.songID, err)
	}
	if !recorded {
		return Gone, "", nil
	}
	return Done, "", nil
}
