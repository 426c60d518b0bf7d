// Package faults injects faults into a running sale, on the crowd's
// timeline ("40 s after onsale, kill -9 the PostgreSQL primary"), records
// when each was injected and when its target was back, and measures what
// each did to the sale as the crowd saw it: seconds of errors per endpoint
// and class, how long admission stopped while fans waited, that it resumed
// without anyone touching a dial, and the effective admission rate the
// gateways applied meanwhile.
//
// Where things live:
//
//   - faults.go: the faults' names, the timeline and what a fault records;
//   - runner.go: the runner and the targets it acts on (interfaces: the
//     topology's handles in cluster.go, fakes in the tests);
//   - paysim.go: the payment provider's outage, through the simulator's
//     control API;
//   - effect.go: what each fault did to the sale.
package faults

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The faults, by name (the -faults flag, FAULTS= of make demo).
const (
	// PGPrimary: kill -9 of the PostgreSQL primary (Patroni, postmaster,
	// backends) while holds and payments commit; Patroni promotes the
	// synchronous standby; the old primary is started again and rejoins as
	// a replica.
	PGPrimary = "pg-primary"
	// RedisMaster: kill -9 of the Redis master holding the sale's slot
	// ({evt:<id>}) while fans poll, join and claim; its replica takes over;
	// the old master is started again and rejoins as a replica.
	RedisMaster = "redis-master"
	// Core: kill -9 of one core, several times (Options.CoreKills), each
	// time started again after Options.CoreDown, while webhooks and refunds
	// are in flight.
	Core = "core"
	// Gateway: kill -9 of one gateway while fans poll through it; started
	// again after Options.GatewayDown.
	Gateway = "gateway"
	// FreezeCore: SIGSTOP of a core for Options.Freeze, longer than its
	// timeouts (its 20 s work deadline, HAProxy's checks), then SIGCONT: a
	// GC pause, or a partition as seen from outside.
	FreezeCore = "freeze-core"
	// ProviderDown: the payment provider down for Options.Outage: its API
	// answers 503 with Retry-After, webhooks wait and go out after.
	ProviderDown = "provider"
	// GatewaysRestart: every gateway stopped and started at once (a
	// rolling deploy gone wrong).
	GatewaysRestart = "gateways-restart"
)

// All is every fault, in the default timeline's order: the engines first,
// while holds and payments commit at their busiest and fans poll, join and
// claim; then every gateway at once, which is over in a second or two;
// then one core again and again while webhooks and refunds are in flight,
// one gateway, and the two longest (the provider's outage, a core frozen)
// last, so that a short sale still sees the rest.
var All = []string{PGPrimary, RedisMaster, GatewaysRestart, Core, Gateway, ProviderDown, FreezeCore}

// NeedsCluster says whether a fault needs the HA topology's handles (every
// fault but the provider's outage, which the simulator's control API
// injects in any topology).
func NeedsCluster(name string) bool { return name != ProviderDown }

// Step is one fault on the timeline: At after onsale.
type Step struct {
	Fault string
	At    time.Duration
}

func (s Step) String() string { return fmt.Sprintf("%s@%v", s.Fault, s.At) }

// Parse reads a list of faults: "all", or names separated by commas, each
// optionally with its time after onsale ("pg-primary@40s"). Faults without
// a time are placed first after onsale, then every gap after the previous
// one. The steps come back in time order.
func Parse(list string, first, gap time.Duration) ([]Step, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "none" {
		return nil, nil
	}
	if list == "all" {
		list = strings.Join(All, ",")
	}
	var steps []Step
	seen := map[string]bool{}
	next := first
	for _, item := range strings.Split(list, ",") {
		name, at, timed := strings.Cut(strings.TrimSpace(item), "@")
		if !slices.Contains(All, name) {
			return nil, fmt.Errorf("fault %q: not one of all, %s", name, strings.Join(All, ", "))
		}
		if seen[name] {
			return nil, fmt.Errorf("fault %q named twice", name)
		}
		seen[name] = true
		s := Step{Fault: name, At: next}
		if timed {
			d, err := time.ParseDuration(at)
			if err != nil || d < 0 {
				return nil, fmt.Errorf("fault %q: time %q: want a duration after onsale such as 40s", name, at)
			}
			s.At = d
		}
		next = s.At + gap
		steps = append(steps, s)
	}
	slices.SortStableFunc(steps, func(a, b Step) int { return int(a.At - b.At) })
	return steps, nil
}

// Event is one fault as injected.
type Event struct {
	Fault  string
	Target string    // what was hit: "pg1 (the primary)", "core1", "paysim"
	At     time.Time // injected (zero: never, see Err)
	// Back is when the service the target gave was back: a new primary
	// promoted, the replica promoted, the process answering its health
	// route again, the provider's API answering. Zero: not seen back.
	Back time.Time
	// Rejoined is when the victim itself was back in the topology (the old
	// primary streaming as a replica, the old master replicating); zero
	// when the fault has no such step.
	Rejoined time.Time
	Detail   string
	Err      string // what went wrong injecting it or bringing it back
}

// Down is how long the target was out (0 when never back).
func (e Event) Down() time.Duration {
	if e.Back.IsZero() || e.At.IsZero() {
		return 0
	}
	return e.Back.Sub(e.At)
}
