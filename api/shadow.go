package api

import (
	"context"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/models"
	"github.com/owed/owed/scheduler"
)

// The caps of the shadow page's lists, and of the public list its rank correlation reads.
const (
	shadowFlipsCap  = 50
	shadowMoversCap = 50
	shadowPointsCap = 500
	shadowRankedCap = 10000
)

type shadowModelJSON struct {
	Model  string `json:"model"`
	API    string `json:"api" description:"relay or openai"`
	Rubric string `json:"rubric"`
}

type shadowCandidateJSON struct {
	shadowModelJSON
	Since *timestamp `json:"since" description:"when this candidate was first set"`
}

type shadowCallsJSON struct {
	Today      int64 `json:"today" description:"the candidate's calls this UTC day (a score counts as its three)"`
	DailyLimit int64 `json:"dailyLimit" description:"OWED_SHADOW_DAILY_LIMIT"`
	Owed       int64 `json:"owed" description:"shadow calls owed"`
}

type verdictCountsJSON struct {
	Allow int64 `json:"allow"`
	Block int64 `json:"block"`
}

// confusionJSON is table[live][candidate].
type confusionJSON struct {
	Allow verdictCountsJSON `json:"allow" description:"items the live model allowed, by the candidate's verdict"`
	Block verdictCountsJSON `json:"block" description:"items the live model blocked, by the candidate's verdict"`
}

type shadowKindJSON struct {
	Kind     string        `json:"kind" enum:"kind"`
	Compared int64         `json:"compared"`
	Table    confusionJSON `json:"table"`
}

type shadowFlipJSON struct {
	Kind                string    `json:"kind" enum:"kind" description:"the item's page is /admin/items/{kind}/{id}"`
	ID                  int64     `json:"id"`
	Live                string    `json:"live" enum:"verdict"`
	Candidate           string    `json:"candidate" enum:"verdict"`
	LiveConfidence      float64   `json:"liveConfidence"`
	CandidateConfidence float64   `json:"candidateConfidence"`
	At                  timestamp `json:"at"`
}

type confidenceJSON struct {
	Bins      []float64 `json:"bins" description:"the bins' edges, 0 to 1 by tenths (the last bin holds 1)"`
	Live      []int64   `json:"live"`
	Candidate []int64   `json:"candidate"`
}

type shadowScreensJSON struct {
	Compared   int64            `json:"compared"`
	Agreement  *float64         `json:"agreement" description:"the share of verdicts the candidate agrees with; null when none was compared"`
	ByKind     []shadowKindJSON `json:"byKind"`
	Flips      []shadowFlipJSON `json:"flips" description:"items the candidate would flip, newest first, at most 50"`
	Confidence confidenceJSON   `json:"confidence"`
}

type shadowPointJSON struct {
	SongID    int64   `json:"songId"`
	Live      float64 `json:"live"`
	Candidate float64 `json:"candidate"`
}

type shadowMoverJSON struct {
	SongID        int64  `json:"songId"`
	Title         string `json:"title"`
	LiveRank      int    `json:"liveRank" description:"1 is first"`
	CandidateRank int    `json:"candidateRank"`
	Shift         int    `json:"shift" description:"liveRank - candidateRank: positive moves up"`
}

type shadowScoresJSON struct {
	Compared   int64             `json:"compared"`
	MeanDiff   *float64          `json:"meanDiff" description:"mean of candidate art - live art; null when none was compared"`
	SpreadDiff *float64          `json:"spreadDiff" description:"standard deviation of that difference"`
	Spearman   *float64          `json:"spearman" description:"rank correlation of the public song list under each (its songs both scored); null under 2 songs"`
	Points     []shadowPointJSON `json:"points" description:"newest first, at most 500"`
	Movers     []shadowMoverJSON `json:"movers" description:"by |shift|, at most 50"`
}

type shadowRescoreJSON struct {
	Rubric        string     `json:"rubric" description:"the live rubric songs are re-scored under"`
	Total         int64      `json:"total" description:"scored songs"`
	Done          int64      `json:"done" description:"songs whose score is under the live rubric"`
	RowsPerMinute *float64   `json:"rowsPerMinute" description:"songs re-scored a minute since the promotion or rollback; null before one is"`
	ETA           *timestamp `json:"eta" description:"when the rest will be done at that rate; null when done or unknown"`
}

type shadowJSON struct {
	Live      shadowModelJSON      `json:"live"`
	Candidate *shadowCandidateJSON `json:"candidate" description:"null when none is set"`
	Promoted  bool                 `json:"promoted" description:"the candidate is live (POST /api/admin/shadow/promote)"`
	From      *timestamp           `json:"from" description:"the first result compared; null when none"`
	To        *timestamp           `json:"to"`
	Calls     shadowCallsJSON      `json:"calls"`
	Screens   shadowScreensJSON    `json:"screens"`
	Scores    shadowScoresJSON     `json:"scores"`
	Rescore   shadowRescoreJSON    `json:"rescore" description:"the re-score of songs under the live rubric, with progress, rate and ETA"`
	Drift     driftJSON            `json:"drift" description:"the anchor set's runs against the live model"`
}

// getShadow answers the candidate's agreement with the live model (docs/shadow.md).
func (a *API) getShadow(c echo.Context) error {
	ctx := c.Request().Context()
	set, err := a.Store.ReadModelSettings(ctx)
	if err != nil {
		return err
	}
	out := shadowJSON{Live: shadowModelJSON(a.Content.Live(set)), Promoted: set.Promoted(),
		Screens: shadowScreensJSON{ByKind: []shadowKindJSON{}, Flips: []shadowFlipJSON{}, Confidence: confidenceJSON{Bins: shadowBins(),
			Live: make([]int64, models.ShadowBins), Candidate: make([]int64, models.ShadowBins)}},
		Scores: shadowScoresJSON{Points: []shadowPointJSON{}, Movers: []shadowMoverJSON{}}}
	if out.Calls.Owed, err = a.Store.ShadowOwed(ctx); err != nil {
		return err
	}
	if out.Rescore, err = a.rescore(ctx, out.Live.Rubric, set); err != nil {
		return err
	}
	if out.Drift, err = a.shadowDrift(ctx); err != nil {
		return err
	}
	cand, limit, ok := a.Content.Candidate()
	if !ok {
		return c.JSON(http.StatusOK, out)
	}
	out.Candidate = &shadowCandidateJSON{shadowModelJSON: shadowModelJSON(cand), Since: timePtr(set.CandidateSince)}
	out.Calls.Today, out.Calls.DailyLimit = set.CallsOn(a.now()), limit
	var span timeSpan
	if err := a.shadowScreens(ctx, cand.Model, &out.Screens, &span); err != nil {
		return err
	}
	if err := a.shadowScores(ctx, cand, &out.Scores, &span); err != nil {
		return err
	}
	out.From, out.To = timePtr(span.from), timePtr(span.to)
	return c.JSON(http.StatusOK, out)
}

// timeSpan is the range of times compared.
type timeSpan struct{ from, to *time.Time }

func (s *timeSpan) add(from, to time.Time) {
	if s.from == nil || from.Before(*s.from) {
		s.from = &from
	}
	if s.to == nil || to.After(*s.to) {
		s.to = &to
	}
}

func shadowBins() []float64 {
	bins := make([]float64, models.ShadowBins+1)
	for i := range bins {
		bins[i] = float64(i) / models.ShadowBins
	}
	return bins
}

// shadowScreens fills the verdicts' comparison: the table by kind, the flips, the histograms.
func (a *API) shadowScreens(ctx context.Context, model string, out *shadowScreensJSON, span *timeSpan) error {
	cells, err := a.Store.ShadowScreenTable(ctx, model)
	if err != nil {
		return err
	}
	agree := int64(0)
	for _, k := range models.Kinds {
		row := shadowKindJSON{Kind: string(k)}
		for _, cell := range cells {
			if cell.Kind != k {
				continue
			}
			counts := &row.Table.Allow
			if cell.Live == models.VerdictBlock {
				counts = &row.Table.Block
			}
			if cell.Candidate == models.VerdictBlock {
				counts.Block += cell.N
			} else {
				counts.Allow += cell.N
			}
			if cell.Live == cell.Candidate {
				agree += cell.N
			}
			row.Compared += cell.N
			span.add(cell.From, cell.To)
		}
		if row.Compared > 0 {
			out.ByKind = append(out.ByKind, row)
			out.Compared += row.Compared
		}
	}
	if out.Compared > 0 {
		out.Agreement = new(float64(agree) / float64(out.Compared))
	}
	flips, err := a.Store.ShadowFlips(ctx, model, shadowFlipsCap)
	if err != nil {
		return err
	}
	out.Flips = each(flips, func(f models.ShadowFlip) shadowFlipJSON {
		return shadowFlipJSON{Kind: string(f.Kind), ID: f.ItemID, Live: string(f.Live), Candidate: string(f.Candidate),
			LiveConfidence: f.LiveConfidence, CandidateConfidence: f.CandidateConfidence, At: timeStr(f.At)}
	})
	live, cand, err := a.Store.ShadowConfidence(ctx, model)
	out.Confidence.Live, out.Confidence.Candidate = live[:], cand[:]
	return err
}

// shadowScores fills the scores' comparison: mean and spread, points, rank correlation, movers.
func (a *API) shadowScores(ctx context.Context, cand scheduler.ModelInfo, out *shadowScoresJSON, span *timeSpan) error {
	sums, err := a.Store.ShadowScoreSums(ctx, cand.Model, cand.Rubric)
	if err != nil {
		return err
	}
	out.Compared = sums.N
	if sums.N > 0 {
		mean := sums.Sum / float64(sums.N)
		spread := math.Sqrt(max(sums.Sum2/float64(sums.N)-mean*mean, 0))
		out.MeanDiff, out.SpreadDiff = &mean, &spread
		span.add(*sums.From, *sums.To)
	}
	points, err := a.Store.ShadowPoints(ctx, cand.Model, cand.Rubric, shadowPointsCap)
	if err != nil {
		return err
	}
	out.Points = each(points, func(p models.ShadowPoint) shadowPointJSON {
		return shadowPointJSON{SongID: p.SongID, Live: p.Live, Candidate: p.Candidate}
	})
	ranked, err := a.Store.ShadowRanked(ctx, cand.Model, cand.Rubric, shadowRankedCap)
	if err != nil {
		return err
	}
	out.Spearman, out.Movers = rankShift(ranked)
	return nil
}

// rankShift ranks songs (in the live list's order) under the candidate's art, best first (ties
// by the live order), and answers Spearman's rank correlation of the two orders (1 − 6Σd² /
// n(n²−1), nil under two songs) and the songs that move most, at most shadowMoversCap.
func rankShift(songs []models.ShadowPoint) (*float64, []shadowMoverJSON) {
	n := len(songs)
	movers := []shadowMoverJSON{}
	if n < 2 {
		return nil, movers
	}
	order := make([]int, n) // candidate order: indexes into songs (their live rank - 1)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int {
		switch {
		case songs[x].Candidate > songs[y].Candidate:
			return -1
		case songs[x].Candidate < songs[y].Candidate:
			return 1
		}
		return 0
	})
	var d2 float64
	for candRank, i := range order {
		m := shadowMoverJSON{SongID: songs[i].SongID, Title: songs[i].Title, LiveRank: i + 1, CandidateRank: candRank + 1}
		m.Shift = m.LiveRank - m.CandidateRank
		d2 += float64(m.Shift * m.Shift)
		if m.Shift != 0 {
			movers = append(movers, m)
		}
	}
	rho := 1 - 6*d2/(float64(n)*(float64(n)*float64(n)-1))
	slices.SortStableFunc(movers, func(x, y shadowMoverJSON) int { return abs(y.Shift) - abs(x.Shift) })
	return &rho, movers[:min(len(movers), shadowMoversCap)]
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// rescore is the re-score's progress under the live rubric, its rate since the last change, and ETA.
func (a *API) rescore(ctx context.Context, rubric string, set models.ModelSettings) (shadowRescoreJSON, error) {
	out := shadowRescoreJSON{Rubric: rubric}
	var since time.Time
	if set.LiveSince != nil {
		since = *set.LiveSince
	}
	p, err := a.Store.RescoreProgress(ctx, rubric, since)
	if err != nil {
		return out, err
	}
	out.Total, out.Done = p.Total, p.Done
	minutes := a.now().Sub(since).Minutes()
	if set.LiveSince == nil || p.Since == 0 || minutes <= 0 {
		return out, nil
	}
	rate := float64(p.Since) / minutes
	out.RowsPerMinute = &rate
	if left := p.Total - p.Done; left > 0 {
		out.ETA = new(timeStr(a.now().Add(time.Duration(float64(left) / rate * float64(time.Minute)))))
	}
	return out, nil
}

var (
	errNoCandidate = &Error{Status: http.StatusConflict, Code: "no_candidate",
		Message: "no candidate is set (OWED_SHADOW_MODEL_URL, OWED_SHADOW_MODEL_NAME or OWED_SHADOW_RUBRIC)"}
	errPromoted    = &Error{Status: http.StatusConflict, Code: "promoted", Message: "the candidate is live already; roll back first"}
	errNotPromoted = &Error{Status: http.StatusConflict, Code: "not_promoted", Message: "the configured model is live already"}
)

// promoteShadow makes the candidate live: from now on live work asks it, under its rubric, on
// every replica; every song scored under another rubric owes a re-score; the owed shadow calls
// are dropped; audited. It answers the shadow page.
func (a *API) promoteShadow(c echo.Context) error {
	cand, _, ok := a.Content.Candidate()
	if !ok {
		return errNoCandidate
	}
	was := shadowModelJSON(a.Content.Configured())
	return a.setLive(c, &cand.Model, &cand.Rubric, errPromoted, models.AuditModelPromote, was, shadowModelJSON(cand))
}

// rollbackShadow makes the configured model and rubric live again (re-scores owed); audited.
func (a *API) rollbackShadow(c echo.Context) error {
	set, err := a.Store.ReadModelSettings(c.Request().Context())
	if err != nil {
		return err
	}
	return a.setLive(c, nil, nil, errNotPromoted, models.AuditModelRollback, shadowModelJSON(a.Content.Live(set)),
		shadowModelJSON(a.Content.Configured()))
}

// setLive makes model and rubric live (nil: the configured ones), owes the re-scores under the
// new live rubric and audits it, in one transaction; refused answers when the settings already
// say so.
func (a *API) setLive(c echo.Context, model, rubric *string, refused *Error, action string, was, now shadowModelJSON) error {
	ctx := c.Request().Context()
	changed := false
	if err := a.Store.WithTx(ctx, func(tx *models.Store) error {
		var err error
		if changed, err = tx.SetLive(ctx, model, rubric); err != nil || !changed {
			return err
		}
		if err := tx.DropShadowJobs(ctx); err != nil {
			return err
		}
		if _, err := tx.OweRescores(ctx, now.Rubric); err != nil {
			return err
		}
		return audit(c, tx, action, "model", was, now)
	}); err != nil {
		return err
	}
	if !changed {
		return refused
	}
	a.Log.Info(action, "model", now.Model, "rubric", now.Rubric, "by", caller(c).ID)
	a.Content.ForgetLive()
	a.Content.Wake() // the re-scores are due now
	return a.getShadow(c)
}

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
