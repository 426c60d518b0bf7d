package http

import (
	"strconv"

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
)

func (c *rateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- rateDesc
	ch <- factorDesc
	ch <- windowsDesc
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
	}
	good, bad, none := c.health.Windows()
	ch <- prometheus.MustNewConstMetric(windowsDesc, prometheus.CounterValue, float64(good), "good")
	ch <- prometheus.MustNewConstMetric(windowsDesc, prometheus.CounterValue, float64(bad), "bad")
	ch <- prometheus.MustNewConstMetric(windowsDesc, prometheus.CounterValue, float64(none), "none")
}
