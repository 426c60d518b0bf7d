package http

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// boundsCollector exports, at each scrape, what the gateway's per-key
// structures hold: the read caches' answers, refusals and bytes, and each
// limiter's spending buckets (admin_failures: addresses with recently
// refused operator tokens). Each is bounded (readcache.go, limit.go: the limiters are
// tables of a fixed size); the gauges let an operator, and the attack
// suite, see them stay so under a flood.
type boundsCollector struct {
	reads      *reads
	limits     *limits
	adminFails *authFailures
}

var (
	cacheEntriesDesc = prometheus.NewDesc("onsale_gateway_read_cache_entries",
		"Entries of the public reads' caches, by cache (events, layouts, counts, bits) and kind (answer, refusal).", []string{"cache", "kind"}, nil)
	cacheBytesDesc = prometheus.NewDesc("onsale_gateway_read_cache_bytes",
		"Bytes of the answers the public reads' caches keep, by cache.", []string{"cache"}, nil)
	limiterKeysDesc = prometheus.NewDesc("onsale_gateway_limiter_keys",
		"Buckets of each limiter's fixed table that are spending (not full), by limit: about two per client address or queue token spending now (admin_failures: addresses).", []string{"limit"}, nil)
)

func (c *boundsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cacheEntriesDesc
	ch <- cacheBytesDesc
	ch <- limiterKeysDesc
}

func (c *boundsCollector) Collect(ch chan<- prometheus.Metric) {
	for name, rc := range map[string]*readCache{"events": c.reads.events, "layouts": c.reads.layouts, "counts": c.reads.counts, "bits": c.reads.bits} {
		a, r, b := rc.size()
		ch <- prometheus.MustNewConstMetric(cacheEntriesDesc, prometheus.GaugeValue, float64(a), name, "answer")
		ch <- prometheus.MustNewConstMetric(cacheEntriesDesc, prometheus.GaugeValue, float64(r), name, "refusal")
		ch <- prometheus.MustNewConstMetric(cacheBytesDesc, prometheus.GaugeValue, float64(b), name)
	}
	l, now := c.limits, time.Now()
	for name, lim := range map[string]*limiter{"join": l.join, "anon": l.anon, "token": l.token, "read": l.read, "api": l.api, "webhook": l.webhook, "page": l.page} {
		ch <- prometheus.MustNewConstMetric(limiterKeysDesc, prometheus.GaugeValue, float64(lim.size(now)), name)
	}
	ch <- prometheus.MustNewConstMetric(limiterKeysDesc, prometheus.GaugeValue, float64(c.adminFails.size()), "admin_failures")
}
