package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/redis"
	"github.com/onsale/onsale/gateway/redis/redistest"
)

// BenchmarkTickCost is what ticking costs Redis per event on sale with 1, 3
// and 10 gateway processes on one Redis, nobody polling: a few events on
// sale with fans in line, and the Redis commands a second (INFO
// commandstats, a script's own calls included) and the Redis CPU (INFO
// cpu, user + sys) over a measurement window, per event. With the tick
// lease the figures hardly grow with the gateways: one gateway runs an
// event's admission bucket, the others read its tick once a lease (GET and
// PTTL in one round trip; room.Room). Under
// make bench (it needs the run's Redis to itself, and takes a few minutes):
//
//	go test -run '^$' -bench TickCost -benchtime 1x ./gateway/cmd/gateway
//
// ONSALE_BASELINE_BIN names the directory of another build's gateway
// (main's, say) to measure first, in the same run; ONSALE_TICKCOST_WINDOW
// (a duration, default 10s) and ONSALE_TICKCOST_GATEWAYS (fleet sizes,
// default 1,3,10) shorten it. The gateways run with the core-health
// feedback off: its exchange is one script per gateway per tick whatever
// the events (O(gateways), not per event), and is not the ticking this
// measures; ONSALE_TICKCOST_HEALTH=on measures with it (a fake core that
// always answers). Each row is followed by INFO commandstats per command
// (calls a second, per event, a script's own calls included) and the
// whole server's figures, not divided among the events: the part of them
// that is per gateway (its connections, its listing of the events once a
// second, the health) is not per event, and divided among 4 events it
// looks like more per event than it would among 40.
func BenchmarkTickCost(b *testing.B) {
	s := redistest.NewStore(b, false)
	addr := redistest.Addrs(b, false)
	type build struct{ name, bin string }
	builds := []build{{"this", gatewayBinary(b)}}
	if dir := os.Getenv("ONSALE_BASELINE_BIN"); dir != "" {
		builds = append([]build{{"baseline", filepath.Join(dir, "gateway")}}, builds...)
	}
	const events = 4
	window := 10 * time.Second
	if w, err := time.ParseDuration(os.Getenv("ONSALE_TICKCOST_WINDOW")); err == nil {
		window = w
	}
	health := "off"
	if os.Getenv("ONSALE_TICKCOST_HEALTH") == "on" {
		health = "on"
	}
	fleets := []int{1, 3, 10}
	if v := os.Getenv("ONSALE_TICKCOST_GATEWAYS"); v != "" { // a quick look: ONSALE_TICKCOST_GATEWAYS=1
		fleets = nil
		for _, f := range strings.Split(v, ",") {
			if n, err := strconv.Atoi(f); err == nil {
				fleets = append(fleets, n)
			}
		}
	}
	var table []string
	for _, bd := range builds {
		for _, n := range fleets {
			b.Run(fmt.Sprintf("%s/gateways=%d", bd.name, n), func(b *testing.B) {
				var evs []int64
				for range events {
					ev := newEvent(b, s, func(d *gateway.Dials) { d.NewUsersPerMinute, d.TotalActiveUsers = 600, 1_000_000 })
					for i := range 2000 {
						if _, err := s.Join(ctx, ev, fmt.Sprintf("fan-%d", i)); err != nil {
							b.Fatal(err)
						}
					}
					evs = append(evs, ev)
				}
				listed, _ := s.Client().SCard(ctx, "onsale:events").Result()
				startFleetOf(b, bd.bin, n, addr, "-health", health)
				for _, ev := range evs {
					waitFor(b, "admission to start", 10*time.Second, func() bool { return serving(b, s, ev) > 0 })
				}
				time.Sleep(2 * time.Second) // past the start: the steady state
				c0, cpu0, t0 := redisStats(b, s)
				time.Sleep(window)
				c1, cpu1, t1 := redisStats(b, s)
				secs := t1.Sub(t0).Seconds()
				cmds := float64(c1.total-c0.total) / secs / events
				evalsha := float64(c1.calls["evalsha"]-c0.calls["evalsha"]) / secs / events
				gets := float64(c1.calls["get"]-c0.calls["get"]) / secs / events
				cpu := (cpu1 - cpu0) / secs / events * 1e6 // µs of Redis CPU per event per second
				row := fmt.Sprintf("%-8s %2d gateways, %d events (%d listed): %7.0f Redis commands/s per event (%5.1f EVALSHA, %5.1f GET), %7.0f µs Redis CPU per event per second",
					bd.name, n, events, listed, cmds, evalsha, gets, cpu)
				row += fmt.Sprintf("\n         whole server: %.0f commands/s, %.0f µs CPU/s, %d clients (by last command: %s); per event: %s",
					cmds*events, cpu*events, c1.clients, clientsByCommand(b, s), perCommand(c0, c1, secs*events))
				b.Log(row)
				table = append(table, row)
				b.ReportMetric(cmds, "cmds/s/event")
				b.ReportMetric(evalsha, "evalsha/s/event")
				b.ReportMetric(cpu, "cpu_us/s/event")
			})
		}
	}
	b.Logf("ticking's Redis cost, nobody polling (a %v window each):\n%s", window, strings.Join(table, "\n"))
}

// commandStats are INFO commandstats' calls: per command, and in all;
// and the connected clients (INFO clients).
type commandStats struct {
	calls   map[string]int64
	total   int64
	clients int64
}

// perCommand is the calls a second of each command between two reads, per
// (seconds times events), busiest first.
func perCommand(c0, c1 commandStats, per float64) string {
	type rate struct {
		name string
		n    float64
	}
	var rates []rate
	for name, n := range c1.calls {
		if d := n - c0.calls[name]; d > 0 {
			rates = append(rates, rate{name, float64(d) / per})
		}
	}
	slices.SortFunc(rates, func(a, b rate) int { return cmp.Compare(b.n, a.n) })
	var out []string
	for _, r := range rates {
		out = append(out, fmt.Sprintf("%s %.2f", r.name, r.n))
	}
	return strings.Join(out, ", ")
}

// clientsByCommand counts the server's connections by the last command
// each ran (CLIENT LIST's cmd), busiest first: what holds them.
func clientsByCommand(tb testing.TB, s *redis.Store) string {
	tb.Helper()
	list, err := s.Client().ClientList(ctx).Result()
	if err != nil {
		tb.Fatal(err)
	}
	n := map[string]int{}
	for _, line := range strings.Split(list, "\n") {
		for _, f := range strings.Fields(line) {
			if c, ok := strings.CutPrefix(f, "cmd="); ok {
				n[c]++
			}
		}
	}
	var out []string
	for c, k := range n {
		out = append(out, fmt.Sprintf("%s %d", c, k))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// redisStats reads the server's command counts and its CPU seconds (user +
// sys), and when.
func redisStats(tb testing.TB, s *redis.Store) (commandStats, float64, time.Time) {
	tb.Helper()
	info, err := s.Client().Info(ctx, "commandstats", "cpu", "clients").Result()
	if err != nil {
		tb.Fatal(err)
	}
	at := time.Now()
	st := commandStats{calls: map[string]int64{}}
	var cpu float64
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if name, rest, ok := strings.Cut(line, ":"); ok {
			switch {
			case strings.HasPrefix(name, "cmdstat_"):
				for _, kv := range strings.Split(rest, ",") {
					if v, ok := strings.CutPrefix(kv, "calls="); ok {
						n, _ := strconv.ParseInt(v, 10, 64)
						st.calls[strings.TrimPrefix(name, "cmdstat_")] = n
						st.total += n
					}
				}
			case name == "connected_clients":
				st.clients, _ = strconv.ParseInt(rest, 10, 64)
			case name == "used_cpu_sys" || name == "used_cpu_user":
				f, _ := strconv.ParseFloat(rest, 64)
				cpu += f
			}
		}
	}
	return st, cpu, at
}
