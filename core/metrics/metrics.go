// Package metrics holds the core's Prometheus collectors on a registry of
// its own, so several cores (in tests) never share counters.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the core's collectors.
type Metrics struct {
	Registry *prometheus.Registry

	// Holds counts hold attempts by outcome: created, seats_taken,
	// sold_out, limit_exceeded, invalid, unavailable, error.
	Holds *prometheus.CounterVec
	// Requests observes request latency by route pattern and status code.
	Requests *prometheus.HistogramVec
	// SweepDuration observes each sweep; SweepLag is how long the oldest
	// hold of the last sweep had been expired; Swept counts holds and seats.
	SweepDuration prometheus.Histogram
	SweepLag      prometheus.Gauge
	SweptHolds    prometheus.Counter
	SweepErrors   prometheus.Counter
	// CancelStragglers counts confirmed bookings of cancelled shows the
	// sweeper's backstop moved to refund.
	CancelStragglers prometheus.Counter

	// OutboxJobs counts outbox job runs by kind and result (done, retry, dead).
	OutboxJobs *prometheus.CounterVec
	// ProviderMisconfigured counts money jobs the provider refused for a
	// reason of the core's own (core.ProviderMisconfigured: a wrong API
	// key, 401 or 403, another account's, 404), by job kind and HTTP
	// status. Any increase is an alert: every capture, refund and void
	// fails until an operator fixes the configuration.
	ProviderMisconfigured *prometheus.CounterVec
	// ProviderContradictions counts settlements in which the provider
	// re-reported a settled booking's own payment with another amount or
	// currency (core.OutcomeOwnPaymentMismatch), by source (webhook,
	// reconcile). Nothing is refunded or changed for it: any increase is
	// an alert, for an operator to settle with the provider.
	ProviderContradictions *prometheus.CounterVec
	// Webhooks counts provider webhooks by outcome.
	Webhooks *prometheus.CounterVec
	// WebhookLag observes how long after the provider made an event its
	// webhook reached the core (the event's created time: whole seconds).
	WebhookLag prometheus.Histogram
	// Reconciled counts bookings the reconciler settled, by outcome.
	Reconciled *prometheus.CounterVec
	// SignIns counts sign-in requests by step (code, verify) and outcome
	// (sent, verified, code_invalid, rate_limited, invalid, unavailable, error).
	SignIns *prometheus.CounterVec
}

// New registers the collectors, with Go runtime and process collectors.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		Holds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "onsale_core_holds_total", Help: "Hold attempts by outcome.",
		}, []string{"outcome"}),
		Requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "onsale_core_http_request_duration_seconds",
			Help:    "HTTP request latency by route and status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route", "code"}),
		SweepDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "onsale_core_sweep_duration_seconds", Help: "Duration of each sweep of expired holds.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 5},
		}),
		SweepLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "onsale_core_sweeper_lag_seconds",
			Help: "How long the oldest hold returned by the last sweep had been expired.",
		}),
		SweptHolds:  prometheus.NewCounter(prometheus.CounterOpts{Name: "onsale_core_swept_holds_total", Help: "Expired GA holds whose tickets the sweeper returned to sale (an expired seated hold needs no sweep)."}),
		SweepErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "onsale_core_sweep_errors_total", Help: "Sweeps that failed."}),
		CancelStragglers: prometheus.NewCounter(prometheus.CounterOpts{Name: "onsale_core_cancel_stragglers_total",
			Help: "Confirmed bookings of cancelled shows the sweeper moved to refund after the cancellation (committed as it ran)."}),
		OutboxJobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "onsale_core_outbox_jobs_total", Help: "Outbox job runs by kind and result.",
		}, []string{"kind", "result"}),
		ProviderMisconfigured: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "onsale_core_provider_misconfigured_total",
			Help: "Money jobs the payment provider refused for the core's configuration (wrong API key, ...), by kind and status: alert on any.",
		}, []string{"kind", "status"}),
		ProviderContradictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "onsale_core_provider_contradictions_total",
			Help: "Settled bookings whose own payment the provider re-reported with another amount or currency, by source: alert on any.",
		}, []string{"source"}),
		Webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "onsale_core_payment_webhooks_total", Help: "Payment webhooks by outcome.",
		}, []string{"outcome"}),
		Reconciled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "onsale_core_reconciled_bookings_total", Help: "Pending bookings settled by the reconciler, by outcome.",
		}, []string{"outcome"}),
		SignIns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "onsale_core_signins_total", Help: "Sign-in requests by step (code, verify) and outcome.",
		}, []string{"step", "outcome"}),
	}
	m.WebhookLag = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "onsale_core_webhook_delivery_lag_seconds",
		Help:    "Time from the provider's event (its created time, to the second) to its webhook's arrival at the core.",
		Buckets: []float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1800}})
	r.MustRegister(m.Holds, m.Requests, m.SweepDuration, m.SweepLag, m.SweptHolds, m.SweepErrors, m.CancelStragglers,
		m.OutboxJobs, m.ProviderMisconfigured, m.ProviderContradictions, m.Webhooks, m.WebhookLag, m.Reconciled, m.SignIns,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// CountSeatHolds exports, as onsale_core_seat_holds_total{decided_by},
// how seated holds (named seats, best available) were decided: refused
// from the core's memory of taken seats without a statement (cache), or
// passed to the database (postgres). counts reads the two counters
// (seatmap.Taken).
func (m *Metrics) CountSeatHolds(counts func() (cache, postgres int64)) {
	for i, by := range []string{"cache", "postgres"} {
		m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "onsale_core_seat_holds_total",
			Help:        "Seated holds (named seats, best available) by what decided them: cache (refused without a statement) or postgres.",
			ConstLabels: prometheus.Labels{"decided_by": by},
		}, func() float64 {
			c, p := counts()
			return float64([]int64{c, p}[i])
		}))
	}
}

// PoolStats is what CountPool reads of a connection pool (pgxpool.Stat's
// figures).
type PoolStats struct {
	Acquired, Idle, Total, Max int32
	// Acquires counts acquires that got a connection; Waits those of them
	// that waited for one (none was idle); Canceled those that gave up
	// waiting (their request's deadline: a hold answered 503 while queued).
	Acquires, Waits, Canceled int64
	AcquireTime               time.Duration // time the successful acquires took, waits included
	WaitTime                  time.Duration // time the waiting acquires waited
}

// CountPool exports a database connection pool's figures, labelled by
// pool (writes: holds, payments and every write; reads: the catalog's),
// from one reading of stat per scrape. A hold that queues for a connection
// waits here before PostgreSQL sees it: the rate of
// onsale_core_db_pool_wait_seconds_total over that of
// onsale_core_db_pool_acquires_total is the mean wait of a statement, and
// any rise of onsale_core_db_pool_canceled_acquires_total is requests that
// ran out of time in the queue.
func (m *Metrics) CountPool(pool string, stat func() PoolStats) {
	c := &poolCollector{stat: stat}
	for _, f := range poolFigures {
		c.descs = append(c.descs, prometheus.NewDesc("onsale_core_db_pool_"+f.name, f.help, nil, prometheus.Labels{"pool": pool}))
	}
	m.Registry.MustRegister(c)
}

// poolCollector reads a pool's figures once per scrape.
type poolCollector struct {
	stat  func() PoolStats
	descs []*prometheus.Desc // poolFigures', labelled with the pool
}

var poolFigures = []struct {
	name, help string
	kind       prometheus.ValueType
	of         func(PoolStats) float64
}{
	{"acquired_connections", "Connections in use, by pool.", prometheus.GaugeValue, func(s PoolStats) float64 { return float64(s.Acquired) }},
	{"idle_connections", "Idle connections, by pool.", prometheus.GaugeValue, func(s PoolStats) float64 { return float64(s.Idle) }},
	{"connections", "Open connections (in use, idle and being opened), by pool.", prometheus.GaugeValue, func(s PoolStats) float64 { return float64(s.Total) }},
	{"max_connections", "The pool's size (ONSALE_DB_MAX_CONNS, ONSALE_DB_READ_MAX_CONNS).", prometheus.GaugeValue, func(s PoolStats) float64 { return float64(s.Max) }},
	{"acquires_total", "Connections acquired, by pool.", prometheus.CounterValue, func(s PoolStats) float64 { return float64(s.Acquires) }},
	{"waits_total", "Acquires that waited for a connection (none was idle), by pool.", prometheus.CounterValue, func(s PoolStats) float64 { return float64(s.Waits) }},
	{"canceled_acquires_total", "Acquires that gave up waiting for a connection (the request's deadline), by pool.", prometheus.CounterValue, func(s PoolStats) float64 { return float64(s.Canceled) }},
	{"acquire_seconds_total", "Time the acquires took, waits included, by pool.", prometheus.CounterValue, func(s PoolStats) float64 { return s.AcquireTime.Seconds() }},
	{"wait_seconds_total", "Time acquires waited for a connection, by pool.", prometheus.CounterValue, func(s PoolStats) float64 { return s.WaitTime.Seconds() }},
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stat()
	for i, f := range poolFigures {
		ch <- prometheus.MustNewConstMetric(c.descs[i], f.kind, f.of(s))
	}
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}
