package models

import (
	"context"
	"time"
)

// DriftRun is one completed run of the anchor set against the live model: the share of screen
// anchors that agreed and the mean art shift (nil: none compared); Alerted marks the run that
// raised model.drift.
type DriftRun struct {
	ID           int64     `gorm:"column:id"`
	At           time.Time `gorm:"column:at;serializer:unixms"`
	Compared     int       `gorm:"column:compared"`
	Agreement    *float64  `gorm:"column:agreement"`
	MeanArtShift *float64  `gorm:"column:mean_art_shift"`
	Drifted      bool      `gorm:"column:drifted"`
	Alerted      bool      `gorm:"column:alerted"`
}

const driftRunColumns = `id, at, compared, agreement, mean_art_shift, drifted, alerted`

// ModelDriftData is the data of a model.drift event: the drifted run and the bounds it left.
type ModelDriftData struct {
	At           time.Time `json:"at"`
	Model        string    `json:"model"`
	Compared     int       `json:"compared"`
	Agreement    *float64  `json:"agreement"`
	MeanArtShift *float64  `json:"meanArtShift"`
	Alert        float64   `json:"alert"`
	ArtShiftMax  float64   `json:"artShiftMax"`
}

// RecordDriftRun keeps a completed drift run and, when it is the first drifted run since one
// within bounds (or none), owes model.drift in the same transaction (the insert decides Alerted).
func (s *Store) RecordDriftRun(ctx context.Context, run DriftRun, data ModelDriftData) (DriftRun, error) {
	err := s.WithTx(ctx, func(tx *Store) error {
		rows, err := fetch[[]DriftRun](ctx, tx, tx.db, `INSERT INTO drift_runs (at, compared, agreement, mean_art_shift, drifted, alerted)
			SELECT ?, ?, ?, ?, ?, CASE WHEN ? = 1 AND COALESCE((SELECT drifted FROM drift_runs ORDER BY id DESC LIMIT 1), 0) = 0
				THEN 1 ELSE 0 END
			RETURNING `+driftRunColumns, run.At.UnixMilli(), run.Compared, run.Agreement, run.MeanArtShift,
			boolInt(run.Drifted), boolInt(run.Drifted))
		if err != nil {
			return err
		}
		run = rows[0]
		if !run.Alerted {
			return nil
		}
		return tx.EnqueueWebhook(ctx, EventModelDrift, data)
	})
	return wrapped(run, err, "record drift run")
}

// DriftRuns lists the newest completed drift runs, newest first, at most limit.
func (s *Store) DriftRuns(ctx context.Context, limit int) ([]DriftRun, error) {
	out, err := fetch[[]DriftRun](ctx, s, s.read, `SELECT `+driftRunColumns+` FROM drift_runs ORDER BY id DESC LIMIT ?`, limit)
	return out, wrap(err, "list drift runs")
}
