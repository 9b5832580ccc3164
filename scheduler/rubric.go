package scheduler

import (
	"context"
	"fmt"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
)

// RubricID names the critic's rubric; it is sent with every score request and kept with every
// score, so scores made under another rubric can be told apart.
const RubricID = "art-v1"

// RubricSpec is the rubric text the critic is given.
const RubricSpec = `Score this live-coded song as a work of art, each criterion from 0 to 1:
- musicality: melody, harmony and rhythm that hold together;
- development: how the piece changes and builds over time;
- texture: the sounds chosen and how they are layered;
- originality: ideas you have not heard many times before;
- craft: readable, deliberate code that serves the music.
Answer art as your overall judgement from 0 to 1, not the mean of the criteria.`

// Rubrics are the rubrics owed knows, by id, each with the text the critic is given: the live
// one (RubricID) and those a candidate may name (OWED_SHADOW_RUBRIC).
var Rubrics = map[string]string{
	RubricID: RubricSpec,
	"art-v2": `Score this live-coded song as a work of art, each criterion from 0 to 1:
- musicality: melody, harmony and rhythm that hold together;
- development: how the piece changes and builds over time;
- texture: the sounds chosen and how they are layered;
- originality: ideas you have not heard many times before;
- performance: how well it would carry a room when played live;
- craft: readable, deliberate code that serves the music.
Answer art as your overall judgement from 0 to 1, not the mean of the criteria; weigh
performance and originality above craft.`,
}

// screenRequest is what screening an item of kind sends: the subject as models.ScreenSubject
// reads it. Checked by modelclient.CheckScreen before it is sent.
func screenRequest(kind models.Kind, s models.Subject) modelclient.ScreenRequest {
	return modelclient.ScreenRequest{Kind: string(kind), Subject: modelclient.Subject{Title: s.Title, Text: s.Text}}
}

// scoreRequest is what scoring rev under rubric sends, naming model; a rubric owed does not
// know, or a request modelclient.CheckScore refuses, is an error and nothing is sent.
func scoreRequest(model, rubric string, rev models.ScoreSubject) (modelclient.ScoreRequest, error) {
	spec, ok := Rubrics[rubric]
	if !ok {
		return modelclient.ScoreRequest{}, fmt.Errorf("owed does not know the rubric %q", rubric)
	}
	req := modelclient.ScoreRequest{Model: model, Rubric: rubric, Title: rev.Title, Code: rev.Code, Spec: spec}
	return req, modelclient.CheckScore(req)
}

// modelAsk is a request for the model, built from an item as it is now.
type modelAsk struct {
	screen *modelclient.ScreenRequest
	score  *modelclient.ScoreRequest
}

// askFor reads the item of a task and builds its request (a score's under model and rubric);
// ok is false when the item is gone or the request would be refused before sending.
func askFor(ctx context.Context, store *models.Store, task models.Task, kind models.Kind, itemID int64, model, rubric string) (a modelAsk, ok bool, err error) {
	if task == models.TaskScreen {
		sub, ok, err := store.ScreenSubject(ctx, kind, itemID)
		req := screenRequest(kind, sub)
		return modelAsk{screen: &req}, ok && modelclient.CheckScreen(req) == nil, err
	}
	rev, ok, err := store.ScoreSubject(ctx, itemID)
	if err != nil || !ok {
		return modelAsk{}, false, err
	}
	req, refused := scoreRequest(model, rubric, rev)
	return modelAsk{score: &req}, refused == nil, nil
}

// send asks client the request.
func (a modelAsk) send(ctx context.Context, client *modelclient.Client) modelclient.Reply {
	if a.screen != nil {
		return client.Screen(ctx, *a.screen)
	}
	return client.Score(ctx, *a.score, ScoreRuns)
}
