// Command soak runs steady fan traffic against a running stack for a bounded
// time and watches the services for growth that has no bound (`make soak`,
// deploy/local/soak.sh): fans of loadtest/crowd arrive at a steady rate and
// each joins the line, polls its place, holds seats (or loses the race),
// pays by UPI or card through the payment simulator, releases or walks
// away, and leaves; bots hammer the queue. Meanwhile each service's heap in
// use and goroutines are sampled from its /metrics every few seconds
// (loadtest/soak). At the end it prints the curves (start, middle, end and
// a table over time), writes them to -out, and exits non-zero when a curve
// grows without bound by loadtest/soak's rule, or when the traffic never
// reached holds and payments (a soak that did not soak).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/onsale/onsale/loadtest/crowd"
	"github.com/onsale/onsale/loadtest/soak"
	"github.com/onsale/onsale/shared/config"
)

// Config is the soak's setup (shared/config); deploy/local/soak.sh passes it
// as flags. A tool run by a script: no variables, no table in
// docs/configuration.md; -h lists the settings.
type Config struct {
	Gateway       string        `flag:"gateway" default:"http://127.0.0.1:18080" help:"gateway base URL"`
	Admin         string        `flag:"admin" help:"the gateway's operators' listener (ONSALE_ADMIN_ADDR) base URL: the dials are set there (required)"`
	OperatorToken string        `env:"ONSALE_OPERATOR_TOKEN" flag:"operator-token" secret:"true" help:"an operator's session token, to set the dials through the gateway's operators' API (a stack's: STACK_OPERATOR_TOKEN; by env or ONSALE_OPERATOR_TOKEN_FILE: a flag is visible in ps)"`
	Event         int64         `flag:"event" default:"1" min:"1" help:"the seated event the fans shop for (it must have seats enough for the whole soak: see -rate)"`
	Metrics       string        `flag:"metrics" help:"the services to watch, name=URL of its Prometheus page, separated by commas (core=http://.../metrics,gateway=...)"`
	Duration      time.Duration `flag:"duration" default:"20m" min:"30s" max:"24h" help:"how long the traffic runs and the services are sampled, the warm-up included"`
	Warmup        time.Duration `flag:"warmup" default:"0s" min:"0s" help:"the start of the soak shown but not judged (the stack warming up: pools opening, the first fans' sessions filling); 0 = a tenth of -duration, at least 30 s"`
	Every         time.Duration `flag:"every" default:"0s" min:"0s" help:"sample the services this often; 0 = -duration/100 within 2 s to 5 s"`
	Rate          float64       `flag:"rate" default:"2" min:"0.1" max:"200" help:"fans arriving each second, steadily"`
	Bots          int           `flag:"bots" default:"1" min:"0" help:"bots hammering the queue (with no token, a forged one, joins without an account) for the whole soak"`
	Session       time.Duration `flag:"session" default:"60s" min:"5s" help:"the session_seconds dial: how long an admitted fan may shop"`
	Claim         time.Duration `flag:"claim" default:"30s" min:"1s" help:"the claim_seconds dial"`
	Conns         int           `flag:"conns" default:"256" min:"1" help:"connections the crowd opens to the gateway at most"`
	Rows          int           `flag:"rows" default:"13" min:"2" help:"rows of the table over time"`
	Out           string        `flag:"out" default:".run/soak" help:"directory for samples.csv (every round) and summary.txt (what is printed at the end)"`
}

// seatsPerFan bounds the seats one fan of the crowd takes for good: 3.5
// tickets an order on average, and nearly nine in ten of those who hold pay.
// The event must have at least this many seats for each fan of the soak:
// a sold-out sale is a different load (fans leave at once), and the
// curves would then measure the change of load, not the services.
const seatsPerFan = 3.5

func main() {
	var c Config
	if code := config.Status("soak", &c); code >= 0 {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// Validate checks the rules across settings.
func (c *Config) Validate() error {
	if _, err := soak.ParseTargets(c.Metrics); err != nil {
		return fmt.Errorf("-metrics: %w", err)
	}
	if c.Admin == "" || c.OperatorToken == "" {
		return fmt.Errorf("-admin (the gateway's operators' listener) and an operator token (ONSALE_OPERATOR_TOKEN) are required: the soak sets the dials")
	}
	if c.warmup() >= c.Duration/2 {
		return fmt.Errorf("-warmup %v: must be under half of -duration %v (the rest is judged in two halves)", c.warmup(), c.Duration)
	}
	return nil
}

func (c *Config) warmup() time.Duration {
	if c.Warmup > 0 {
		return c.Warmup
	}
	return max(30*time.Second, c.Duration/10)
}

func (c *Config) every() time.Duration {
	if c.Every > 0 {
		return c.Every
	}
	return min(max(c.Duration/100, 2*time.Second), 5*time.Second)
}

func run(ctx context.Context, c Config) error {
	targets, _ := soak.ParseTargets(c.Metrics) // checked by Validate
	st := crowd.NewStats(time.Now(), c.Duration+time.Minute)
	ops := crowd.NewOperators(c.Admin, c.OperatorToken, c.Event, st)
	ev := ops.Event(ctx)
	if ev.Capacity == 0 || len(ev.BandCodes()) == 0 {
		return fmt.Errorf("event %d: the gateway at %s shows no seats or price bands", c.Event, c.Gateway)
	}
	need := int(math.Ceil(seatsPerFan * c.Rate * c.Duration.Seconds()))
	if ev.Capacity < need {
		return fmt.Errorf("event %d has %d seats; %.1f fans a second for %v may take %d: a sale that sells out mid-soak changes the load under the curves (lower -rate or seed more seats)",
			c.Event, ev.Capacity, c.Rate, c.Duration, need)
	}
	// Fans are let in a quarter faster than they arrive and the room holds
	// twice the fans a session can gather, so the line stays short and
	// steady: each fan polls a few times, not for ever (let in at exactly
	// the arrival rate, the line would be a random walk with no bound).
	no := false
	perMinute := int(math.Ceil(1.25 * c.Rate * 60))
	maxActive := int(math.Ceil(2 * c.Rate * c.Session.Seconds()))
	if err := ops.SetDials(ctx, crowd.Dials{Onsale: time.Now(), PerMinute: perMinute, MaxActive: maxActive,
		Session: c.Session, Claim: c.Claim, AccountRequired: &no}); err != nil {
		return err
	}
	fmt.Printf("soak: %v of %.1f fans a second (%d bots) on event %d (%d seats, holds of %v); dials %d/min, %d active, sessions of %v\n",
		c.Duration, c.Rate, c.Bots, c.Event, ev.Capacity, ev.Hold(), perMinute, maxActive, c.Session)
	fmt.Printf("  sampling %s every %v; the first %v is the warm-up (shown, not judged)\n", names(targets), c.every(), c.warmup())

	cr := crowd.New(c.Gateway, c.Event, ev.BandCodes(), c.Conns, st)
	traffic, stopTraffic := context.WithTimeout(ctx, c.Duration)
	defer stopTraffic()
	start := time.Now()
	sampler := soak.NewSampler(targets, start)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		sampler.Run(traffic, c.every())
	}()
	botsDone := cr.Bots(traffic, c.Bots, start, c.Duration)
	fansDone := arrive(traffic, cr, c.Rate, func(t time.Duration) { progress(t, st, sampler) })
	fansDone()
	botsDone()
	<-sampled
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}

	res := soak.Judge(sampler.Columns(), sampler.Rounds(), c.warmup())
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(c.Out, "summary.txt"))
	if err != nil {
		return err
	}
	defer f.Close()
	w := io.MultiWriter(os.Stdout, f)
	fmt.Fprintf(w, "\nsoak: %v, %.1f fans a second on event %d; %d rounds of samples, every %v\n", time.Since(start).Round(time.Second), c.Rate, c.Event, len(res.Rounds), c.every())
	fmt.Fprintf(w, "traffic: joined %d, admitted %d, held %d, paid %d, confirmed %d, failed payments %d, refunded %d, released or lapsed %d, left %d; bots refused %d\n",
		st.Joined.Load(), st.Admitted.Load(), st.Held.Load(), st.Paid.Load(), st.Confirmed.Load(), st.FailedPay.Load(),
		st.Refunded.Load(), st.Abandoned.Load(), st.Left.Load(), st.BotRefused.Load())
	for _, l := range st.Latencies() {
		fmt.Fprintf(w, "  %-12s %7d requests  p50 %6.1f ms  p99 %7.1f ms\n", l.Route, l.Count, ms(l.P50), ms(l.P99))
	}
	if errs := st.ErrorsByKind(); len(errs) > 0 {
		fmt.Fprintf(w, "errors seen by the crowd: %v\n", errs)
	}
	if n, last := sampler.Errors(); n > 0 {
		fmt.Fprintf(w, "scrapes failed: %d (last: %s)\n", n, last)
	}
	fmt.Fprintf(w, "\nthe rule (loadtest/soak): after the warm-up, growth = the second half's least-squares slope × its length; it fails above\n"+
		"tolerance × the first half's median + floor (heap: %.0f%% + %.0f MiB; goroutines: %.0f%% + %.0f)\n\n",
		100*soak.HeapRule.Tolerance, soak.HeapRule.Floor/(1<<20), 100*soak.GoroutinesRule.Tolerance, soak.GoroutinesRule.Floor)
	res.Print(w, c.Rows)
	csvPath := filepath.Join(c.Out, "samples.csv")
	cf, err := os.Create(csvPath)
	if err != nil {
		return err
	}
	defer cf.Close()
	if err := soak.WriteCSV(cf, res.Columns, res.Rounds); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ncurves: %s (every round), %s\n", csvPath, filepath.Join(c.Out, "summary.txt"))

	var problems []string
	for _, col := range res.Failed() {
		problems = append(problems, col.Name()+" grows without bound (or could not be judged)")
	}
	// A soak whose fans never held or paid exercised only the line.
	if st.Held.Load() == 0 || st.Paid.Load() == 0 || st.Confirmed.Load() == 0 || st.Left.Load() == 0 {
		problems = append(problems, fmt.Sprintf("the traffic did not reach every step (held %d, paid %d, confirmed %d, left %d)",
			st.Held.Load(), st.Paid.Load(), st.Confirmed.Load(), st.Left.Load()))
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(w, "FAIL:", p)
		}
		return fmt.Errorf("%d problems", len(problems))
	}
	fmt.Fprintln(w, "PASS: no series grows without bound")
	return nil
}

// arrive sends rate fans a second until ctx ends: each second a wave of
// the fans due (the fraction carried over), spread over that second and
// the next (crowd.Arrival with a one-second pre-queue: its pre-queue share
// arrives at once, the rest within the second after), each shopping until
// done. every is called once a minute with the time since the start. The
// returned wait waits for every fan.
func arrive(ctx context.Context, cr *crowd.Crowd, rate float64, every func(time.Duration)) (wait func()) {
	var wg sync.WaitGroup
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	due := 0.0
	for n := 1; ; n++ {
		due += rate
		if k := int(due); k > 0 {
			due -= float64(k)
			wg.Add(1)
			go func() {
				defer wg.Done()
				cr.Fans(ctx, k, crowd.Arrival{OnsaleIn: time.Second, Wall: time.Second, Tail: time.Second}, time.Now())
			}()
		}
		if n%60 == 0 {
			every(time.Since(start))
		}
		select {
		case <-ctx.Done():
			return wg.Wait
		case <-tick.C:
		}
	}
}

// progress prints a line a minute: what the fans did so far and the last
// sample of each series.
func progress(t time.Duration, st *crowd.Stats, s *soak.Sampler) {
	line := fmt.Sprintf("  t%4.0fs  joined %6d  held %5d  paid %5d  confirmed %5d  left %5d  errors %d |",
		t.Seconds(), st.Joined.Load(), st.Held.Load(), st.Paid.Load(), st.Confirmed.Load(), st.Left.Load(), st.Errors.Load())
	rounds := s.Rounds()
	if len(rounds) > 0 {
		last := rounds[len(rounds)-1]
		for i, col := range s.Columns() {
			v := last.Values[i]
			if col.Metric == soak.Heap {
				line += fmt.Sprintf(" %s %.1f MiB", col.Name(), v/(1<<20))
			} else {
				line += fmt.Sprintf(" %s %.0f", col.Name(), v)
			}
		}
	}
	fmt.Println(line)
}

func names(ts []soak.Target) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return fmt.Sprint(slices.Clip(out))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
