package app

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/owed/owed/models"
	"github.com/owed/owed/scheduler"
)

// shadowCollector puts the candidate's owed calls and agreement with the live verdicts on
// /metrics, read from the database at each scrape so every replica reports the same figures.
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
		return // the scrape goes on without these; the database's own health is reported elsewhere
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
