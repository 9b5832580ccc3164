// Package metrics holds owed's Prometheus collectors. Each process makes one Metrics and hands
// it to the parts that count things; /metrics serves its registry.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics is the set of collectors owed exports.
type Metrics struct {
	Registry *prometheus.Registry

	Attempts       *prometheus.CounterVec   // event, outcome, why
	ModelLatency   *prometheus.HistogramVec // event
	BudgetRefusals prometheus.Counter
	Requests       *prometheus.CounterVec   // method, route, status
	RequestLatency *prometheus.HistogramVec // method, route
	Backfill       *prometheus.GaugeVec     // what: rows_per_minute, pending, rate_limited
	Deliveries     *prometheus.CounterVec   // outcome
	Pruned         *prometheus.CounterVec   // table: events, webhook_deliveries, webhook_attempts
	OldestKept     *prometheus.GaugeVec     // table: events, webhook_deliveries
	ModelBreaker   *prometheus.GaugeVec     // state: 1 for the breaker's state as this process last read it
	ModelInFlight  prometheus.Gauge         // model calls this process's jobs are asking now
	// ShadowCalls counts the candidate's calls by task and outcome (scheduler.ShadowOutcomes).
	ShadowCalls *prometheus.CounterVec

	Drift Drift // drift runs on the anchor set
}

// Drift are the collectors of drift runs on the anchor set (the chore runs on one replica at a
// time, so the gauges are that replica's last run).
type Drift struct {
	Runs      *prometheus.CounterVec // result: completed, skipped
	Alerts    prometheus.Counter     // model.drift raised
	Drifted   prometheus.Gauge       // 1 while the last completed run is out of bounds
	Agreement prometheus.Gauge       // the last completed run's agreement on verdict anchors
	ArtShift  prometheus.Gauge       // the last completed run's mean art shift
}

func newDrift() Drift {
	return Drift{
		Runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "owed_drift_runs_total", Help: "Drift runs of the anchor set against the live model, by result: completed (recorded), skipped (held, breaker, model down, no anchors).",
		}, []string{"result"}),
		Alerts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "owed_drift_alerts_total", Help: "Times a drift run found the live model drifted after runs within bounds (model.drift raised).",
		}),
		Drifted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "owed_model_drifted", Help: "1 while this replica's last completed drift run was out of bounds (agreement below OWED_DRIFT_ALERT or mean art shift above 0.06).",
		}),
		Agreement: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "owed_drift_agreement", Help: "The share of verdict anchors the live model agreed with in the last completed drift run.",
		}),
		ArtShift: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "owed_drift_art_shift", Help: "The mean absolute difference of live art from the anchors' reference art in the last completed drift run.",
		}),
	}
}

func (d Drift) collectors() []prometheus.Collector {
	return []prometheus.Collector{d.Runs, d.Alerts, d.Drifted, d.Agreement, d.ArtShift}
}

// JobCounts is what the owed-jobs collector reads at scrape time.
type JobCounts struct {
	ByTaskWhy       map[[2]string]int64 // task, why ("none" when simply due)
	OldestDueAge    time.Duration
	HasOldestDueAge bool
}

// New makes the collectors and registers them, with Go and process collectors, and a
// collector that reads the owed jobs through count at every scrape (so the figures are the
// database's, whichever replica answers).
func New(count func(ctx context.Context) (JobCounts, error)) *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	m.Attempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "owed_attempts_total", Help: "Attempts at owed jobs, by event (screen, score), outcome and why.",
	}, []string{"event", "outcome", "why"})
	m.ModelLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "owed_model_latency_seconds", Help: "Time the model took to answer one attempt (all its runs).",
		Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12),
	}, []string{"event"})
	m.BudgetRefusals = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "owed_budget_refusals_total", Help: "Charges refused because the author's daily budget could not cover them.",
	})
	m.Requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "owed_http_requests_total", Help: "HTTP requests by method, route and status.",
	}, []string{"method", "route", "status"})
	m.RequestLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "owed_http_request_seconds", Help: "HTTP request latency by method and route.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 3, 10),
	}, []string{"method", "route"})
	m.Backfill = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "owed_backfill", Help: "Backfill queue state: rows_per_minute, pending, rate_limited (1 while a rate limit holds).",
	}, []string{"what"})
	m.Deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "owed_webhook_deliveries_total", Help: "Webhook delivery attempts by outcome.",
	}, []string{"outcome"})
	m.Pruned = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "owed_pruned_rows_total", Help: "Rows the retention pruner deleted, by table.",
	}, []string{"table"})
	m.OldestKept = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "owed_retention_oldest_seconds", Help: "Age of the oldest row the retention kept, by table, as of the last prune on this replica.",
	}, []string{"table"})
	m.ModelBreaker = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "owed_model_breaker_state", Help: "The model breaker's state as this process last read it: 1 for the current one of closed, open, probing.",
	}, []string{"state"})
	m.ModelBreaker.WithLabelValues("closed").Set(1)
	m.ModelBreaker.WithLabelValues("open").Set(0)
	m.ModelBreaker.WithLabelValues("probing").Set(0)
	m.ModelInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "owed_model_inflight", Help: "Model calls this process's jobs are asking now (a score's three runs count three), at most OWED_MODEL_CONCURRENCY.",
	})
	m.ShadowCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "owed_shadow_calls_total", Help: "The candidate's shadow calls by task (screen, score) and outcome (recorded, failed, limit, gone, released).",
	}, []string{"task", "outcome"})
	m.Registry.MustRegister(m.Attempts, m.ModelLatency, m.BudgetRefusals, m.Requests, m.RequestLatency,
		m.Backfill, m.Deliveries, m.Pruned, m.OldestKept, m.ModelBreaker, m.ModelInFlight, m.ShadowCalls,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Drift = newDrift()
	m.Registry.MustRegister(m.Drift.collectors()...)
	if count != nil {
		m.Registry.MustRegister(&jobsCollector{count: count})
	}
	return m
}

var (
	jobsDesc = prometheus.NewDesc("owed_jobs", "Owed jobs by task and why (why=\"none\": due, new or running).",
		[]string{"task", "why"}, nil)
	oldestDesc = prometheus.NewDesc("owed_oldest_due_job_age_seconds",
		"How long the oldest due, unleased job has been due: grows when nothing runs the owed work.", nil, nil)
)

type jobsCollector struct {
	count func(ctx context.Context) (JobCounts, error)
}

func (c *jobsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobsDesc
	ch <- oldestDesc
}

func (c *jobsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.count(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(jobsDesc, err)
		return
	}
	for k, n := range counts.ByTaskWhy {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	age := 0.0
	if counts.HasOldestDueAge {
		age = counts.OldestDueAge.Seconds()
	}
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age)
}
