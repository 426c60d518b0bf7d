package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/onsale/onsale/loadtest/check"
	"github.com/onsale/onsale/loadtest/crowd"
	"github.com/onsale/onsale/loadtest/faults"
	"github.com/onsale/onsale/loadtest/procstat"
	"github.com/onsale/onsale/loadtest/report"
)

// outcome is how the sale went, beside its forecast.
type outcome struct {
	took, allTaken, soldOut time.Duration
	hold                    time.Duration
	forecast                crowd.Forecast
	procs                   []procstat.Usage
	cpu                     []procstat.Sample
	targets                 []procstat.Target
	onsale                  time.Time
	saleFrom, saleTo        time.Time      // the pre-queue's opening and the crowd's end: the sale, without the sign-in ahead
	signInTook              time.Duration  // the fans' sign-in ahead of the sale (0: none)
	crowd                   string         // what the crowd itself cost (self.line)
	lastSeats               []string       // the chains of holds of the seats sold last (lastSeats)
	returns                 *crowd.Returns // the seats that came back, from the database (nil: not known)
	tail                    string         // how the tail went (tail; empty: not known)
}

// usage is the named process's usage in the process table (zero if absent).
func (o outcome) usage(name string) procstat.Usage {
	for _, u := range o.procs {
		if u.Name == name {
			return u
		}
	}
	return procstat.Usage{}
}

// saleCPUOf is the named process's mean CPU in cores over the sale
// (saleFrom to saleTo, by the per-second samples; 0 if absent): the whole
// watch's mean also covers the sign-in ahead, which may be longer than
// the sale.
func (o outcome) saleCPUOf(name string) float64 {
	i := slices.IndexFunc(o.targets, func(t procstat.Target) bool { return t.Name == name })
	if i < 0 {
		return 0
	}
	sum, n := 0.0, 0
	for _, s := range o.cpu {
		if s.At.After(o.saleFrom) && !s.At.After(o.saleTo) {
			sum += s.Cores[i]
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// dbPerHold is PostgreSQL's CPU over the sale per successful hold and per
// hold request, in milliseconds (0 when there were none).
func (o outcome) dbPerHold(st *crowd.Stats) (perHeld, perAsked float64) {
	spent := o.saleCPUOf("postgres") * o.saleTo.Sub(o.saleFrom).Seconds() * 1000
	var asked int64
	for _, l := range st.Latencies() {
		if l.Route == "hold" {
			asked = int64(l.Count)
		}
	}
	if n := st.Held.Load(); n > 0 {
		perHeld = spent / float64(n)
	}
	if asked > 0 {
		perAsked = spent / float64(asked)
	}
	return perHeld, perAsked
}

// lines are the dials, the outcome and Little's law, for the summary and
// the report.
func (o outcome) lines(c Config, st *crowd.Stats) []string {
	note := []string{"Accounts: none required (account_required off); the fans joined as guests."}
	if c.Accounts {
		note[0] = fmt.Sprintf("Accounts: required (account_required on); every fan signs in with a code by SMS before joining (%d of %d fans signed in; %d codes sent), the bots never did.",
			st.SignedIn.Load(), c.Fans, st.CodesRequested.Load())
		if o.signInTook > 0 {
			note[0] += fmt.Sprintf(" The fans signed in ahead of the sale, %d at a time from %d loopback addresses: %.0f s, %.0f sign-ins a second.",
				c.SignInConc, c.Addrs, o.signInTook.Seconds(), float64(st.SignedIn.Load())/o.signInTook.Seconds())
		}
	}
	if c.Note != "" {
		note = append(note, c.Note)
	}
	end := fmt.Sprintf("not sold out when the %v deadline came (%.0f s after onsale)", c.Deadline, o.took.Seconds())
	if o.soldOut > 0 {
		f := o.forecast
		end = fmt.Sprintf("sold out %.0f s after onsale (forecast about %.0f s, %+.0f%%; four sales in five between %.0f and %.0f s)", o.soldOut.Seconds(),
			f.SoldOut.Seconds(), 100*(o.soldOut.Seconds()/f.SoldOut.Seconds()-1), f.SoldOutRange[0].Seconds(), f.SoldOutRange[1].Seconds())
	}
	taken := "never every seat taken at once"
	if o.allTaken > 0 {
		taken = fmt.Sprintf("every seat held or sold %.0f s after onsale (forecast %.0f s)", o.allTaken.Seconds(), o.forecast.AllTaken.Seconds())
	}
	return append(note,
		fmt.Sprintf("Dials: %d let in a minute, %d sessions at most, sessions of %v; holds of %v; sweep every %v.",
			c.PerMinute, c.MaxActive, c.Session, o.hold, c.Sweep),
		fmt.Sprintf("Outcome: %s; %s.", taken, end),
		lastSold(o.lastSeats),
		o.tailLine(),
		o.crowd,
		measured(st, o.returns),
		fmt.Sprintf("Little's law with what the crowd measured (%d of %d admitted fans said they were done, after %.1f s on average; the rest kept the room for the whole session): %v.",
			st.Left.Load(), st.Admitted.Load(), st.MeanLeft().Seconds(), o.forecast))
}

// tailLine is o.tail, or what was not measured.
func (o outcome) tailLine() string {
	if o.tail == "" {
		return "The tail: not measured (never every seat taken at once, or no hold after)."
	}
	return o.tail
}

// lastSold is the note on the seats sold last: how many holds each went
// through before its booking, and how long it waited between them.
func lastSold(chains []string) string {
	if len(chains) == 0 {
		return "The seats sold last: none confirmed."
	}
	return "The seats sold last (every hold on each, times after onsale): " + strings.Join(chains, "; ") + "."
}

// achieved is the fans a second let in while seats were left: from onsale
// to every seat taken (or the sale's end).
func achieved(adms []check.Admission, onsale time.Time, allTaken, took time.Duration) float64 {
	until := allTaken
	if until <= 0 {
		until = took
	}
	n := 0
	for _, a := range adms {
		if !a.AdmittedAt.IsZero() && !a.AdmittedAt.After(onsale.Add(until)) {
			n++
		}
	}
	if until <= 0 {
		return 0
	}
	return float64(n) / until.Seconds()
}

// measuredSale is s with the rate achieved, what the crowd measured (the time to a hold, to
// a payment's outcome, the payments that failed or were refunded) and the seats that came
// back as the database recorded them (returns, nil: not known).
func measuredSale(st *crowd.Stats, achieved float64, returns *crowd.Returns, s crowd.Sale) crowd.Sale {
	s.Achieved = achieved
	if n := st.Held.Load(); n > 0 {
		s.Shop = time.Duration(st.ShopNanos.Load() / n)
	}
	if n := st.Settled.Load(); n > 0 {
		s.Settle = time.Duration(st.SettleNanos.Load() / n)
	}
	if n := st.Paid.Load(); n > 0 {
		s.PayFail = float64(st.FailedPay.Load()+st.Refunded.Load()) / float64(n)
	}
	s.Returns = returns
	return s
}

// measured are the crowd's own measures the forecast rests on: how long an
// admitted fan took to hold seats, a payer from its hold to the outcome,
// a fan who held seats from admission to leaving, and how many holds did
// not become bookings, and the seats that came back as the database
// recorded them (nil: not known).
func measured(st *crowd.Stats, returns *crowd.Returns) string {
	mean := func(sum, n int64) float64 {
		if n == 0 {
			return 0
		}
		return time.Duration(sum / n).Seconds()
	}
	held := st.Held.Load()
	lost := 0.0
	if held > 0 {
		lost = 100 * float64(held-st.Confirmed.Load()) / float64(held)
	}
	back := ""
	if r := returns; r != nil {
		ended := func(r *crowd.Returns) string {
			s := fmt.Sprintf("%.1f%% were released, %.1f s after the hold on average", 100*r.Released, r.ReleasedAfter.Seconds())
			for _, l := range r.Lapses {
				s += fmt.Sprintf(", %.1f%% lapsed %s, %.1f s after it", 100*l.Share, l.Name, l.After.Seconds())
			}
			return s
		}
		back = "; in the database, of the first holds of their seats " + ended(r)
		if r.Rehold != nil {
			back += "; of the re-holds (seats held before) " + ended(r.Rehold)
			back += fmt.Sprintf("; the seats of a hold that came back were held again by %.2f holds on average", r.Branch)
		}
		back += " (lapsed: closed the app, or a payment that never settled or settled too late; a hold extended at the Pay step lapses that much later)"
	}
	return fmt.Sprintf("Measured for the forecast: admission to a hold %.1f s on average (%d holds); a hold to its payment's outcome %.1f s (%d payments); "+
		"fans who held seats and left kept the room %.1f s (%d); %.0f%% of holds did not become bookings (closed the app, released, payment failed or refunded)%s.",
		mean(st.ShopNanos.Load(), held), held, mean(st.SettleNanos.Load(), st.Settled.Load()), st.Settled.Load(),
		mean(st.SessionHeldNanos.Load(), st.LeftHeld.Load()), st.LeftHeld.Load(), lost, back)
}

// summary prints what the crowd saw, the outcome, the poll rate, latencies
// and what each process cost.
func summary(c Config, st *crowd.Stats, o outcome) {
	fmt.Printf("\nsummary (%d fans, %d bots):\n", c.Fans, c.Bots)
	fmt.Printf("  joined %d, admitted %d, held %d (lost a seat race %d, over the limit %d), paid %d, confirmed %d,\n",
		st.Joined.Load(), st.Admitted.Load(), st.Held.Load(), st.Taken.Load(), st.Limit.Load(), st.Paid.Load(), st.Confirmed.Load())
	fmt.Printf("  payments failed %d, late payers refunded %d, closed the app or released %d, rejoined after a reset %d\n",
		st.FailedPay.Load(), st.Refunded.Load(), st.Abandoned.Load(), st.Rejoin.Load())
	if c.Accounts {
		fmt.Printf("  sign-ins: codes requested %d, verified %d, refused %d (wrong or expired code, no SMS), limited %d (429); bot requests refused identity_required %d\n",
			st.CodesRequested.Load(), st.SignedIn.Load(), st.SignInFailed.Load(), st.SignInLimited.Load(), st.BotsNoIdentity.Load())
	}
	fmt.Printf("  bot requests refused (401/429): %d; server errors: %d %v\n", st.BotRefused.Load(), st.Errors.Load(), st.ErrorsByKind())
	for _, l := range o.lines(c, st) {
		fmt.Println("  " + l)
	}
	mean, peak, _ := st.PollRate()
	fmt.Printf("  status polls answered: %.0f/s on average over the sale, %.0f/s in the busiest second\n", mean, peak)
	fmt.Printf("  %-10s %8s %8s %8s %8s\n", "latency", "count", "p50 ms", "p99 ms", "max ms")
	ms := func(x time.Duration) float64 { return math.Round(float64(x)/1e4) / 100 }
	for _, l := range st.Latencies() {
		fmt.Printf("  %-10s %8d %8.1f %8.1f %8.1f\n", l.Route, l.Count, ms(l.P50), ms(l.P99), ms(l.Max))
	}
	fmt.Printf("  %-22s %6s %9s %9s %9s %9s\n", "process", "procs", "CPU sale", "CPU mean", "CPU peak", "mem peak")
	for _, u := range o.procs {
		fmt.Printf("  %-22s %6d %9.2f %9.2f %9.2f %6.0f MB\n", u.Name, u.Procs, o.saleCPUOf(u.Name), u.CPUMean, u.CPUPeak, float64(u.MemPeak)/(1<<20))
	}
	fmt.Printf("  (CPU in cores; \"sale\" is from the pre-queue's opening to the crowd's end, %.0f s; \"mean\" the whole run, sign-in ahead included)\n",
		o.saleTo.Sub(o.saleFrom).Seconds())
	if held, asked := o.dbPerHold(st); held > 0 {
		fmt.Printf("  PostgreSQL CPU over the sale: %.1f ms per successful hold (%d), %.2f ms per hold request\n", held, st.Held.Load(), asked)
	}
}

// offeredPerMinute is the places offered over the minute before each point
// (the serving counter's advance): the admission the dial governs.
func offeredPerMinute(series []crowd.Point) report.Line {
	l := report.Line{Name: "offered (the admission)"}
	j := 0
	for _, p := range series {
		for j < len(series) && series[j].T < p.T-60 {
			j++
		}
		if p.T-series[j].T >= 30 { // a full-ish minute behind it
			l.Points = append(l.Points, report.Point{T: p.T, V: float64(p.Serving-series[j].Serving) * 60 / (p.T - series[j].T)})
		}
	}
	return l
}

// writeReport writes the HTML report: the summary, the invariants, the
// charts of the operators' screens, polls and CPU, latencies and processes.
func writeReport(c Config, st *crowd.Stats, series []crowd.Point, res []check.Result, capacity int, o outcome, fx []faults.Effect) error {
	line := func(name string, f func(p crowd.Point) int64, dashed bool) report.Line {
		l := report.Line{Name: name, Dashed: dashed}
		for _, p := range series {
			l.Points = append(l.Points, report.Point{T: p.T, V: float64(f(p))})
		}
		return l
	}
	mean, peak, polls := st.PollRate()
	off := st.Start.Sub(o.onsale).Seconds()
	for i := range polls {
		polls[i].T += off
	}
	r := report.Report{
		Title: fmt.Sprintf("onsale flash sale: %d fans, %d seats", c.Fans, capacity),
		Summary: append(o.lines(c, st),
			fmt.Sprintf("Joined %d, admitted %d, holds %d (lost a seat race %d, over the limit %d), paid %d, confirmed %d, payments failed %d, refunded %d, walked away %d; bot requests refused %d.",
				st.Joined.Load(), st.Admitted.Load(), st.Held.Load(), st.Taken.Load(), st.Limit.Load(), st.Paid.Load(), st.Confirmed.Load(),
				st.FailedPay.Load(), st.Refunded.Load(), st.Abandoned.Load(), st.BotRefused.Load()),
			fmt.Sprintf("Status polls answered: %.0f a second on average over the sale, %.0f in the busiest second.", mean, peak)),
		Charts: []report.Chart{
			{Title: "Queue length", Unit: "fans waiting", Lines: []report.Line{line("queued", func(p crowd.Point) int64 { return p.Queued }, false)}},
			{Title: "Admitted per minute against the dial", Unit: "per minute, over the last minute", Lines: append([]report.Line{
				offeredPerMinute(series), line("claimed (fans who came in)", func(p crowd.Point) int64 { return p.Admitted }, false),
				line("new_users_per_minute", func(p crowd.Point) int64 { return p.Dial }, true)}, effective(series)...)},
			{Title: "Active sessions", Lines: []report.Line{line("active", func(p crowd.Point) int64 { return p.Active }, false),
				line("total_active_users", func(p crowd.Point) int64 { return p.Cap }, true)}},
			{Title: "Holds and bookings", Unit: "cumulative", Lines: []report.Line{
				line("holds", func(p crowd.Point) int64 { return p.Holds }, false), line("confirmed bookings", func(p crowd.Point) int64 { return p.Confirmed }, false)}},
			{Title: "Seats", Lines: []report.Line{line("remaining", func(p crowd.Point) int64 { return p.Available }, false),
				line("held", func(p crowd.Point) int64 { return p.Held }, false), line("sold", func(p crowd.Point) int64 { return p.Sold }, false)}},
			{Title: "Status polls answered", Unit: "per second", Lines: []report.Line{{Name: "polls", Points: polls}}},
		},
		Errors:  st.ErrorsByKind(),
		Markers: faultMarkers(fx, o.onsale),
		Faults:  faultRows(fx, o.onsale),
		Answers: answerTable(st.Answers()),
	}
	from := 0.0
	if len(series) > 0 {
		from = series[0].T
	}
	r.Charts = append(append(r.Charts, errorChart(st.Answers(), o.onsale, from)...), cpuChart(o))
	if c.Accounts {
		r.SignIns = signIns(st)
	}
	for _, x := range res {
		r.Checks = append(r.Checks, report.Check{Name: x.Name, Detail: x.Detail, Pass: x.Pass})
	}
	ms := func(x time.Duration) float64 { return float64(x) / 1e6 }
	for _, l := range st.Latencies() {
		r.Latencies = append(r.Latencies, report.Latency{Route: l.Route, Count: l.Count, P50: ms(l.P50), P90: ms(l.P90), P99: ms(l.P99), Max: ms(l.Max)})
	}
	for _, u := range o.procs {
		r.Processes = append(r.Processes, report.Process{Name: u.Name, CPUPeak: u.CPUPeak, CPUMean: u.CPUMean, CPUSale: o.saleCPUOf(u.Name),
			MemPeakMB: float64(u.MemPeak) / (1 << 20), Procs: u.Procs})
	}
	return report.Write(c.Report, r)
}

// effective is the rate the gateway let fans in at (the dial times the
// core's health factor), when it reports one: none otherwise.
func effective(series []crowd.Point) []report.Line {
	l := report.Line{Name: "effective rate (core health)", Dashed: true}
	for _, p := range series {
		if p.Effective >= 0 {
			l.Points = append(l.Points, report.Point{T: p.T, V: p.Effective})
		}
	}
	if len(l.Points) == 0 {
		return nil
	}
	return []report.Line{l}
}

// signIns are the crowd's sign-ins for the report.
func signIns(st *crowd.Stats) []report.Count {
	return []report.Count{
		{Name: "codes requested", Value: st.CodesRequested.Load(), Note: "POST /v1/auth/code answered 202: a code sent by SMS"},
		{Name: "signed in", Value: st.SignedIn.Load(), Note: "POST /v1/auth/verify answered an account token"},
		{Name: "failed", Value: st.SignInFailed.Load(), Note: "a code refused (wrong, expired, used), none arrived, or an error"},
		{Name: "limited", Value: st.SignInLimited.Load(), Note: "429 rate_limited (per phone or per address)"},
		{Name: "bots refused", Value: st.BotsNoIdentity.Load(), Note: "bot joins refused identity_required (bots never sign in)"},
	}
}

// cpuChart is each watched process's CPU, in cores, by second after onsale.
func cpuChart(o outcome) report.Chart {
	cpu := report.Chart{Title: "CPU per process", Unit: "cores"}
	for i, t := range o.targets {
		l := report.Line{Name: t.Name}
		for _, s := range o.cpu {
			l.Points = append(l.Points, report.Point{T: s.At.Sub(o.onsale).Seconds(), V: s.Cores[i]})
		}
		cpu.Lines = append(cpu.Lines, l)
	}
	return cpu
}
