package scheduler

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/owed/owed/modelclient"
	"github.com/owed/owed/models"
)

// The drift runs' defaults and fixed bound (OWED_DRIFT_EVERY, OWED_DRIFT_ALERT).
const (
	DefaultDriftEvery = 24 * time.Hour
	DefaultDriftAlert = 0.9
	// DriftArtShiftMax is how far the mean art of the art anchors may move from their reference
	// before the model counts as drifted: one run's noise on unchanged code (see ScoreRuns).
	DriftArtShiftMax = 0.06
	// driftLease is how long a replica holds the drift chore while it runs.
	driftLease = 30 * time.Minute
	// driftRetry is the longest a run that could not complete waits for its next try.
	driftRetry = time.Hour
)

// DriftConfig tunes the drift runs.
type DriftConfig struct {
	// Every is how often the anchor set is re-run against the live model (DefaultDriftEvery).
	Every time.Duration
	// Alert is the agreement on verdict anchors below which the model counts as drifted
	// (DefaultDriftAlert).
	Alert float64
}

// Drift re-runs the anchor set against the live model, through the content jobs' client,
// slots and breaker, charged to nobody; a run that cannot complete records nothing and is
// tried again on the next check.
type Drift struct {
	c   *Content
	cfg DriftConfig
	mu  sync.Mutex // one run at a time in this process
}

// NewDrift makes the drift runs over c's model.
func NewDrift(c *Content, cfg DriftConfig) *Drift {
	cfg.Every = positive(cfg.Every, DefaultDriftEvery)
	cfg.Alert = positive(cfg.Alert, DefaultDriftAlert)
	return &Drift{c: c, cfg: cfg}
}

// Config is the drift runs' configuration with defaults applied.
func (d *Drift) Config() DriftConfig { return d.cfg }

// DriftOutcome is what one drift run did: Run is the recorded run, or nil with Skipped saying
// why nothing was recorded.
type DriftOutcome struct {
	Run     *models.DriftRun
	Skipped string
}

// ScheduleOn adds the drift check to s, every Every or hour, whichever is shorter (RunDue).
func (d *Drift) ScheduleOn(s *Schedule) error {
	return s.Every("drift", min(d.cfg.Every, driftRetry), func(ctx context.Context) {
		if _, _, err := d.RunDue(ctx); err != nil && ctx.Err() == nil {
			d.c.log.Warn("drift run", "err", err)
		}
	})
}

// RunDue runs the anchor set when no run has completed within Every; ok is false when none
// was due.
func (d *Drift) RunDue(ctx context.Context) (out DriftOutcome, ok bool, err error) {
	last, err := d.c.store.DriftRuns(ctx, 1)
	if err != nil {
		return DriftOutcome{}, false, err
	}
	if len(last) > 0 && d.c.clock.Now().Before(last[0].At.Add(d.cfg.Every)) {
		return DriftOutcome{}, false, nil
	}
	out, err = d.Run(ctx)
	return out, true, err
}

// Run runs the anchor set now, on the one replica holding the drift chore, and records it
// unless it could not complete (Skipped says why); models.RecordDriftRun raises model.drift.
func (d *Drift) Run(ctx context.Context) (DriftOutcome, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	mine, err := d.c.store.TakeMaintenance(ctx, "drift", d.c.cfg.Owner, d.c.clock.Now(), driftLease)
	if err != nil {
		return DriftOutcome{}, err
	}
	if !mine {
		return d.skip("another replica is running the anchor set"), nil
	}
	live, err := d.c.live(ctx)
	if err != nil {
		return DriftOutcome{}, err
	}
	why, err := d.blocked(ctx, live)
	if err != nil || why != "" {
		return d.skip(why), err
	}
	anchors, err := d.c.store.Anchors(ctx)
	if err != nil {
		return DriftOutcome{}, err
	}
	if len(anchors) == 0 {
		return d.skip("no anchors"), nil
	}
	var t driftTally
	for _, a := range anchors {
		if why, err := d.compare(ctx, live, a, &t); err != nil || why != "" {
			return d.skip(why), err
		}
	}
	if t.compared() == 0 {
		return d.skip("no anchor's item is left"), nil
	}
	return d.record(ctx, t)
}

// blocked says why the live model may not be asked now ("" when it may).
func (d *Drift) blocked(ctx context.Context, live liveModel) (string, error) {
	if p := live.problem(); p != "" {
		return p, nil
	}
	row, err := d.c.breaker.state(ctx)
	if err != nil {
		return "", err
	}
	if row.State != models.BreakerClosed {
		return "the model's breaker is " + row.State, nil
	}
	h, err := d.c.store.Holds(ctx)
	if err != nil {
		return "", err
	}
	if h.Screen || h.Score {
		return "model work is held", nil
	}
	return "", nil
}

// skip counts and logs a run that recorded nothing.
func (d *Drift) skip(why string) DriftOutcome {
	why = cmp.Or(why, "interrupted")
	if m := d.c.metrics; m != nil {
		m.Drift.Runs.WithLabelValues("skipped").Inc()
	}
	d.c.log.Info("drift run skipped: nothing recorded", "why", why)
	return DriftOutcome{Skipped: why}
}

// driftTally adds up a run's comparisons.
type driftTally struct {
	verdicts, agreed int
	arts             int
	shift            float64 // the sum of |live art - reference|
}

func (t driftTally) compared() int { return t.verdicts + t.arts }

// compare asks the live model about one anchor and tallies the answer; why is set when the
// model did not answer. An anchor whose item is gone is left out.
func (d *Drift) compare(ctx context.Context, live liveModel, a models.Anchor, t *driftTally) (why string, err error) {
	if a.Verdict != nil {
		reply, ok, err := d.ask(ctx, live, models.TaskScreen, a.Kind, a.ItemID)
		switch {
		case err != nil:
			return "", err
		case ok && (reply.Why != "" || reply.Verdict == nil):
			return modelDown(reply), nil
		case ok:
			t.verdicts++
			if models.Verdict(reply.Verdict.Verdict) == *a.Verdict {
				t.agreed++
			}
		}
	}
	if a.Art != nil {
		reply, ok, err := d.ask(ctx, live, models.TaskScore, models.KindRevision, a.ItemID)
		switch {
		case err != nil:
			return "", err
		case ok && (reply.Why != "" || len(reply.Runs) != ScoreRuns):
			return modelDown(reply), nil
		case ok:
			t.arts++
			t.shift += math.Abs(modelclient.Mean(reply.Runs).Art - *a.Art)
		}
	}
	return "", nil
}

// ask asks the live model task's request about an item, holding its model slots at the
// sweep's priority; ok is false when the item is gone or the request would be refused.
func (d *Drift) ask(ctx context.Context, live liveModel, task models.Task, kind models.Kind, itemID int64) (r modelclient.Reply, ok bool, err error) {
	q, ok, err := askFor(ctx, d.c.store, task, kind, itemID, live.name, live.rubric)
	if err != nil || !ok {
		return r, false, err
	}
	n := task.Calls()
	if err := d.c.gate.Acquire(ctx, PrioritySweep, n); err != nil {
		return r, false, err
	}
	defer d.c.gate.Release(n)
	return q.send(ctx, live.client), true, nil
}

// modelDown is why a run stopped at a reply without an answer.
func modelDown(r modelclient.Reply) string {
	if r.Error != "" {
		return "the model did not answer: " + modelclient.Truncate(r.Error, 200)
	}
	return "the model did not answer"
}

// record keeps a completed run, sets the gauges, and counts and logs a raised alert.
func (d *Drift) record(ctx context.Context, t driftTally) (DriftOutcome, error) {
	run := models.DriftRun{At: d.c.clock.Now(), Compared: t.compared()}
	if t.verdicts > 0 {
		agreement := float64(t.agreed) / float64(t.verdicts)
		run.Agreement = &agreement
	}
	if t.arts > 0 {
		shift := t.shift / float64(t.arts)
		run.MeanArtShift = &shift
	}
	run.Drifted = (run.Agreement != nil && *run.Agreement < d.cfg.Alert) ||
		(run.MeanArtShift != nil && *run.MeanArtShift > DriftArtShiftMax)
	kept, err := d.c.store.RecordDriftRun(ctx, run, models.ModelDriftData{At: run.At, Model: d.c.cfg.ModelName, Compared: run.Compared,
		Agreement: run.Agreement, MeanArtShift: run.MeanArtShift, Alert: d.cfg.Alert, ArtShiftMax: DriftArtShiftMax})
	if err != nil {
		return DriftOutcome{}, fmt.Errorf("drift run: %w", err)
	}
	if m := d.c.metrics; m != nil {
		m.Drift.Runs.WithLabelValues("completed").Inc()
		m.Drift.Drifted.Set(boolGauge(kept.Drifted))
		if kept.Agreement != nil {
			m.Drift.Agreement.Set(*kept.Agreement)
		}
		if kept.MeanArtShift != nil {
			m.Drift.ArtShift.Set(*kept.MeanArtShift)
		}
		if kept.Alerted {
			m.Drift.Alerts.Inc()
		}
	}
	attrs := withOpt([]slog.Attr{slog.Int("compared", kept.Compared), slog.Bool("drifted", kept.Drifted)}, "agreement", kept.Agreement)
	level, msg := slog.LevelInfo, "drift run"
	if kept.Alerted {
		level, msg = slog.LevelWarn, "model drift: the live model left the anchor set's bounds (model.drift raised)"
	}
	d.c.log.LogAttrs(context.Background(), level, msg, withOpt(attrs, "meanArtShift", kept.MeanArtShift)...)
	return DriftOutcome{Run: &kept}, nil
}

// boolGauge is a gauge's value for b: 1 or 0.
func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
