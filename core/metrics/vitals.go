package metrics

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onsale/onsale/core"
)

// The business's figures (core.Vitals), read from the database at a
// scrape, at most once per vitalsMaxAge whatever the scrapers do.
var (
	outboxPendingDesc = prometheus.NewDesc("onsale_core_outbox_pending_jobs", "Outbox jobs waiting to run, by kind.", []string{"kind"}, nil)
	outboxDeadDesc    = prometheus.NewDesc("onsale_core_outbox_dead_jobs", "Outbox jobs given up after their attempts, by kind (money jobs never give up).", []string{"kind"}, nil)
	outboxOldestDesc  = prometheus.NewDesc("onsale_core_outbox_oldest_pending_seconds", "Age of the oldest pending outbox job, by kind (0: none).", []string{"kind"}, nil)
	refundsDueDesc    = prometheus.NewDesc("onsale_core_refunds_due", "Refunds and voids not yet carried out (pending refund, refund_stray and void jobs).", nil, nil)
	paymentsDesc      = prometheus.NewDesc("onsale_core_payments_pending", "Bookings waiting for their payment's outcome.", nil, nil)
	paymentsOldDesc   = prometheus.NewDesc("onsale_core_payment_pending_oldest_seconds", "Age of the oldest booking waiting for its payment (0: none).", nil, nil)
	seatsDesc         = prometheus.NewDesc("onsale_core_seats", "A live show's seats (GA: tickets) by state: available, held, sold; and its capacity.", []string{"event", "state"}, nil)
	holdsActiveDesc   = prometheus.NewDesc("onsale_core_holds_active", "A live show's holds still running.", []string{"event"}, nil)
	vitalsUpDesc      = prometheus.NewDesc("onsale_core_vitals_up", "1 when the business figures above were read (0: the database did not answer them).", nil, nil)
)

const vitalsMaxAge = 10 * time.Second

type vitalsCollector struct {
	read func(context.Context) (*core.Vitals, error)

	mu     sync.Mutex
	last   *core.Vitals
	failed bool
	at     time.Time
}

// CountVitals exports the business's figures read by read (core/postgres).
func (m *Metrics) CountVitals(read func(context.Context) (*core.Vitals, error)) {
	m.Registry.MustRegister(&vitalsCollector{read: read})
}

func (c *vitalsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{outboxPendingDesc, outboxDeadDesc, outboxOldestDesc, refundsDueDesc, paymentsDesc,
		paymentsOldDesc, seatsDesc, holdsActiveDesc, vitalsUpDesc} {
		ch <- d
	}
}

func (c *vitalsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if c.last == nil || time.Since(c.at) > vitalsMaxAge {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		v, err := c.read(ctx)
		cancel()
		c.at = time.Now()
		if err != nil {
			v = &core.Vitals{} // a failure is kept as long as a reading: an outage does not stack scrapes
			c.failed = true
		} else {
			c.failed = false
		}
		c.last = v
	}
	v := c.last
	if c.failed {
		v = nil
	}
	c.mu.Unlock()
	if v == nil {
		ch <- prometheus.MustNewConstMetric(vitalsUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(vitalsUpDesc, prometheus.GaugeValue, 1)
	due := 0
	for _, o := range v.Outbox {
		ch <- prometheus.MustNewConstMetric(outboxPendingDesc, prometheus.GaugeValue, float64(o.Pending), o.Kind)
		ch <- prometheus.MustNewConstMetric(outboxDeadDesc, prometheus.GaugeValue, float64(o.Dead), o.Kind)
		ch <- prometheus.MustNewConstMetric(outboxOldestDesc, prometheus.GaugeValue, o.OldestPending.Seconds(), o.Kind)
		if o.Kind == string(core.JobRefund) || o.Kind == string(core.JobVoid) || o.Kind == string(core.JobStrayRefund) {
			due += o.Pending
		}
	}
	ch <- prometheus.MustNewConstMetric(refundsDueDesc, prometheus.GaugeValue, float64(due))
	ch <- prometheus.MustNewConstMetric(paymentsDesc, prometheus.GaugeValue, float64(v.PaymentsPending))
	ch <- prometheus.MustNewConstMetric(paymentsOldDesc, prometheus.GaugeValue, v.OldestPaymentPending.Seconds())
	for _, e := range v.Events {
		ev := strconv.FormatInt(e.ID, 10)
		for state, n := range map[string]int{"capacity": e.Capacity, "available": e.Available, "held": e.Held, "sold": e.Sold} {
			ch <- prometheus.MustNewConstMetric(seatsDesc, prometheus.GaugeValue, float64(n), ev, state)
		}
		ch <- prometheus.MustNewConstMetric(holdsActiveDesc, prometheus.GaugeValue, float64(e.HoldsActive), ev)
	}
}
