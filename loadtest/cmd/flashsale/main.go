// Command flashsale runs the noon sale against a running stack (gateway,
// core, payment simulator) with the crowd of package loadtest/crowd: the
// operators set the dials, fans arrive before onsale, at onsale and after,
// bots hammer the queue. It prints progress, waits for every payment to
// settle, runs the invariant checker (loadtest/check), prints a summary
// beside the Little's-law forecast and writes the HTML report
// (loadtest/report). A broken invariant is a non-zero exit.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/onsale/onsale/loadtest/check"
	"github.com/onsale/onsale/loadtest/crowd"
	"github.com/onsale/onsale/loadtest/faults"
	"github.com/onsale/onsale/loadtest/procstat"
	"github.com/onsale/onsale/shared/config"
)

// Config is the sale's setup (shared/config); deploy/local/demo.sh passes it
// as flags. A tool run by scripts: its settings have no variables of their
// own (but DATABASE_URL) and no table in docs/configuration.md; -h lists
// them.
type Config struct {
	Gateway       string        `flag:"gateway" default:"http://127.0.0.1:18080" help:"gateway base URL"`
	Admin         string        `flag:"admin" help:"the gateway's operators' listener, base URL (its ONSALE_ADMIN_ADDR): the dials and the operators' screens (required with -topology single; the cluster's is its first gateway's)"`
	Paysim        string        `flag:"paysim" default:"http://127.0.0.1:18090" help:"payment simulator base URL"`
	ProviderKey   string        `flag:"provider-key" default:"sk_test_paysim" secret:"true" help:"payment simulator API key (for its ledger)"`
	OperatorToken string        `env:"ONSALE_OPERATOR_TOKEN" flag:"operator-token" secret:"true" help:"an operator's session token, to set the dials through the gateway's operators' API (a stack's: STACK_OPERATOR_TOKEN; by env or ONSALE_OPERATOR_TOKEN_FILE: a flag is visible in ps)"`
	DatabaseURL   string        `env:"DATABASE_URL" flag:"database-url" secret:"url" help:"the core's database (for the checker)"`
	Event         int64         `flag:"event" default:"1" min:"1" help:"the event on sale"`
	Fans          int           `flag:"fans" default:"4000" min:"0" help:"fans in the crowd"`
	Bots          int           `flag:"bots" default:"4" min:"0" help:"bots hammering the queue"`
	OnsaleIn      time.Duration `flag:"onsale-in" default:"10s" min:"1s" help:"time until onsale (the pre-queue crowd arrives before)"`
	Wall          time.Duration `flag:"wall" default:"10s" min:"0s" help:"half the crowd arrives within this long after onsale"`
	Claim         time.Duration `flag:"claim" default:"30s" min:"1s" help:"the claim_seconds dial (a far-back fan polls about every third of it)"`
	Tail          time.Duration `flag:"tail" default:"30s" min:"0s" help:"late arrivals keep coming this long after onsale"`
	Deadline      time.Duration `flag:"deadline" default:"4m" min:"1s" help:"stop the sale after this long, whatever is left"`
	PerMinute     int           `flag:"per-minute" default:"3000" min:"0" help:"the new_users_per_minute dial"`
	MaxActive     int           `flag:"max-active" default:"600" min:"0" help:"the total_active_users dial"`
	Session       time.Duration `flag:"session" default:"2m" min:"1s" help:"the session_seconds dial: how long an admitted fan may shop"`
	Report        string        `flag:"report" help:"write the HTML report here"`
	Sweep         time.Duration `flag:"sweep" default:"5s" min:"100ms" help:"the core's sweep interval (for the checker's margin)"`
	Conns         int           `flag:"conns" default:"1024" min:"1" help:"connections the crowd opens to the gateway at most"`
	Watch         string        `flag:"watch" help:"processes to sample for CPU and memory, name=pid,... (children count with their parent)"`
	Accounts      bool          `flag:"accounts" default:"true" help:"the event requires an account (sets the account_required dial) and every fan signs in first: a code by SMS, read from the payment simulator's sink; false: fans join as guests"`
	Ahead         bool          `flag:"sign-in-ahead" default:"true" help:"with -accounts: the fans sign in before the pre-queue opens (as fans urged to sign in before onsale do), -sign-in-conc at a time; false: each at its arrival, in the wall"`
	SignInConc    int           `flag:"sign-in-conc" default:"256" min:"1" help:"fans signing in at once ahead of the sale (each mostly waits for its SMS: no goroutine a fan, so many at once cost the crowd little)"`
	Addrs         int           `flag:"addrs" default:"1" min:"1" max:"65000" help:"the fans come from this many loopback addresses (127.0.0.1 up): the per-address limits of the gateway and the core see a crowd's many addresses"`
	Note          string        `flag:"note" help:"a line the summary and the report show first (what the run changed, e.g. limits raised for the demo)"`
	Redis         string        `env:"REDIS_URL" flag:"redis" secret:"url" help:"the gateway's Redis, where the checker counts the places in line per account (no such check when empty)"`
	Result        string        `flag:"result" help:"write the outcome here as key value lines (sold_out_s, all_taken_s, took_s, failed, and a line per fault), for scripts comparing sales"`

	// The HA topology (-topology cluster): started in this process, seeded
	// as deploy/local/demo.sh seeds the single one, then sold.
	Topology        string  `flag:"topology" default:"single" oneof:"single|cluster" help:"single: sell on the stack at -gateway, -paysim and DATABASE_URL (make demo's); cluster: start the HA topology in this process (loadtest/topology), seed it, sell on it, stop it"`
	Dir             string  `flag:"dir" help:"with -topology cluster: the topology's directory (data, logs, keys; required)"`
	Base            int     `flag:"base" default:"0" min:"0" max:"65400" help:"with -topology cluster: the first of its 100 ports; 0 = a free block in 9000-11999"`
	Gateways        int     `flag:"gateways" default:"3" min:"1" max:"9" help:"with -topology cluster: gateways behind HAProxy"`
	Cores           int     `flag:"cores" default:"2" min:"1" max:"9" help:"with -topology cluster: cores behind HAProxy"`
	Bin             string  `flag:"bin" help:"with -topology cluster: the binaries (bin/seed and the apps); empty: $ONSALE_BIN or the repository's bin/"`
	Seats           int     `flag:"seats" default:"1600" min:"1" max:"40000" help:"with -topology cluster: the stadium's seats (bin/seed -stadium-seats)"`
	HoldSeconds     int     `flag:"hold-seconds" default:"30" min:"1" max:"86400" help:"with -topology cluster: the concert's holds, in seconds (bin/seed -concert-hold-seconds)"`
	PaysimBehaviour string  `flag:"paysim-behaviour" help:"with -topology cluster: the payment simulator's misbehaviour, JSON (ONSALE_PAYSIM_BEHAVIOUR)"`
	CoreEnv         envList `flag:"core-env" help:"with -topology cluster: KEY=VALUE for every core's environment (repeatable)"`
	GatewayEnv      envList `flag:"gateway-env" help:"with -topology cluster: KEY=VALUE for every gateway's environment (repeatable)"`

	// Faults injected during the sale (loadtest/faults).
	Faults    string        `flag:"faults" help:"faults injected during the sale: all, or names separated by commas (pg-primary, redis-master, core, gateway, freeze-core, provider, gateways-restart), each optionally with its time after onsale (core@60s); all but provider need -topology cluster"`
	FaultAt   time.Duration `flag:"fault-at" default:"15s" min:"0s" help:"the first fault without a time comes this long after onsale"`
	FaultGap  time.Duration `flag:"fault-gap" default:"25s" min:"1s" help:"each further fault without a time comes this long after the one before"`
	CoreKills int           `flag:"core-kills" default:"3" min:"1" max:"20" help:"the core fault kills its core this many times"`
	Freeze    time.Duration `flag:"freeze" default:"25s" min:"1s" help:"the freeze-core fault stops a core this long (longer than its 20 s work deadline)"`
	Outage    time.Duration `flag:"outage" default:"30s" min:"1s" help:"the provider fault's outage"`
}

// envList is a repeatable KEY=VALUE flag, as bin/stack's: each use adds
// one entry (a value may hold commas).
type envList []string

func (l *envList) MarshalText() ([]byte, error) { return []byte(strings.Join(*l, " ")), nil }

func (l *envList) UnmarshalText(b []byte) error {
	if !strings.Contains(string(b), "=") {
		return errors.New("want KEY=VALUE")
	}
	*l = append(*l, string(b))
	return nil
}

// Validate checks the rules across settings.
func (c *Config) Validate() error {
	if c.Topology == "cluster" && c.Dir == "" {
		return errors.New("-topology cluster needs -dir")
	}
	if _, err := faults.Parse(c.Faults, c.FaultAt, c.FaultGap); err != nil {
		return fmt.Errorf("-faults: %w", err)
	}
	if c.Topology == "single" && c.Admin == "" {
		return errors.New("-admin is required: the gateway's operators' listener (ONSALE_ADMIN_ADDR), where the dials are set")
	}
	return nil
}

func main() {
	var c Config
	if code := config.Status("flashsale", &c); code >= 0 {
		os.Exit(code)
	}
	// SIGINT or SIGTERM ends the sale early, and the topology (with
	// -topology cluster) is stopped on the way out.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "flashsale:", err)
		os.Exit(1)
	}
}

// run is the whole sale: the topology (with -topology cluster), the dials,
// the crowd and the faults, the settling, the checker, the summary and the
// report.
func run(ctx context.Context, c Config) error {
	steps, err := faults.Parse(c.Faults, c.FaultAt, c.FaultGap)
	if err != nil {
		return err
	}
	runner := &faults.Runner{Options: faults.Options{CoreKills: c.CoreKills, Freeze: c.Freeze, Outage: c.Outage}}
	if c.Topology == "cluster" {
		t, err := startCluster(ctx, &c)
		if err != nil {
			return err
		}
		defer func() {
			fmt.Println("flashsale: stopping the topology…")
			if err := t.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "flashsale: stopping the topology:", err)
			}
		}()
		runner.Cluster = faults.Topology(t)
	}
	runner.Provider, runner.Event = faults.Paysim{URL: c.Paysim, Key: c.ProviderKey}, c.Event
	if err := runner.Check(steps); err != nil {
		return err
	}
	// Polls are counted by the second from now: through the sign-in ahead
	// (a day at most), the pre-queue and the sale.
	span := c.OnsaleIn + c.Deadline + time.Minute
	if c.Accounts && c.Ahead {
		span += 24 * time.Hour
	}
	st := crowd.NewStats(time.Now(), span)
	procs, stopWatch, err := watchProcesses(ctx, c.Watch)
	if err != nil {
		return err
	}
	defer stopWatch()
	me := watchSelf(ctx)
	ops := crowd.NewOperators(c.Admin, c.OperatorToken, c.Event, st)
	cr := crowd.New(c.Gateway, c.Event, ops.Event(ctx).BandCodes(), c.Conns, st)
	if c.Addrs > 1 {
		cr.Spread(c.Addrs, c.Conns)
	}
	var signInTook time.Duration
	if c.Accounts {
		cr.SignIn(c.Paysim, c.Conns/4+1)
	}
	if c.Accounts && c.Ahead {
		// Nothing opens while they do (the seeded onsale may come first).
		if err := ops.Postpone(ctx, time.Now().Add(24*time.Hour)); err != nil {
			return err
		}
		fmt.Printf("flashsale: %d fans sign in ahead of the sale (%d at a time, from %d loopback addresses)…\n", c.Fans, c.SignInConc, c.Addrs)
		t0 := time.Now()
		cr.SignInAhead(ctx, c.Fans, c.SignInConc)
		signInTook = time.Since(t0)
		fmt.Printf("  signed in %d of %d in %.0f s (%.0f a second); codes asked %d, refused %d, limited %d\n", st.SignedIn.Load(), c.Fans,
			signInTook.Seconds(), float64(st.SignedIn.Load())/signInTook.Seconds(), st.CodesRequested.Load(), st.SignInFailed.Load(), st.SignInLimited.Load())
	}
	// The pre-queue opens now, onsale shortly.
	opened := time.Now()
	onsale := opened.Add(c.OnsaleIn).Truncate(time.Second)
	if err := ops.SetDials(ctx, crowd.Dials{Onsale: onsale, PerMinute: c.PerMinute, MaxActive: c.MaxActive,
		Session: c.Session, Claim: c.Claim, AccountRequired: &c.Accounts}); err != nil {
		return err
	}
	if ops.AccountRequired(ctx) != c.Accounts {
		return fmt.Errorf("the gateway did not take account_required=%v", c.Accounts)
	}
	ev := ops.Event(ctx)
	fmt.Printf("flashsale: %d fans for %d seats on event %d; onsale at %s; dials %d/min, %d active at most\n",
		c.Fans, ev.Capacity, c.Event, onsale.Format("15:04:05"), c.PerMinute, c.MaxActive)
	if c.Accounts {
		fmt.Println("  the event requires an account (account_required on): every fan signs in with a code by SMS first; the bots do not")
	} else {
		fmt.Println("  guests may join (account_required off): fans do not sign in")
	}
	fmt.Printf("  forecast (the crowd's stated mix; a second to a hold, UPI approval in about 3 s, no payment failing): %v\n",
		crowd.Predict(crowd.Sale{Seats: ev.Capacity, PerMinute: c.PerMinute, MaxActive: c.MaxActive, Session: c.Session, Hold: ev.Hold(), Sweep: crowd.MapRebuild}))
	if len(steps) > 0 {
		fmt.Printf("  faults, after onsale: %v\n", steps)
	}

	sale, stop := context.WithTimeout(ctx, c.Deadline)
	defer stop()
	var screens crowd.Screens
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		ops.Watch(sale, onsale, &screens, func(r crowd.Reading) { progress(r, onsale, st, ev.Capacity) })
	}()
	runner.Log = func(e faults.Event) {
		if e.At.IsZero() {
			fmt.Printf("  t%+4.0fs  fault %s: not injected: %s\n", time.Since(onsale).Seconds(), e.Fault, e.Err)
			return
		}
		fmt.Printf("  t%+4.0fs  fault %s: %s", e.At.Sub(onsale).Seconds(), e.Fault, e.Detail)
		if e.Err != "" {
			fmt.Printf("; ERROR %s", e.Err)
		}
		fmt.Println()
	}
	injected := make(chan []faults.Event, 1)
	go func() { injected <- runner.Run(sale, onsale, steps) }()
	start := time.Now()
	botsDone := cr.Bots(sale, c.Bots, start, c.OnsaleIn+c.Tail)
	admissions := cr.Fans(sale, c.Fans, crowd.Arrival{OnsaleIn: c.OnsaleIn, Wall: c.Wall, Tail: c.Tail}, start)
	stop()
	botsDone()
	<-watched
	saleTook := time.Since(onsale)
	events := <-injected // every target back before the settling and the checker

	fmt.Println("  the crowd is done; waiting for payments and refunds to settle…")
	settle(ctx, c)
	var outages []check.Window
	for _, e := range events {
		if e.Fault == faults.ProviderDown && !e.At.IsZero() {
			outages = append(outages, check.Window{Start: e.At, End: e.At.Add(c.Outage)})
		}
	}
	res, err := check.Run(ctx, check.Input{DatabaseURL: c.DatabaseURL, Event: c.Event, LedgerURL: c.Paysim + "/v1/ledger",
		ProviderKey: c.ProviderKey, SweepInterval: c.Sweep, Samples: screens.Samples(), Admissions: admissions,
		RedisURL: c.Redis, AccountsRequired: c.Accounts, Confirmations: cr.Confirmations(), Claim: c.Claim, Outages: outages, Skew: skew(c)})
	if err != nil {
		return err
	}
	end := onsale.Add(saleTook)
	if screens.SoldOut() > 0 {
		end = onsale.Add(screens.SoldOut())
	}
	var claims []time.Time
	for _, a := range admissions {
		if !a.AdmittedAt.IsZero() {
			claims = append(claims, a.AdmittedAt)
		}
	}
	effects := faults.Effects(events, faults.Observed{Answers: st.Answers(), Samples: screens.Samples(), Claims: claims, End: end})
	if c.Accounts {
		res = append(res, check.Result{Name: "every fan signed in before joining (the event requires an account)", Pass: st.SignedIn.Load() == int64(c.Fans),
			Detail: fmt.Sprintf("%d of %d fans signed in", st.SignedIn.Load(), c.Fans)})
	}
	stopWatch()
	returns, err := holdReturns(ctx, c)
	if err != nil { // a diagnostic: the forecast keeps the crowd's measures, the verdict stands
		fmt.Fprintf(os.Stderr, "flashsale: the seats that came back: %v\n", err)
	}
	out := outcome{took: saleTook, hold: ev.Hold(), allTaken: screens.AllTaken(), soldOut: screens.SoldOut(), returns: returns,
		forecast: crowd.Predict(measuredSale(st, achieved(admissions, onsale, screens.AllTaken(), saleTook), returns, crowd.Sale{Seats: ev.Capacity,
			PerMinute: c.PerMinute, MaxActive: c.MaxActive, Session: c.Session, Hold: ev.Hold(), Sweep: crowd.MapRebuild})),
		procs: procs.Usage(), cpu: procs.Samples(), targets: procs.Targets(), onsale: onsale, signInTook: signInTook,
		saleFrom: opened, saleTo: onsale.Add(saleTook)}
	out.crowd = me.line(c.Fans, c.Conns, out.usage(crowdName), st.Lag(), st.ShopLag())
	if out.allTaken > 0 {
		if out.tail, err = tail(ctx, c, onsale.Add(out.allTaken), onsale); err != nil {
			fmt.Fprintf(os.Stderr, "flashsale: the sale's tail: %v\n", err)
		}
	}
	if out.lastSeats, err = lastSeats(ctx, c, onsale, 3); err != nil {
		fmt.Fprintf(os.Stderr, "flashsale: the seats sold last: %v\n", err)
	}
	summary(c, st, out)
	printFaults(effects, onsale)
	failed := invariants(res)
	if c.Report != "" {
		if err := writeReport(c, st, screens.Series(), res, ev.Capacity, out, effects); err != nil {
			return err
		}
		fmt.Println("\nreport:", c.Report)
	}
	if c.Result != "" {
		if err := writeResult(c.Result, out, failed, effects); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d invariants broken", failed)
	}
	return nil
}

// skew is how much older than its as_of an admin-stats sample may be:
// with several gateways, a second (a gateway's longest tick, in which its
// view refreshes); with one, none (check.Input.Skew).
func skew(c Config) time.Duration {
	if c.Topology == "cluster" && c.Gateways > 1 {
		return time.Second
	}
	return 0
}

// crowdName is this process in the process table.
const crowdName = "flashsale (the crowd)"

// watchProcesses samples the processes named in list (name=pid,...) and
// this one, once a second, until stop.
func watchProcesses(ctx context.Context, list string) (w *procstat.Watcher, stop func(), err error) {
	targets, err := procstat.Parse(list)
	if err != nil {
		return nil, nil, err
	}
	ctx, stop = context.WithCancel(ctx)
	w, err = procstat.Watch(ctx, append(targets, procstat.Target{Name: crowdName, PID: os.Getpid()}), time.Second)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return w, stop, nil
}

// progress prints a reading: every other second, and when the sale sells out.
func progress(r crowd.Reading, onsale time.Time, st *crowd.Stats, capacity int) {
	if r.SoldOutNow {
		fmt.Printf("  t%+4.0fs  SOLD OUT: the line is told\n", time.Since(onsale).Seconds())
	}
	if r.Tick%2 == 0 {
		p := r.Point
		fmt.Printf("  t%+4.0fs  queued %6d  admitted %6d  held %5d  sold %6d/%d  seats left %6d  errors %d\n",
			time.Since(onsale).Seconds(), p.Queued, st.Admitted.Load(), st.Held.Load(), p.Sold, capacity, p.Available, st.Errors.Load())
	}
}

// invariants prints the checker's verdicts and counts the failures.
func invariants(res []check.Result) (failed int) {
	fmt.Println("\ninvariants:")
	for _, r := range res {
		v := "PASS"
		if !r.Pass {
			v, failed = "FAIL", failed+1
		}
		fmt.Printf("  %s  %s (%s)\n", v, r.Name, r.Detail)
	}
	return failed
}
