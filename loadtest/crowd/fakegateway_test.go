package crowd_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// fakeGateway answers the gateway's API just enough for a crowd to go
// through every step, and counts what the crowd asked. Every fan is
// admitted at its first poll. Every fourth fan to join (an unlucky one)
// loses every seat race and, once it watches the map, finds the sale sold
// out. For the others the seat map shows every seat free; a best available
// hold always succeeds, one for more than 6 seats gets 422, seats picked
// succeed unless another hold has one; every tenth payment fails.
//
// With requireAccount, a join needs an account token ("acct-<phone>") and
// so do release, pay, confirm and the booking: the account owns them. Codes
// come by SMS from the fake's own sink (/sms?to=); every twentieth code
// request is limited (429, Retry-After 1 s), and a phone ending in 3 has
// its first code refused at verify (401 code_invalid).
type fakeGateway struct {
	addr   string
	mu     sync.Mutex
	counts map[string]int
	held   map[string]bool // seats held by picked holds
	// confirmKeys counts the confirms per Idempotency-Key.
	confirmKeys map[string]int
	joins       atomic.Int64 // numbers the fans in the order they join
	holds       atomic.Int64 // numbers the holds

	requireAccount bool
	codeAsks       atomic.Int64
	codes          map[string]string   // phone: its latest code
	verifies       map[string]int      // phone: verifies answered
	sms            map[string][]string // phone: messages, oldest first
	addrs          map[string]bool     // the addresses joins came from

	// unavailable is how many requests of each route ("join", "hold",
	// "pay", "confirm") answer 503 first (Retry-After 1), as a service in
	// a failover; told counts the bookings answered CONFIRMED.
	unavailable map[string]int
	told        map[int]int

	// line, when set, keeps the fans waiting in line until line.until
	// (polling every line.poll), then admits one in line.admit (by its
	// place) and tells the rest the sale is sold out: a crowd far larger
	// than the seats, as in a full-size sale.
	line *fakeLine
}

// fakeLine is the fake gateway's line for a crowd larger than the seats.
type fakeLine struct {
	until time.Time
	poll  time.Duration
	admit int
}

// down answers 503 when route still has 503s to give.
func (g *fakeGateway) down(ctx *fasthttp.RequestCtx, route string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.unavailable[route] <= 0 {
		return false
	}
	g.unavailable[route]--
	g.counts[route+" 503"]++
	ctx.Response.Header.Set("Retry-After", "1")
	reply(ctx, 503, map[string]any{"error": "unavailable"})
	return true
}

// confirmed is booking n confirmed, as the core answers it; counted in told.
func (g *fakeGateway) confirmed(n int) map[string]any {
	g.mu.Lock()
	g.told[n]++
	g.mu.Unlock()
	return map[string]any{"booking_id": n, "status": "CONFIRMED", "seats": []string{fmt.Sprintf("S-%d-1", n), fmt.Sprintf("S-%d-2", n)}, "amount_paise": 1000 * n}
}

// the layout: one section of 10 rows of 10 seats.
const fakeRows, fakeSeats = 10, 10

func newFakeGateway(tb testing.TB) *fakeGateway {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	g := &fakeGateway{addr: "http://" + ln.Addr().String(), counts: map[string]int{}, held: map[string]bool{}, confirmKeys: map[string]int{},
		codes: map[string]string{}, verifies: map[string]int{}, sms: map[string][]string{}, addrs: map[string]bool{},
		unavailable: map[string]int{}, told: map[int]int{}}
	srv := &fasthttp.Server{Handler: g.serve}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Shutdown() })
	return g
}

func (g *fakeGateway) count(k string) {
	g.mu.Lock()
	g.counts[k]++
	g.mu.Unlock()
}

// Counts is a copy of the counts so far.
func (g *fakeGateway) Counts() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.counts)
}

// Addrs are the addresses joins came from.
func (g *fakeGateway) Addrs() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Sorted(maps.Keys(g.addrs))
}

func reply(ctx *fasthttp.RequestCtx, status int, v any) {
	b, _ := json.Marshal(v)
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func (g *fakeGateway) serve(ctx *fasthttp.RequestCtx) {
	path, method := string(ctx.Path()), string(ctx.Method())
	parts := strings.Split(strings.Trim(path, "/"), "/")
	auth := string(ctx.Request.Header.Peek("Authorization"))
	owned := len(parts) >= 3 && parts[1] == "holds" || len(parts) >= 3 && parts[1] == "bookings"
	if g.requireAccount && owned && !strings.HasPrefix(auth, "Bearer acct-") {
		g.count("owner not the account " + method + " " + parts[len(parts)-1])
		reply(ctx, 401, map[string]any{"error": "unauthorized"})
		return
	}
	switch {
	case path == "/v1/auth/code":
		g.code(ctx)
	case path == "/v1/auth/verify":
		g.verify(ctx)
	case path == "/sms":
		g.count("sms read")
		g.mu.Lock()
		var msgs []map[string]any
		for _, b := range g.sms[string(ctx.QueryArgs().Peek("to"))] {
			msgs = append(msgs, map[string]any{"body": b})
		}
		g.mu.Unlock()
		reply(ctx, 200, map[string]any{"messages": msgs})
	case strings.HasPrefix(path, "/admin/"):
		g.count("admin " + method)
		if auth != "Bearer admin" {
			reply(ctx, 401, map[string]any{"error": "unauthorized"})
			return
		}
		reply(ctx, 200, map[string]any{"stats": map[string]any{"queued": 0}, "dials": map[string]any{}})
	case path == "/v1/events/1":
		g.count("event")
		reply(ctx, 200, map[string]any{"capacity": fakeRows * fakeSeats, "hold_seconds": 21, "price_bands": []map[string]any{{"code": "A"}, {"code": "B"}}})
	case path == "/v1/events/1/stats" && unlucky(ctx):
		g.count("stats (unlucky)")
		reply(ctx, 200, map[string]any{"available": 0, "held": 0, "sold": fakeRows * fakeSeats})
	case path == "/v1/events/1/stats":
		g.count("stats")
		reply(ctx, 200, map[string]any{"available": fakeRows * fakeSeats, "held": 0, "sold": 0})
	case path == "/v1/events/1/queue" && method == "POST":
		g.join(ctx)
	case path == "/v1/events/1/queue" && method == "DELETE":
		g.count("leave")
		reply(ctx, 200, map[string]any{"outcome": "ended"})
	case path == "/v1/events/1/queue/status":
		if len(ctx.Request.Header.Cookie("q")) == 0 {
			g.count("status without a cookie")
			reply(ctx, 401, map[string]any{"error": "no_token"})
			return
		}
		g.count("status")
		if l := g.line; l != nil {
			n, _ := strconv.Atoi(string(ctx.Request.Header.Cookie("q")))
			switch {
			case time.Now().Before(l.until):
				reply(ctx, 200, map[string]any{"state": "waiting", "position": n, "poll_after_ms": l.poll.Milliseconds()})
				return
			case n%l.admit != 0:
				g.count("status sold out")
				reply(ctx, 200, map[string]any{"state": "sold_out", "position": n})
				return
			}
		}
		reply(ctx, 200, map[string]any{"state": "admitted", "position": 1, "admit_token": "admit-" + string(ctx.Request.Header.Cookie("q")),
			"admit_expires_at": time.Now().Add(time.Minute).Format(time.RFC3339Nano)})
	case path == "/v1/events/1/seatmap":
		free := fakeRows * fakeSeats
		if unlucky(ctx) {
			g.count("seatmap (unlucky)")
			free = 0 // but the bitmap is still all free: a stale map
		} else {
			g.count("seatmap")
		}
		reply(ctx, 200, map[string]any{"available": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, fakeRows*fakeSeats/8+1)),
			"available_count": free})
	case path == "/v1/events/1/layout":
		if unlucky(ctx) {
			g.count("layout (unlucky)")
		} else {
			g.count("layout")
		}
		var rows []map[string]any
		for r := range fakeRows {
			nums := make([]int, fakeSeats)
			for i := range nums {
				nums[i] = i + 1
			}
			rows = append(rows, map[string]any{"label": strconv.Itoa(r + 1), "pos": r * fakeSeats, "numbers": nums})
		}
		reply(ctx, 200, map[string]any{"sections": []map[string]any{{"code": "S", "rows": rows}}})
	case path == "/v1/events/1/holds":
		g.hold(ctx, auth)
	case len(parts) == 3 && parts[1] == "holds" && method == "DELETE":
		g.count("release")
		reply(ctx, 200, map[string]any{})
	case len(parts) == 4 && parts[3] == "confirm":
		if g.down(ctx, "confirm") {
			return
		}
		g.count("confirm")
		g.mu.Lock()
		g.confirmKeys[string(ctx.Request.Header.Peek("Idempotency-Key"))]++
		g.mu.Unlock()
		n, _ := strconv.Atoi(strings.TrimPrefix(parts[2], "h"))
		if n%10 == 0 {
			reply(ctx, 402, map[string]any{"error": "declined"})
			return
		}
		reply(ctx, 200, g.confirmed(n))
	case len(parts) == 4 && parts[3] == "payment":
		if g.down(ctx, "pay") {
			return
		}
		g.count("pay")
		n, _ := strconv.Atoi(strings.TrimPrefix(parts[2], "h"))
		reply(ctx, 201, map[string]any{"booking": map[string]any{"booking_id": n}})
	case len(parts) == 3 && parts[1] == "bookings":
		g.count("booking")
		n, _ := strconv.Atoi(parts[2])
		if n%10 == 0 {
			reply(ctx, 200, map[string]any{"booking_id": n, "status": "FAILED"})
			return
		}
		reply(ctx, 200, g.confirmed(n))
	default:
		g.count("unknown " + method + " " + path)
		reply(ctx, 404, map[string]any{"error": "not_found"})
	}
}

// unlucky says whether the fan asking is one of every four who never get a
// seat (by its queue cookie).
func unlucky(ctx *fasthttp.RequestCtx) bool {
	n, err := strconv.Atoi(string(ctx.Request.Header.Cookie("q")))
	return err == nil && n%4 == 0
}

// code sends a code by SMS (202), or limits every twentieth ask.
func (g *fakeGateway) code(ctx *fasthttp.RequestCtx) {
	var in struct{ Phone string }
	json.Unmarshal(ctx.PostBody(), &in)
	if g.codeAsks.Add(1)%20 == 0 {
		g.count("auth code limited")
		ctx.Response.Header.Set("Retry-After", "1")
		reply(ctx, 429, map[string]any{"error": "rate_limited"})
		return
	}
	g.count("auth code")
	code := fmt.Sprintf("%06d", rand.IntN(1_000_000))
	g.mu.Lock()
	g.codes[in.Phone] = code
	g.sms[in.Phone] = append(g.sms[in.Phone], "onsale: your sign-in code is "+code+". It expires in 5 minutes. Never share it.")
	g.mu.Unlock()
	reply(ctx, 202, map[string]any{"sent": true})
}

// verify answers the account token for the phone's latest code, but
// refuses the first code of a phone ending in 3.
func (g *fakeGateway) verify(ctx *fasthttp.RequestCtx) {
	var in struct{ Phone, Code string }
	json.Unmarshal(ctx.PostBody(), &in)
	g.mu.Lock()
	g.verifies[in.Phone]++
	ok := in.Code != "" && g.codes[in.Phone] == in.Code && (g.verifies[in.Phone] > 1 || !strings.HasSuffix(in.Phone, "3"))
	delete(g.codes, in.Phone) // used, right or wrong
	g.mu.Unlock()
	if !ok {
		g.count("auth verify refused")
		reply(ctx, 401, map[string]any{"error": "code_invalid"})
		return
	}
	g.count("auth verify")
	reply(ctx, 200, map[string]any{"token": "acct-" + in.Phone, "expires_at": time.Now().Add(time.Hour),
		"account": map[string]any{"id": strings.TrimPrefix(in.Phone, "+"), "phone": in.Phone}})
}

func (g *fakeGateway) join(ctx *fasthttp.RequestCtx) {
	if g.requireAccount && !strings.HasPrefix(string(ctx.Request.Header.Peek("Authorization")), "Bearer acct-") {
		g.count("join without an account")
		reply(ctx, 401, map[string]any{"error": "identity_required"})
		return
	}
	if g.down(ctx, "join") {
		return
	}
	g.count("join")
	g.mu.Lock()
	g.addrs[ctx.RemoteIP().String()] = true
	g.mu.Unlock()
	n := g.joins.Add(1)
	var ck fasthttp.Cookie
	ck.SetKey("q")
	ck.SetValue(strconv.FormatInt(n, 10))
	ctx.Response.Header.SetCookie(&ck)
	poll := int64(5)
	if g.line != nil {
		poll = g.line.poll.Milliseconds()
	}
	reply(ctx, 200, map[string]any{"state": "waiting", "position": n, "poll_after_ms": poll})
}

func (g *fakeGateway) hold(ctx *fasthttp.RequestCtx, auth string) {
	if !strings.HasPrefix(auth, "Bearer admit-") {
		g.count("hold without admission")
		reply(ctx, 401, nil)
		return
	}
	if g.down(ctx, "hold") {
		return
	}
	if n, _ := strconv.Atoi(strings.TrimPrefix(auth, "Bearer admit-")); n%4 == 0 {
		g.count("hold lost (unlucky)")
		reply(ctx, 409, map[string]any{"error": "seats_taken"})
		return
	}
	var body struct {
		Seats []string `json:"seats"`
		Best  *struct {
			Band  string `json:"band"`
			Count int    `json:"count"`
		} `json:"best_available"`
	}
	json.Unmarshal(ctx.PostBody(), &body)
	id := fmt.Sprintf("h%d", g.holds.Add(1))
	ok := map[string]any{"hold_id": id, "expires_at": time.Now().Add(21 * time.Second).Format(time.RFC3339Nano)}
	switch {
	case body.Best != nil && body.Best.Count > 6:
		g.count(fmt.Sprintf("hold best %d", body.Best.Count))
		reply(ctx, 422, map[string]any{"error": "limit_exceeded"})
	case body.Best != nil:
		g.count(fmt.Sprintf("hold best %s", map[bool]string{true: "1-6", false: "other"}[body.Best.Count >= 1 && body.Best.Count <= 6]))
		reply(ctx, 201, ok)
	default:
		g.count("hold picked")
		g.mu.Lock()
		taken := false
		for _, s := range body.Seats {
			taken = taken || g.held[s]
		}
		if !taken {
			for _, s := range body.Seats {
				g.held[s] = true
			}
		}
		g.mu.Unlock()
		if taken {
			reply(ctx, 409, map[string]any{"error": "seats_taken"})
			return
		}
		reply(ctx, 201, ok)
	}
}
