package app

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/owed/owed/models"
	"github.com/owed/owed/scheduler"
)

// The collectors of /metrics that read the database at each scrape, so every replica reports
// the same figures; a failed read leaves their figures out of that scrape (the database's own
// health is reported elsewhere).

// reviewWindow is how far back the review queue's measures on /metrics look.
const reviewWindow = 7 * 24 * time.Hour

// reviewCollector puts the review queue's measures on /metrics.
type reviewCollector struct {
	store *models.Store
	now   func() time.Time

	open, decided, wait, overturned, suggested *prometheus.Desc
}

func newReviewCollector(store *models.Store, now func() time.Time) *reviewCollector {
	return &reviewCollector{store: store, now: now,
		open: prometheus.NewDesc("owed_review_open", "Entries waiting in the review queue, by reason (unsure, appeal).", []string{"reason"}, nil),
		decided: prometheus.NewDesc("owed_review_decided", "Review entries decided in the last 7 days, by reason.",
			[]string{"reason"}, nil),
		wait: prometheus.NewDesc("owed_review_decision_seconds", "Time from entering review to the decision, over the decisions of the last 7 days: p50 and p90 per reason.",
			[]string{"reason", "quantile"}, nil),
		suggested: prometheus.NewDesc("owed_review_suggestions_decided", "Decisions of the last 7 days on a model's suggestion (unsure entries, appeals of the model's blocks).", nil, nil),
		overturned: prometheus.NewDesc("owed_review_overturned_ratio", "Share of the model's suggestions decided in the last 7 days that moderators overturned.",
			nil, nil),
	}
}

func (c *reviewCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.open, c.decided, c.wait, c.suggested, c.overturned} {
		ch <- d
	}
}

func (c *reviewCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.store.ReviewCounts(ctx)
	if err != nil {
		return
	}
	m, err := c.store.MeasureReviews(ctx, c.now().Add(-reviewWindow))
	if err != nil {
		return
	}
	for _, r := range models.ReviewReasons {
		reason := string(r)
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(counts[r]), reason)
		ch <- prometheus.MustNewConstMetric(c.decided, prometheus.GaugeValue, float64(m.Decided[r]), reason)
		if v, ok := m.P50[r]; ok {
			ch <- prometheus.MustNewConstMetric(c.wait, prometheus.GaugeValue, v, reason, "0.5")
			ch <- prometheus.MustNewConstMetric(c.wait, prometheus.GaugeValue, m.P90[r], reason, "0.9")
		}
	}
	ch <- prometheus.MustNewConstMetric(c.suggested, prometheus.GaugeValue, float64(m.Suggested))
	ch <- prometheus.MustNewConstMetric(c.overturned, prometheus.GaugeValue, m.Share)
}

// shadowCollector puts the candidate's owed calls and agreement with the live verdicts on
// /metrics.
type shadowCollector struct {
	store   *models.Store
	content *scheduler.Content

	owed, agreement *prometheus.Desc
}

func newShadowCollector(store *models.Store, content *scheduler.Content) *shadowCollector {
	return &shadowCollector{store: store, content: content,
		owed: prometheus.NewDesc("owed_shadow_owed", "Shadow calls owed to the candidate.", nil, nil),
		agreement: prometheus.NewDesc("owed_shadow_agreement",
			"Share of the live verdicts the candidate agrees with, over every one compared (absent while none is).", nil, nil),
	}
}

func (c *shadowCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.owed
	ch <- c.agreement
}

func (c *shadowCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	owed, err := c.store.ShadowOwed(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.owed, prometheus.GaugeValue, float64(owed))
	cand, _, ok := c.content.Candidate()
	if !ok {
		return
	}
	cells, err := c.store.ShadowScreenTable(ctx, cand.Model)
	if err != nil {
		return
	}
	var agree, all int64
	for _, cell := range cells {
		all += cell.N
		if cell.Live == cell.Candidate {
			agree += cell.N
		}
	}
	if all > 0 {
		ch <- prometheus.MustNewConstMetric(c.agreement, prometheus.GaugeValue, float64(agree)/float64(all))
	}
}
