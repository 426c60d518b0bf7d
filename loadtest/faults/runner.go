package faults

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
)

// Cluster is the HA topology as the runner acts on it: members and nodes
// by name, processes by handle. cluster.go adapts loadtest/topology to it;
// the tests use fakes.
type Cluster interface {
	// PGPrimary is the name of the PostgreSQL member that is the primary.
	PGPrimary(ctx context.Context) (string, error)
	// KillPG kill -9s a member (Patroni, postmaster and every backend).
	KillPG(name string) error
	// WaitPGPrimary waits for a primary other than not and names it.
	WaitPGPrimary(ctx context.Context, not string) (string, error)
	// RestartPG starts a member again; it returns when it streams as a replica.
	RestartPG(ctx context.Context, name string) error

	// RedisMasterOf names the master holding key's slot.
	RedisMasterOf(ctx context.Context, key string) (string, error)
	KillRedis(name string) error
	// WaitRedisFailover waits until dead's replica is promoted and takes
	// writes, and names it.
	WaitRedisFailover(ctx context.Context, dead string) (string, error)
	// RestartRedis starts a node again; it returns when it has rejoined.
	RestartRedis(ctx context.Context, name string) error

	Cores() []Proc
	Gateways() []Proc
	// RestartGateways stops every gateway and starts every one again, at once.
	RestartGateways(ctx context.Context) error
}

// Proc is one app's process.
type Proc interface {
	Name() string
	Kill() error                     // SIGKILL; returns once it is gone
	Start(ctx context.Context) error // start again; returns once it answers its health route
	Signal(sig syscall.Signal) error // SIGSTOP, SIGCONT
	Ready(ctx context.Context) error // answers its health route now
}

// Provider is the payment provider's control (paysim.go).
type Provider interface {
	// Outage makes the API answer 503 from start to end; webhooks wait.
	Outage(ctx context.Context, start, end time.Time) error
	// Up says whether the API answers (not 503).
	Up(ctx context.Context) bool
	// Held is how many webhook deliveries wait to go out.
	Held(ctx context.Context) (int, error)
}

// Options are the faults' lengths; zero fields take their defaults.
type Options struct {
	CoreKills   int           // times the core fault kills its core; 0 = 3
	CoreGap     time.Duration // between its kills; 0 = 8 s
	CoreDown    time.Duration // how long a killed core stays down; 0 = 3 s
	GatewayDown time.Duration // how long the killed gateway stays down; 0 = 10 s
	Freeze      time.Duration // how long a core is frozen; 0 = 25 s
	Outage      time.Duration // the provider's outage; 0 = 30 s
	// Quiet is how long after a fault's target is back (or rejoined) the
	// next fault may come at the earliest, so that the first fault's
	// stragglers (a retry's backoff, HAProxy's rise) stay in its own
	// window; 0 = 3 s.
	Quiet time.Duration
	// Recover bounds each wait for a target to come back; 0 = 2 minutes.
	Recover time.Duration
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if o.CoreKills == 0 {
		o.CoreKills = 3
	}
	def(&o.CoreGap, 8*time.Second)
	def(&o.CoreDown, 3*time.Second)
	def(&o.GatewayDown, 10*time.Second)
	def(&o.Freeze, 25*time.Second)
	def(&o.Outage, 30*time.Second)
	def(&o.Quiet, 3*time.Second)
	def(&o.Recover, 2*time.Minute)
	return o
}

// Runner injects the faults of a timeline into a sale.
type Runner struct {
	Cluster  Cluster  // nil: the single topology (only the provider's outage)
	Provider Provider // nil: no provider fault
	Event    int64    // the sale's event (its Redis slot)
	Options  Options
	// Log, when set, is told of each fault once its target is back (or
	// could not be brought back).
	Log func(Event)

	mu     sync.Mutex
	events []Event
}

// Check says whether the runner can inject every step: an error names the
// first fault whose target it lacks.
func (r *Runner) Check(steps []Step) error {
	for _, s := range steps {
		switch {
		case s.Fault == ProviderDown && r.Provider == nil:
			return errors.New("fault provider: no payment simulator control")
		case NeedsCluster(s.Fault) && r.Cluster == nil:
			return fmt.Errorf("fault %s: needs the HA topology (-topology cluster)", s.Fault)
		case (s.Fault == Core || s.Fault == FreezeCore) && len(r.Cluster.Cores()) == 0,
			s.Fault == Gateway && len(r.Cluster.Gateways()) == 0:
			return fmt.Errorf("fault %s: the topology has none", s.Fault)
		}
	}
	return nil
}

// Run injects each step at onsale + its time, one after another: a step
// whose time has passed while the previous one recovered comes
// Options.Quiet after it instead, so that the effects stay apart. It stops
// when the steps are done or ctx ends (the steps not begun are left out);
// bringing a target back is not cut short by ctx: the topology must be
// whole for the checker. It returns what was injected, in order.
func (r *Runner) Run(ctx context.Context, onsale time.Time, steps []Step) []Event {
	r.Options = r.Options.withDefaults()
	var quiet time.Time
	for _, s := range steps {
		at := onsale.Add(s.At)
		if at.Before(quiet) {
			at = quiet
		}
		select {
		case <-ctx.Done():
			return r.Events()
		case <-time.After(time.Until(at)):
		}
		r.step(ctx, s.Fault)
		quiet = time.Now().Add(r.Options.Quiet)
	}
	return r.Events()
}

// Events are the faults injected so far.
func (r *Runner) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

func (r *Runner) record(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	if r.Log != nil {
		r.Log(e)
	}
}

// recovering is a context for bringing targets back: bounded, and not
// ended with the sale.
func (r *Runner) recovering(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), r.Options.Recover)
}

func (r *Runner) step(ctx context.Context, fault string) {
	switch fault {
	case PGPrimary:
		r.record(r.pgPrimary(ctx))
	case RedisMaster:
		r.record(r.redisMaster(ctx))
	case Core:
		for i := range r.Options.CoreKills {
			if i > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(r.Options.CoreGap):
				}
			}
			e := r.restart(ctx, Core, r.Cluster.Cores()[0], r.Options.CoreDown)
			e.Detail = fmt.Sprintf("kill %d of %d: %s", i+1, r.Options.CoreKills, e.Detail)
			r.record(e)
		}
	case Gateway:
		r.record(r.restart(ctx, Gateway, r.Cluster.Gateways()[0], r.Options.GatewayDown))
	case FreezeCore:
		cores := r.Cluster.Cores()
		r.record(r.freeze(ctx, cores[len(cores)-1]))
	case ProviderDown:
		r.record(r.provider(ctx))
	case GatewaysRestart:
		r.record(r.gatewaysRestart(ctx))
	}
}

// since says how long after at, in seconds.
func since(t, at time.Time) string { return fmt.Sprintf("%.1f s", t.Sub(at).Seconds()) }

func (r *Runner) pgPrimary(ctx context.Context) Event {
	e := Event{Fault: PGPrimary}
	old, err := r.Cluster.PGPrimary(ctx)
	if err != nil {
		e.Err = "no primary: " + err.Error()
		return e
	}
	e.Target = old + " (the primary)"
	e.At = time.Now()
	if err := r.Cluster.KillPG(old); err != nil {
		e.Err = "kill: " + err.Error()
		return e
	}
	rc, cancel := r.recovering(ctx)
	defer cancel()
	promoted, err := r.Cluster.WaitPGPrimary(rc, old)
	if err != nil {
		e.Err = "no new primary: " + err.Error()
		e.Detail = fmt.Sprintf("kill -9 of %s; no new primary", old)
		return e
	}
	e.Back = time.Now()
	e.Detail = fmt.Sprintf("kill -9 of %s; %s promoted after %s", old, promoted, since(e.Back, e.At))
	if err := r.Cluster.RestartPG(rc, old); err != nil {
		e.Err = "rejoin: " + err.Error()
		return e
	}
	e.Rejoined = time.Now()
	e.Detail += fmt.Sprintf("; %s streaming again as a replica after %s", old, since(e.Rejoined, e.At))
	return e
}

func (r *Runner) redisMaster(ctx context.Context) Event {
	e := Event{Fault: RedisMaster}
	slot := fmt.Sprintf("{evt:%d}", r.Event)
	old, err := r.Cluster.RedisMasterOf(ctx, slot)
	if err != nil {
		e.Err = "no master of " + slot + ": " + err.Error()
		return e
	}
	e.Target = old + " (master of " + slot + ")"
	e.At = time.Now()
	if err := r.Cluster.KillRedis(old); err != nil {
		e.Err = "kill: " + err.Error()
		return e
	}
	rc, cancel := r.recovering(ctx)
	defer cancel()
	promoted, err := r.Cluster.WaitRedisFailover(rc, old)
	if err != nil {
		e.Err = "no failover: " + err.Error()
		e.Detail = fmt.Sprintf("kill -9 of %s; no replica promoted", old)
		return e
	}
	e.Back = time.Now()
	e.Detail = fmt.Sprintf("kill -9 of %s; %s promoted, taking writes, after %s", old, promoted, since(e.Back, e.At))
	if err := r.Cluster.RestartRedis(rc, old); err != nil {
		e.Err = "rejoin: " + err.Error()
		return e
	}
	e.Rejoined = time.Now()
	e.Detail += fmt.Sprintf("; %s rejoined as a replica after %s", old, since(e.Rejoined, e.At))
	return e
}

// restart kill -9s p, leaves it down for down, and starts it again.
func (r *Runner) restart(ctx context.Context, fault string, p Proc, down time.Duration) Event {
	e := Event{Fault: fault, Target: p.Name(), At: time.Now()}
	if err := p.Kill(); err != nil {
		e.Err = "kill: " + err.Error()
		return e
	}
	time.Sleep(down) // the process stays dead this long (not a wait for anything)
	rc, cancel := r.recovering(ctx)
	defer cancel()
	if err := p.Start(rc); err != nil {
		e.Err = "start: " + err.Error()
		e.Detail = fmt.Sprintf("kill -9 of %s; not started again", p.Name())
		return e
	}
	e.Back = time.Now()
	e.Detail = fmt.Sprintf("kill -9 of %s; started again after %v, ready after %s", p.Name(), down, since(e.Back, e.At))
	return e
}

// freeze stops p with SIGSTOP for Options.Freeze, then lets it go on.
func (r *Runner) freeze(ctx context.Context, p Proc) Event {
	e := Event{Fault: FreezeCore, Target: p.Name(), At: time.Now()}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		e.Err = "SIGSTOP: " + err.Error()
		return e
	}
	time.Sleep(r.Options.Freeze) // frozen this long (not a wait for anything)
	if err := p.Signal(syscall.SIGCONT); err != nil {
		e.Err = "SIGCONT: " + err.Error()
		return e
	}
	thawed := time.Now()
	rc, cancel := r.recovering(ctx)
	defer cancel()
	for p.Ready(rc) != nil {
		select {
		case <-rc.Done():
			e.Err = "not ready after SIGCONT"
			e.Detail = fmt.Sprintf("SIGSTOP of %s for %v; not ready again", p.Name(), r.Options.Freeze)
			return e
		case <-time.After(100 * time.Millisecond):
		}
	}
	e.Back = time.Now()
	e.Detail = fmt.Sprintf("SIGSTOP of %s for %v, then SIGCONT; ready %s after", p.Name(), r.Options.Freeze, since(e.Back, thawed))
	return e
}

func (r *Runner) provider(ctx context.Context) Event {
	e := Event{Fault: ProviderDown, Target: "payment provider", At: time.Now()}
	end := e.At.Add(r.Options.Outage)
	if err := r.Provider.Outage(ctx, e.At, end); err != nil {
		e.Err = "outage: " + err.Error()
		return e
	}
	time.Sleep(time.Until(end) - time.Second) // the outage lasts (not a wait for anything)
	held, _ := r.Provider.Held(ctx)
	rc, cancel := r.recovering(ctx)
	defer cancel()
	for !r.Provider.Up(rc) {
		select {
		case <-rc.Done():
			e.Err = "the API still answers 503"
			e.Detail = fmt.Sprintf("the provider down for %v; not back", r.Options.Outage)
			return e
		case <-time.After(100 * time.Millisecond):
		}
	}
	e.Back = time.Now()
	e.Detail = fmt.Sprintf("the provider's API answered 503 for %s; %d webhooks held, sent after", since(e.Back, e.At), held)
	return e
}

func (r *Runner) gatewaysRestart(ctx context.Context) Event {
	n := len(r.Cluster.Gateways())
	e := Event{Fault: GatewaysRestart, Target: fmt.Sprintf("all %d gateways", n), At: time.Now()}
	rc, cancel := r.recovering(ctx)
	defer cancel()
	if err := r.Cluster.RestartGateways(rc); err != nil {
		e.Err = err.Error()
		return e
	}
	e.Back = time.Now()
	e.Detail = fmt.Sprintf("every gateway (%d) stopped and started at once; all ready after %s", n, since(e.Back, e.At))
	return e
}
