package http

import (
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onsale/onsale/gateway/health"
	"github.com/onsale/onsale/gateway/room"
)

// rateCollector exports, at each scrape, the admission rate against the
// dial per event and the core-health factor behind the difference, so a
// dashboard shows what the console shows: how far below the dial the line
// moves, and why (onsale_gateway_core_windows_total: this gateway's bad
// windows).
type rateCollector struct {
	room   *room.Room
	health *health.Monitor
}

var (
	rateDesc = prometheus.NewDesc("onsale_gateway_admission_rate_per_minute",
		"Places let in a minute as of the last tick: the dial (new_users_per_minute), and the effective rate (the dial times the core-health factor).",
		[]string{"event", "rate"}, nil)
	factorDesc = prometheus.NewDesc("onsale_gateway_admission_factor",
		"Share of the rate dial the core's health allows, shared by every gateway (1: the dial).", nil, nil)
	windowsDesc = prometheus.NewDesc("onsale_gateway_core_windows_total",
		"Windows this gateway judged the core's health in, by verdict (good, bad, none: no evidence).", []string{"verdict"}, nil)

	// The waiting room's numbers per event, as of the last tick (every
	// gateway reports the same shared numbers: take max, not sum).
	queueDesc = prometheus.NewDesc("onsale_gateway_queue_length",
		"Places handed out in the event's line (before onsale: the pre-queue).", []string{"event"}, nil)
	queuedDesc = prometheus.NewDesc("onsale_gateway_queued",
		"Fans in line not yet let in.", []string{"event"}, nil)
	admittedDesc = prometheus.NewDesc("onsale_gateway_admitted_per_minute",
		"Places claimed over the last minute (fans let in).", []string{"event"}, nil)
	activeDesc = prometheus.NewDesc("onsale_gateway_active_sessions",
		"Fans shopping now (admitted, session not ended).", []string{"event"}, nil)
	offersDesc = prometheus.NewDesc("onsale_gateway_open_offers",
		"Places offered and not yet claimed.", []string{"event"}, nil)
	pausedDesc = prometheus.NewDesc("onsale_gateway_paused",
		"1 while the event's admission is paused.", []string{"event"}, nil)
	boundDesc = prometheus.NewDesc("onsale_gateway_line_bound",
		"What lets the line in now: 1 on the series of the bound (rate, active_cap, paused).", []string{"event", "bound"}, nil)
	sellingDesc = prometheus.NewDesc("onsale_gateway_selling",
		"1 while the event's line is on sale: past onsale_at, before closes_at (the pre-queue and a closed line are 0).", []string{"event"}, nil)
	drainDesc = prometheus.NewDesc("onsale_gateway_drain_seconds",
		"Seconds until the line drains at its bound (-1: it does not drain, paused or nothing lets fans in).", []string{"event"}, nil)
)

func (c *rateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- rateDesc
	ch <- factorDesc
	ch <- windowsDesc
	for _, d := range []*prometheus.Desc{queueDesc, queuedDesc, admittedDesc, activeDesc, offersDesc, pausedDesc, boundDesc, drainDesc, sellingDesc} {
		ch <- d
	}
}

func (c *rateCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(factorDesc, prometheus.GaugeValue, c.room.Factor())
	for id, v := range c.room.Views() {
		if v.Fetched.IsZero() {
			continue
		}
		ev := strconv.FormatInt(id, 10)
		ch <- prometheus.MustNewConstMetric(rateDesc, prometheus.GaugeValue, float64(v.Dials.NewUsersPerMinute), ev, "dial")
		ch <- prometheus.MustNewConstMetric(rateDesc, prometheus.GaugeValue, v.Rate(), ev, "effective")
		tk := v.Tick
		queued := max(0, tk.Queue-tk.Serving)
		ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(tk.Queue), ev)
		ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(queued), ev)
		ch <- prometheus.MustNewConstMetric(admittedDesc, prometheus.GaugeValue, float64(tk.ClaimsPerMinute), ev)
		ch <- prometheus.MustNewConstMetric(activeDesc, prometheus.GaugeValue, float64(tk.Active), ev)
		ch <- prometheus.MustNewConstMetric(offersDesc, prometheus.GaugeValue, float64(tk.Offers), ev)
		paused := 0.0
		if v.Dials.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, paused, ev)
		now := time.Now()
		selling := 0.0
		if !now.Before(v.Dials.OnsaleAt) && (v.Dials.ClosesAt.IsZero() || now.Before(v.Dials.ClosesAt)) {
			selling = 1
		}
		ch <- prometheus.MustNewConstMetric(sellingDesc, prometheus.GaugeValue, selling, ev)
		bound, perMinute := lineBound(v, time.Now())
		for _, b := range []string{BoundRate, BoundActiveCap, BoundPaused} {
			on := 0.0
			if b == bound {
				on = 1
			}
			ch <- prometheus.MustNewConstMetric(boundDesc, prometheus.GaugeValue, on, ev, b)
		}
		drain := -1.0
		if perMinute > 0 {
			drain = math.Ceil(float64(queued) / perMinute * 60)
		}
		ch <- prometheus.MustNewConstMetric(drainDesc, prometheus.GaugeValue, drain, ev)
	}
	good, bad, none := c.health.Windows()
	ch <- prometheus.MustNewConstMetric(windowsDesc, prometheus.CounterValue, float64(good), "good")
	ch <- prometheus.MustNewConstMetric(windowsDesc, prometheus.CounterValue, float64(bad), "bad")
	ch <- prometheus.MustNewConstMetric(windowsDesc, prometheus.CounterValue, float64(none), "none")
}
