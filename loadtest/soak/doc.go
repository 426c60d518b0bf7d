// Package soak watches services for growth that has no bound during a long
// run of steady traffic (`make soak`, loadtest/cmd/soak): it samples each
// service's heap in use and goroutines from its Prometheus /metrics every
// few seconds, prints and writes the curves, and judges each curve by one
// stated rule.
//
// Where things live:
//
//   - growth.go: the rule (what "grows without bound" means) and its
//     tolerances, in one place;
//   - sample.go: the sampler (scraping /metrics) and the rounds it keeps;
//   - print.go: the curves as text (start, middle, end; a table over time)
//     and as CSV.
//
// The traffic is loadtest/crowd's; the stack loadtest/stack's (started by
// deploy/local/soak.sh). This package only measures and judges.
package soak
