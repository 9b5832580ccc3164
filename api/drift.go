package api

import (
	"context"
	"strings"
	"time"

	"github.com/owed/owed/models"
	"github.com/owed/owed/scheduler"
)

// driftRunsShown is how many drift runs GET /api/admin/shadow lists.
const driftRunsShown = 60

// driftJSON is the drift member of GET /api/admin/shadow.
type driftJSON struct {
	Every       string         `json:"every" description:"OWED_DRIFT_EVERY, as 24h or 1h30m"`
	Alert       float64        `json:"alert" description:"OWED_DRIFT_ALERT: agreement below it is drift"`
	ArtShiftMax float64        `json:"artShiftMax" description:"mean art shift above it is drift (0.06)"`
	Anchors     int            `json:"anchors" description:"how many anchors the set holds"`
	Runs        []driftRunJSON `json:"runs" description:"completed runs, newest first, at most 60"`
}

// driftRunJSON is one completed drift run.
type driftRunJSON struct {
	At           timestamp `json:"at"`
	Compared     int       `json:"compared" description:"anchors compared (an anchor whose item is gone is left out)"`
	Agreement    *float64  `json:"agreement" description:"the share of verdict anchors the live model agreed with; null: none compared"`
	MeanArtShift *float64  `json:"meanArtShift" description:"the mean absolute difference of live art from the reference art; null: no art anchor compared"`
	Drifted      bool      `json:"drifted" description:"agreement below alert or meanArtShift above artShiftMax"`
	Alerted      bool      `json:"alerted" description:"this run raised model.drift: the first drifted run after one within bounds"`
}

func driftRunOf(r models.DriftRun) driftRunJSON {
	return driftRunJSON{At: timeStr(r.At), Compared: r.Compared, Agreement: r.Agreement, MeanArtShift: r.MeanArtShift,
		Drifted: r.Drifted, Alerted: r.Alerted}
}

// shadowDrift builds the drift member of GET /api/admin/shadow.
func (a *API) shadowDrift(ctx context.Context) (driftJSON, error) {
	cfg := scheduler.DriftConfig{Every: scheduler.DefaultDriftEvery, Alert: scheduler.DefaultDriftAlert}
	if a.Drift != nil {
		cfg = a.Drift.Config()
	}
	anchors, err := a.Store.Anchors(ctx)
	if err != nil {
		return driftJSON{}, err
	}
	runs, err := a.Store.DriftRuns(ctx, driftRunsShown)
	if err != nil {
		return driftJSON{}, err
	}
	out := driftJSON{Every: everyText(cfg.Every), Alert: cfg.Alert, ArtShiftMax: scheduler.DriftArtShiftMax,
		Anchors: len(anchors), Runs: each(runs, driftRunOf)}
	return out, nil
}

// everyText is a period as people write it: 24h, 1h30m, 10m, without Go's trailing zeros.
func everyText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
