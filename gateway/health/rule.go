package health

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// The rule: how fast the line is let in while the core is unwell.
//
// The operators' dial, new_users_per_minute, is what the core was sized for
// (seed 001: admit rate = concurrent shoppers the booking tier serves /
// checkout time). When the core cannot serve that many (a PostgreSQL
// failover, a core killed or frozen, a database that slows down), every fan
// let in spends their session watching holds fail while it ticks away,
// and then all of them hit the core at once when it comes back. So every
// gateway lets the line in at
//
//	effective rate = dial x factor,   factor in [Floor, 1]
//
// where factor is one number shared by every gateway through Redis (one
// small hash, health.lua in gateway/redis) and moved by additive increase,
// multiplicative decrease (AIMD, TCP's congestion rule, which converges to
// the capacity from any start and shares it fairly):
//
//   - Each gateway judges each Window (1 s of the Redis server's clock, the
//     same windows on every gateway) from what it saw of the core
//     (Rule.Judge): its proxied booking calls (holds above all) and its
//     readiness probes (GET /readyz, every ProbeEvery, so a window has
//     evidence even when no fan is holding).
//   - Each gateway sends its verdict on window k as soon as it sees k
//     close (its next tick), and Redis tallies the verdicts on k while k + 1
//     lasts. Then k is settled once, by a majority of the gateways that
//     judged it: bad if the bad verdicts are as many as the good ones or
//     more (a tie goes to caution), good if the good ones are more. A bad
//     window multiplies the factor by Decrease (0.5), a good one adds
//     Increase (0.05: the dial's 5%); either at most once per window
//     however many gateways judged it: three gateways that see the same
//     bad second decrease once, not three times.
//   - Why a majority of verdicts. A core that is unwell is unwell for every
//     gateway (the balancer spreads fans over them all), so they all judge
//     the window bad; a gateway alone in calling it bad is most likely
//     seeing its own trouble (its link to the core, a probe path broken),
//     and once a single bad verdict halved the factor, such a gateway held
//     the whole fleet at the floor. Pooling every gateway's counts in Redis
//     and judging once would also weigh each gateway by its traffic, but it
//     moves Judge into Lua (a fleet-wide p90 needs the latencies or counts
//     against the threshold); the majority keeps the rule here and costs
//     one window of delay (a window is settled when the next one ends: the
//     factor starts falling two windows after the core does). With two
//     gateways a tie is bad, so one unhealthy gateway of two still holds the
//     factor down: run three or more.
//   - A gateway that saw nothing (no call answered, no probe done) says
//     nothing: it never pushes the factor up on no evidence. Nor does one
//     whose window was too thin to call bad but not clean either (a share
//     of failures over the threshold among fewer than MinCalls, a hold over
//     HoldP90 among fewer than MinHolds): a good window is one with
//     evidence and none against.
//
// Why these numbers (each can be set, ONSALE_HEALTH_*; the same on every
// gateway):
//
//   - Window 1 s: ten ticks (a window must be three ticks or more, so the
//     verdicts reach Redis while their window is the one just closed);
//     long enough for a hold p90 when the core is
//     busy (the seeds' ~200 hold writes a second), short beside the faults
//     it reacts to (a Patroni failover takes about 10 s here, a killed core
//     leaves the balancer in about 1 s).
//   - Decrease 0.5: from the dial to the floor in four bad windows (five
//     seconds with the settling delay), well inside a PostgreSQL failover, so the rest of it admits at a trickle; a
//     gentler cut (0.8) would spend most of the failover still admitting.
//   - Increase 0.05 a window: from the floor back to the dial in 18 s
//     without an operator. Gentle because the feedback lags: a fan let in
//     now holds seats tens of seconds later, so a fast climb would overshoot
//     before the holds show it; after an outage the core is usually back to
//     its old capacity, so 18 s is not long to wait. If it is not (one core
//     of two left), the climb stops at the first slow window and halves:
//     AIMD's sawtooth under the capacity.
//   - Floor 0.1: admission never stops on this signal alone; only the
//     operators pause a sale. Recovery does not need the trickle (the probe
//     sees it), but a wrong verdict (a probe path broken, a threshold set
//     too tight, a gateway cut off from a healthy core) must not be able to
//     halt a sale, and the trickle keeps real holds flowing as evidence of
//     what the core can do. It costs little: at 10% of the dial a 10 s
//     outage admits a sixtieth of a minute's fans, who lose about 10 s of a
//     10-minute session. Floor 0 stops admission during an outage instead.
//   - Bad when, in one window:
//     a. nothing the core was asked succeeded and something failed (the
//     probe alone can say it): "core unreachable", "core 503s 100%";
//     b. failures (503, other 5xx, no answer) are FailShare (10%) or more of
//     at least MinCalls (5) calls and probes: "core 503s 12%". A healthy
//     core answers no 5xx at all (it fails closed with 503 only when its
//     database is gone; the gateway answers busy only when all 512
//     connections to it are taken), so 10% is far above noise and far
//     below an outage;
//     c. the p90 of at least MinHolds (5) holds is HoldP90 (1 s) or more:
//     "core hold p90 1.8 s". A hold is one conditional UPDATE, milliseconds
//     when the core is well; past a second it is queueing for connections
//     or the database is stalling, and fans feel the seat picker hang.
//     Payments do not count toward latency: they wait on the provider.
//   - Not failures: 4xx (the core answered: seats taken, limits), and 502
//     provider_unavailable (the payment provider is down, not the core;
//     fewer fans in would not bring it back).
//
// What is lost at a Redis failover: the hash is one key (on a Redis
// Cluster, one master's). While it cannot be reached each gateway keeps
// the factor it last read; if it comes back empty (asynchronous replication
// lost it) the first gateway to write restores its own last factor (Seed),
// so a lost key does not jump to the dial.

// Rule is the thresholds and steps above; DefaultRule gives the defaults.
type Rule struct {
	Window     time.Duration // the judging window, Redis-clock aligned
	ProbeEvery time.Duration // readiness probe interval (0: Window / 2)
	HoldP90    time.Duration // a window whose hold p90 reaches this is bad
	MinHolds   int           // holds needed for the p90 to count
	FailShare  float64       // failures / (calls + probes) at which a window is bad
	MinCalls   int           // calls and probes needed for the share to count
	Decrease   float64       // factor multiplied by this per bad window
	Increase   float64       // factor raised by this per good window
	Floor      float64       // the factor never goes below this
}

// DefaultRule is the rule with the defaults argued above.
func DefaultRule() Rule {
	return Rule{Window: time.Second, HoldP90: time.Second, MinHolds: 5, FailShare: 0.10, MinCalls: 5,
		Decrease: 0.5, Increase: 0.05, Floor: 0.1}
}

// Validate says which setting is out of range.
func (r Rule) Validate() error {
	switch {
	case r.Window < 10*time.Millisecond:
		return errors.New("the health window must be 10ms or more")
	case r.ProbeEvery < 0:
		return errors.New("the probe interval cannot be negative")
	case r.HoldP90 <= 0:
		return errors.New("the hold p90 threshold must be positive")
	case !(r.FailShare > 0 && r.FailShare <= 1):
		return errors.New("the failure share must be over 0 and at most 1")
	case !(r.Decrease > 0 && r.Decrease < 1):
		return errors.New("the decrease factor must be between 0 and 1 (exclusive)")
	case !(r.Increase > 0 && r.Increase <= 1):
		return errors.New("the increase step must be over 0 and at most 1")
	case !(r.Floor >= 0 && r.Floor < 1):
		return errors.New("the floor must be at least 0 and under 1")
	}
	return nil
}

// probeEvery is the probe interval.
func (r Rule) probeEvery() time.Duration {
	if r.ProbeEvery > 0 {
		return r.ProbeEvery
	}
	return r.Window / 2
}

// Kind is what a call to the core was, for its evidence.
type Kind uint8

// Kinds of calls; KindNone is not evidence.
const (
	KindNone    Kind = iota
	KindHold         // POST /v1/events/{id}/holds: failures and latency
	KindBooking      // /v1/holds/..., /v1/bookings/... (pay, confirm, extend, release, read): failures
	KindProbe        // GET /readyz of the gateway's own
)

// Outcome is what the core did with a call.
type Outcome uint8

// Outcomes.
const (
	OK          Outcome = iota // answered: 2xx to 4xx, or 502 provider_unavailable
	Unavailable                // 503: the core failing closed, or busy (every connection taken)
	Failed                     // another 5xx: a bug, or a balancer's 502/504 with no core behind it
	Unreachable                // no answer: refused, reset, timed out
	nOutcomes
)

// Window is one window's evidence as a gateway saw it.
type Window struct {
	ID     int64           // Redis time / Window
	Calls  [nOutcomes]int  // booking calls (holds included) by outcome
	Probes [nOutcomes]int  // readiness probes by outcome
	holds  []time.Duration // latencies of answered holds, at most maxHolds
	HoldsN int             // answered holds (all, not only those kept)
}

// maxHolds bounds the latencies kept per window (a p90 of the first few
// thousand is as good as of all).
const maxHolds = 4096

func (w *Window) add(k Kind, o Outcome, took time.Duration) {
	switch k {
	case KindProbe:
		w.Probes[o]++
	case KindHold, KindBooking:
		w.Calls[o]++
		if k == KindHold && o == OK {
			w.HoldsN++
			if len(w.holds) < maxHolds {
				w.holds = append(w.holds, took)
			}
		}
	}
}

// HoldP90 is the 90th percentile of the window's answered holds (0: none).
func (w *Window) HoldP90() time.Duration {
	if len(w.holds) == 0 {
		return 0
	}
	s := slices.Clone(w.holds)
	slices.Sort(s)
	return s[int(math.Ceil(0.9*float64(len(s))))-1]
}

// Verdict is a window's judgement.
type Verdict struct {
	State  State
	Reason string // why a window is bad: "core hold p90 1.8 s"
}

// State is a verdict's state.
type State string

// Verdict states.
const (
	Good State = "good"
	Bad  State = "bad"
	None State = "none" // no evidence: the factor is only read
)

// Judge is the rule's verdict on one window (see the comment at the top).
func (r Rule) Judge(w *Window) Verdict {
	var ok, failed, total int
	var by [nOutcomes]int
	for o := range nOutcomes {
		n := w.Calls[o] + w.Probes[o]
		by[o] = n
		total += n
		if o == OK {
			ok += n
		} else {
			failed += n
		}
	}
	switch {
	case total == 0:
		return Verdict{State: None}
	case ok == 0:
		return Verdict{Bad, failureReason(by, failed, total)}
	case total >= r.MinCalls && float64(failed) >= r.FailShare*float64(total):
		return Verdict{Bad, failureReason(by, failed, total)}
	}
	p := w.HoldP90()
	if w.HoldsN >= r.MinHolds && p >= r.HoldP90 {
		return Verdict{Bad, "core hold p90 " + seconds(p)}
	}
	// Too little evidence to call the window bad is not evidence that it
	// was good: a share of failures over the threshold among too few calls,
	// or a slow hold among too few holds, leaves the factor where it is.
	if float64(failed) >= r.FailShare*float64(total) || (w.HoldsN < r.MinHolds && w.slowest() >= r.HoldP90) {
		return Verdict{State: None}
	}
	return Verdict{State: Good}
}

// slowest is the slowest answered hold kept.
func (w *Window) slowest() time.Duration {
	var m time.Duration
	for _, d := range w.holds {
		m = max(m, d)
	}
	return m
}

// failureReason names the commonest failure and the share of all failures.
func failureReason(by [nOutcomes]int, failed, total int) string {
	worst := Unavailable
	for _, o := range []Outcome{Failed, Unreachable} {
		if by[o] > by[worst] {
			worst = o
		}
	}
	share := fmt.Sprintf("%d%%", int(math.Round(100*float64(failed)/float64(total))))
	switch worst {
	case Unreachable:
		if failed == total {
			return "core unreachable"
		}
		return "core not answering " + share
	case Failed:
		return "core 5xx " + share
	}
	return "core 503s " + share
}

// seconds writes a latency as an operator reads it: "850 ms", "1.8 s".
func seconds(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}
