// Package http is the gateway's edge on fasthttp: join, status polls (no
// store round trip in the steady state), the admit-token keys, the
// operators' dials and stats, health and metrics.
package http

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/redis"
	"github.com/onsale/onsale/gateway/token"
)

// Server serves the waiting room.
type Server struct {
	Room  *Room
	Queue *token.QueueSigner
	Admit *token.Ring
	// AdminToken guards /admin/ (compared in constant time).
	AdminToken string
	// AccountSecret verifies account JWTs (HS256, with phone_verified);
	// RequireIdentity refuses joins without one.
	AccountSecret   []byte
	RequireIdentity bool
	// MaxTickets is the ticket limit put in admit tokens (0: the event's).
	MaxTickets int
	// CheckoutURL is the payment provider's hosted checkout, for the pages.
	CheckoutURL string
	// Per client IP (joins, bad polls) and per queue token (polls): requests
	// per second and burst. Zero takes the defaults: 5/s burst 20 per IP,
	// 2/s burst 10 per token.
	IPRate, TokenRate   float64
	IPBurst, TokenBurst int
	Log                 *slog.Logger

	ipLimit, tokenLimit *limiter
	metrics             *metrics
	jwks                []byte
	maps                seatmaps
	core                *fasthttp.HostClient
}

type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.HistogramVec
	joins    *prometheus.CounterVec
	polls    *prometheus.CounterVec
	leaves   *prometheus.CounterVec
}

// Handler returns the fasthttp handler.
func (s *Server) Handler() fasthttp.RequestHandler {
	def := func(v, d float64) float64 {
		if v > 0 {
			return v
		}
		return d
	}
	s.ipLimit = newLimiter(def(s.IPRate, 5), int(def(float64(s.IPBurst), 20)), 200_000)
	s.tokenLimit = newLimiter(def(s.TokenRate, 2), int(def(float64(s.TokenBurst), 10)), 1_000_000)
	s.jwks, _ = json.Marshal(s.Admit.JWKS())
	s.maps = seatmaps{layout: map[int64][]byte{}, bits: map[int64]bitsAt{}, counts: map[int64]*countsAt{}}
	s.core = newCoreClient(s.Room.CoreURL)
	m := &metrics{reg: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "onsale_gateway_http_request_duration_seconds",
			Help: "Request latency by route and status.", Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .1, .5, 1}},
			[]string{"route", "code"}),
		joins: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "onsale_gateway_joins_total", Help: "Joins by outcome."}, []string{"outcome"}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "onsale_gateway_polls_total", Help: "Status polls by state and whether Redis was touched."},
			[]string{"state", "redis"}),
		leaves: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "onsale_gateway_leaves_total",
			Help: "Fans who said they were done, by outcome (ended: a session's room went back to the line)."}, []string{"outcome"}),
	}
	m.reg.MustRegister(m.requests, m.joins, m.polls, m.leaves, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.metrics = m
	prom := fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	return func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		route := s.route(ctx, prom)
		m.requests.WithLabelValues(route, strconv.Itoa(ctx.Response.StatusCode())).Observe(time.Since(start).Seconds())
	}
}

func (s *Server) route(ctx *fasthttp.RequestCtx, prom fasthttp.RequestHandler) string {
	path := string(ctx.Path())
	method := string(ctx.Method())
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case path == "/healthz":
		writeJSON(ctx, 200, map[string]string{"status": "ok"})
		return "healthz"
	case path == "/readyz":
		if !s.Room.Healthy() {
			fail(ctx, 503, "unavailable", "redis is not answering")
		} else {
			writeJSON(ctx, 200, map[string]string{"status": "ready"})
		}
		return "readyz"
	case path == "/metrics":
		prom(ctx)
		return "metrics"
	case path == "/.well-known/jwks.json":
		ctx.SetContentType("application/json")
		ctx.Response.Header.Set("Cache-Control", "public, max-age=300")
		ctx.SetBody(s.jwks)
		return "jwks"
	case len(parts) == 4 && parts[0] == "v1" && parts[1] == "events" && parts[3] == "queue":
		switch method {
		case "POST":
			s.join(ctx, parts[2])
			return "join"
		case "DELETE":
			s.leave(ctx, parts[2])
			return "leave"
		}
		fail(ctx, 405, "method_not_allowed", "POST to join the queue, DELETE to leave it")
		return "join"
	case len(parts) == 5 && parts[0] == "v1" && parts[1] == "events" && parts[3] == "queue" && parts[4] == "status":
		if method != "GET" {
			fail(ctx, 405, "method_not_allowed", "GET the queue status")
			return "status"
		}
		s.status(ctx, parts[2])
		return "status"
	case len(parts) == 4 && parts[0] == "v1" && parts[1] == "events" && parts[3] == "layout" && method == "GET":
		s.layout(ctx, parts[2])
		return "layout"
	case len(parts) == 4 && parts[0] == "v1" && parts[1] == "events" && parts[3] == "stats" && method == "GET":
		s.counts(ctx, parts[2])
		return "stats"
	case len(parts) == 4 && parts[0] == "v1" && parts[1] == "events" && parts[3] == "seatmap" && method == "GET":
		s.seatmap(ctx, parts[2])
		return "seatmap"
	case len(parts) == 4 && parts[0] == "admin" && parts[1] == "v1" && parts[2] == "events":
		s.admin(ctx, parts[3])
		return "admin"
	case method == "GET" && len(parts) == 2 && parts[0] == "events":
		s.page(ctx, "waiting.html")
		return "page"
	case method == "GET" && len(parts) == 3 && parts[0] == "events" && parts[2] == "book":
		s.page(ctx, "book.html")
		return "page"
	case method == "GET" && (path == "/admin" || path == "/admin/"):
		s.page(ctx, "admin.html")
		return "page"
	case method == "GET" && len(parts) == 2 && parts[0] == "static":
		s.page(ctx, parts[1])
		return "static"
	case method == "GET" && path == "/web-config.json":
		s.webConfig(ctx)
		return "page"
	case len(parts) >= 2 && parts[0] == "v1" && (parts[1] == "events" || parts[1] == "holds" || parts[1] == "bookings"):
		// The rest of the booking API belongs to the core.
		s.proxy(ctx)
		return "proxy"
	}
	fail(ctx, 404, "not_found", "no such route")
	return "unmatched"
}

func writeJSON(ctx *fasthttp.RequestCtx, code int, v any) {
	b, _ := json.Marshal(v)
	ctx.SetStatusCode(code)
	ctx.SetContentType("application/json")
	ctx.SetBody(append(b, '\n'))
}

func fail(ctx *fasthttp.RequestCtx, code int, errCode, msg string) {
	if code == 503 || code == 429 {
		if len(ctx.Response.Header.Peek("Retry-After")) == 0 {
			ctx.Response.Header.Set("Retry-After", "2")
		}
	}
	writeJSON(ctx, code, map[string]string{"error": errCode, "message": msg})
}

func eventID(s string) (int64, bool) {
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil && id > 0
}

func cookieName(event int64) string { return "onsale_q_" + strconv.FormatInt(event, 10) }

const visitorCookie = "onsale_vid"

func setCookie(ctx *fasthttp.RequestCtx, name, value string, maxAge time.Duration) {
	var c fasthttp.Cookie
	c.SetKey(name)
	c.SetValue(value)
	c.SetPath("/")
	c.SetHTTPOnly(true)
	c.SetSameSite(fasthttp.CookieSameSiteLaxMode)
	c.SetMaxAge(int(maxAge.Seconds()))
	ctx.Response.Header.SetCookie(&c)
}

// clientIP is the connection's address: behind a trusted proxy the
// deployment sets it from the proxy's header before it reaches here.
func clientIP(ctx *fasthttp.RequestCtx) string { return ctx.RemoteIP().String() }

func (s *Server) limited(ctx *fasthttp.RequestCtx, l *limiter, key string) bool {
	ok, wait := l.allow(key, time.Now())
	if !ok {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		fail(ctx, 429, "rate_limited", "too many requests: slow down")
	}
	return !ok
}

// identity is the fan joining: an account (from an account JWT with a
// verified phone) or, unless identity is required, the visitor cookie.
func (s *Server) identity(ctx *fasthttp.RequestCtx) (string, int, string) {
	if auth := string(ctx.Request.Header.Peek("Authorization")); strings.HasPrefix(auth, "Bearer ") && len(s.AccountSecret) > 0 {
		var c struct {
			jwt.RegisteredClaims
			PhoneVerified bool `json:"phone_verified"`
		}
		_, err := jwt.ParseWithClaims(strings.TrimPrefix(auth, "Bearer "), &c, func(*jwt.Token) (any, error) { return s.AccountSecret, nil },
			jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired())
		switch {
		case err != nil || c.Subject == "":
			return "", 401, "the account token is not valid"
		case !c.PhoneVerified:
			return "", 403, "verify your phone number to join the queue"
		}
		return "acct:" + c.Subject, 0, ""
	}
	if s.RequireIdentity {
		return "", 401, "sign in with a verified phone number to join the queue"
	}
	vid := string(ctx.Request.Header.Cookie(visitorCookie))
	if len(vid) < 16 || len(vid) > 64 {
		vid = token.NewVisitorID()
		setCookie(ctx, visitorCookie, vid, 30*24*time.Hour)
	}
	return "vis:" + vid, 0, ""
}

// powOK checks a proof of work: SHA-256 of "<event>:<identity>:<nonce>"
// must start with difficulty zero bits.
func powOK(event int64, identity, nonce string, difficulty int) bool {
	if difficulty <= 0 {
		return true
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d:%s:%s", event, identity, nonce)))
	return leadingZeros(sum[:]) >= difficulty
}

func leadingZeros(b []byte) int {
	n := 0
	for len(b) >= 8 {
		v := binary.BigEndian.Uint64(b)
		if v != 0 {
			for v&(1<<63) == 0 {
				n++
				v <<= 1
			}
			return n
		}
		n += 64
		b = b[8:]
	}
	return n
}

type queueReply struct {
	State          string     `json:"state"`
	QueueToken     string     `json:"queue_token,omitempty"`
	Position       int64      `json:"position,omitempty"`
	Ahead          int64      `json:"ahead"`
	EtaSeconds     int64      `json:"eta_seconds"`
	PollAfterMs    int64      `json:"poll_after_ms"`
	OnsaleAt       *time.Time `json:"onsale_at,omitempty"`
	AdmitToken     string     `json:"admit_token,omitempty"`
	AdmitExpiresAt *time.Time `json:"admit_expires_at,omitempty"`
	Message        string     `json:"message,omitempty"`
}

func (s *Server) join(ctx *fasthttp.RequestCtx, idStr string) {
	ev, ok := eventID(idStr)
	if !ok {
		fail(ctx, 404, "not_found", "no such event")
		return
	}
	if s.limited(ctx, s.ipLimit, clientIP(ctx)) {
		s.metrics.joins.WithLabelValues("rate_limited").Inc()
		return
	}
	identity, code, msg := s.identity(ctx)
	if code != 0 {
		s.metrics.joins.WithLabelValues("identity").Inc()
		fail(ctx, code, "identity_required", msg)
		return
	}
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := s.Room.Ensure(c, ev)
	switch {
	case errors.Is(err, gateway.ErrNoEvent):
		fail(ctx, 404, "not_found", "no such event")
		return
	case err != nil:
		s.metrics.joins.WithLabelValues("unavailable").Inc()
		fail(ctx, 503, "unavailable", "the waiting room cannot take new arrivals right now; try again")
		return
	}
	if d := v.dials.PowDifficulty; d > 0 && !powOK(ev, identity, string(ctx.Request.Header.Peek("X-Pow")), d) {
		s.metrics.joins.WithLabelValues("pow").Inc()
		writeJSON(ctx, 428, map[string]any{"error": "proof_of_work_required",
			"message":   fmt.Sprintf("send X-Pow: a nonce with SHA-256(\"%d:%s:<nonce>\") starting with %d zero bits", ev, identity, d),
			"challenge": fmt.Sprintf("%d:%s:", ev, identity), "difficulty": d})
		return
	}
	r, err := s.Room.Store.Join(c, ev, identity)
	if errors.Is(err, gateway.ErrNoEvent) {
		// Redis lost the room (restarted empty): set it up again, once.
		s.Room.Forget(ev)
		if v, err = s.Room.Ensure(c, ev); err == nil {
			r, err = s.Room.Store.Join(c, ev, identity)
		}
	}
	if err != nil {
		s.metrics.joins.WithLabelValues("unavailable").Inc()
		fail(ctx, 503, "unavailable", "the waiting room cannot take new arrivals right now; try again")
		return
	}
	s.metrics.joins.WithLabelValues(r.State).Inc()
	switch r.State {
	case gateway.StateNotOpen:
		writeJSON(ctx, 409, map[string]any{"error": "not_open", "message": "the queue opens at " + r.At.UTC().Format(time.RFC3339), "opens_at": r.At})
		return
	case gateway.StateClosed:
		writeJSON(ctx, 410, map[string]any{"error": "closed", "message": "the sale is closed"})
		return
	case gateway.StateEnded:
		writeJSON(ctx, 410, map[string]any{"error": "session_ended", "message": "you have had your turn in this sale"})
		return
	}
	tok, err := s.Queue.Sign(ev, identity, r.Position, 0, v.dials.Epoch)
	if err != nil {
		fail(ctx, 500, "internal", "could not sign the queue token")
		return
	}
	setCookie(ctx, cookieName(ev), tok, 24*time.Hour)
	reply := s.describe(v, &token.Queue{Event: ev, Position: r.Position}, time.Now())
	reply.QueueToken = tok
	ctx.Response.Header.Set("Cache-Control", "private, no-store")
	writeJSON(ctx, 200, reply)
}

// describe answers "where am I?" from the token and the cached view alone.
func (s *Server) describe(v view, q *token.Queue, now time.Time) queueReply {
	d, tk := v.dials, v.tick
	r := queueReply{State: gateway.StateWaiting, Position: q.Position}
	switch {
	case !d.ClosesAt.IsZero() && !now.Before(d.ClosesAt):
		r.State, r.PollAfterMs = gateway.StateClosed, 60000
		return r
	case d.SoldOut:
		r.State, r.PollAfterMs = gateway.StateSoldOut, 60000
		return r
	case q.Position == 0:
		r.State = gateway.StatePrequeue
		on := d.OnsaleAt
		r.OnsaleAt = &on
		r.PollAfterMs = jitter(clamp(on.Sub(now).Milliseconds()/2, 1000, 30000))
		return r
	}
	r.Ahead = max(0, q.Position-tk.Serving-1)
	rate := v.offerRate
	if rate <= 0 && !d.Paused {
		rate = float64(d.NewUsersPerMinute)
	}
	// Poll often enough never to miss a turn: a third of the claim window at most.
	longest := clamp(int64(d.ClaimSeconds)*1000/3, 1000, 30000)
	if rate > 0 {
		r.EtaSeconds = int64(math.Ceil(float64(r.Ahead) / rate * 60))
		r.PollAfterMs = clamp(r.EtaSeconds*1000/10, 1000, longest)
	} else {
		r.EtaSeconds = -1 // unknown: nobody is being let in
		r.PollAfterMs = longest
	}
	if d.Paused {
		// A pause is for a moment: come back soon, to be first in when it ends.
		r.State = gateway.StatePaused
		r.PollAfterMs = min(r.PollAfterMs, 5000)
	}
	r.PollAfterMs = jitter(r.PollAfterMs)
	return r
}

// jitter spreads polls by +-25% so a crowd told the same interval (at
// onsale, say) does not come back in one wave.
func jitter(ms int64) int64 {
	return ms*3/4 + rand.Int64N(ms/2+1)
}

func clamp(v, lo, hi int64) int64 { return min(max(v, lo), hi) }

func (s *Server) queueToken(ctx *fasthttp.RequestCtx, ev int64) string {
	if auth := string(ctx.Request.Header.Peek("Authorization")); strings.HasPrefix(auth, "Bearer ") {
		return strings.TrimPrefix(auth, "Bearer ")
	}
	return string(ctx.Request.Header.Cookie(cookieName(ev)))
}

// fanToken verifies the fan's queue token (bearer or cookie) and applies
// the per-token limit; a bad token is limited per address and answered 401.
// It reports false when it has answered.
func (s *Server) fanToken(ctx *fasthttp.RequestCtx, ev int64) (*token.Queue, string, bool) {
	raw := s.queueToken(ctx, ev)
	q, err := s.Queue.Verify(raw, ev)
	if err != nil {
		if !s.limited(ctx, s.ipLimit, clientIP(ctx)) {
			fail(ctx, 401, "invalid_queue_token", "join the queue first: the queue token is missing, invalid or expired")
		}
		return nil, "", false
	}
	if s.limited(ctx, s.tokenLimit, q.ID+q.Subject) {
		return nil, "", false
	}
	return q, raw, true
}

func (s *Server) status(ctx *fasthttp.RequestCtx, idStr string) {
	ev, ok := eventID(idStr)
	if !ok {
		fail(ctx, 404, "not_found", "no such event")
		return
	}
	q, raw, ok := s.fanToken(ctx, ev)
	if !ok {
		return
	}
	v, ok := s.Room.View(ev)
	if !ok || v.fetched.IsZero() {
		fail(ctx, 503, "unavailable", "the waiting room is starting; try again")
		return
	}
	now := time.Now()
	touched := "no"
	ctx.Response.Header.Set("Cache-Control", "private, no-store")
	if q.Epoch != v.dials.Epoch {
		// Redis lost the room this place belonged to: its places are gone.
		setCookie(ctx, cookieName(ev), "", -time.Hour)
		writeJSON(ctx, 409, map[string]any{"error": "rejoin", "message": "the waiting room was reset: join the queue again"})
		return
	}
	// Admitted already: the session is in the token.
	if q.Admitted > now.UnixMilli() {
		s.admitted(ctx, ev, q, time.UnixMilli(q.Admitted), raw, &touched)
		return
	}
	// (The steady-state poll below touches no Redis and needs no deadline:
	// contexts are made only on the two paths that do.)
	newTok := ""
	// A pre-queue fan learns its drawn place once, after onsale.
	if q.Position == 0 && !now.Before(v.dials.OnsaleAt) {
		touched = "yes"
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		pos, err := s.Room.Store.Position(c, ev, q.Subject)
		if err == nil && pos > 0 {
			q.Position = pos
			newTok, _ = s.Queue.Sign(ev, q.Subject, pos, 0, v.dials.Epoch)
		}
	}
	r := s.describe(v, q, now)
	if r.State == gateway.StateWaiting && q.Position > 0 && q.Position <= v.tick.Serving {
		// This fan's place has been offered: claim it (one round trip per fan).
		touched = "yes"
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, n, err := s.Room.Store.Claim(c, ev, q.Subject, q.Position)
		switch {
		case err != nil:
			// Redis is down: never admit from a guess; the fan keeps waiting.
			r.PollAfterMs = 2000
		case st == redis.ClaimAdmitted:
			q.Admitted = n
			tok, _ := s.Queue.Sign(ev, q.Subject, q.Position, q.Admitted, v.dials.Epoch)
			s.admitted(ctx, ev, q, time.UnixMilli(n), tok, &touched)
			return
		case st == redis.ClaimMoved || st == redis.ClaimRequeued:
			// A stale token (another tab moved on), or the turn lapsed
			// unclaimed and the fan went to the back: the current place.
			q.Position = n
			newTok, _ = s.Queue.Sign(ev, q.Subject, n, 0, v.dials.Epoch)
			r = s.describe(v, q, now)
			if st == redis.ClaimRequeued {
				r.Message = "your turn came and went unclaimed: you are back in line"
			}
		case st == redis.ClaimEnded:
			setCookie(ctx, cookieName(ev), "", -time.Hour)
			writeJSON(ctx, 410, map[string]any{"error": "session_ended", "message": "you have had your turn in this sale"})
			return
		case st == redis.ClaimPaused:
			r.State = gateway.StatePaused
		}
	}
	if newTok != "" {
		setCookie(ctx, cookieName(ev), newTok, 24*time.Hour)
		r.QueueToken = newTok
	}
	s.metrics.polls.WithLabelValues(r.State, touched).Inc()
	writeJSON(ctx, 200, r)
}

// leave: a fan who is done (tickets bought, or giving up) ends the session
// now, so the next fan in line comes in at once instead of when the session
// would have run out; a fan still in line gives the place up. The admit
// token already issued stays valid until it expires: leaving gives nothing
// back to the leaver, it only hands the room on.
func (s *Server) leave(ctx *fasthttp.RequestCtx, idStr string) {
	ev, ok := eventID(idStr)
	if !ok {
		fail(ctx, 404, "not_found", "no such event")
		return
	}
	q, _, ok := s.fanToken(ctx, ev)
	if !ok {
		return
	}
	ctx.Response.Header.Set("Cache-Control", "private, no-store")
	outcome := redis.LeaveNone
	var err error
	if v, ok := s.Room.View(ev); !ok || q.Epoch == v.dials.Epoch {
		// (A token of a room Redis has lost has nothing left to leave.)
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if outcome, err = s.Room.Store.Leave(c, ev, q.Subject); err != nil {
			fail(ctx, 503, "unavailable", "the waiting room cannot record that right now; try again")
			return
		}
	}
	s.metrics.leaves.WithLabelValues(outcome).Inc()
	setCookie(ctx, cookieName(ev), "", -time.Hour)
	writeJSON(ctx, 200, map[string]string{"outcome": outcome})
}

func (s *Server) admitted(ctx *fasthttp.RequestCtx, ev int64, q *token.Queue, until time.Time, queueTok string, touched *string) {
	admit, err := s.Admit.Admit(q.Subject, ev, until, s.MaxTickets)
	if err != nil {
		fail(ctx, 500, "internal", "could not sign the admit token")
		return
	}
	setCookie(ctx, cookieName(ev), queueTok, time.Until(until)+time.Minute)
	s.metrics.polls.WithLabelValues(gateway.StateAdmitted, *touched).Inc()
	writeJSON(ctx, 200, queueReply{State: gateway.StateAdmitted, QueueToken: queueTok, Position: q.Position,
		AdmitToken: admit, AdmitExpiresAt: &until, PollAfterMs: 30000})
}

// dialsPatch is a partial update of the dials.
type dialsPatch struct {
	NewUsersPerMinute *int       `json:"new_users_per_minute"`
	TotalActiveUsers  *int       `json:"total_active_users"`
	SessionSeconds    *int       `json:"session_seconds"`
	ClaimSeconds      *int       `json:"claim_seconds"`
	PrequeueAt        *time.Time `json:"prequeue_at"`
	OnsaleAt          *time.Time `json:"onsale_at"`
	ClosesAt          *time.Time `json:"closes_at"`
	Paused            *bool      `json:"paused"`
	Queueing          *string    `json:"queueing"`
	PowDifficulty     *int       `json:"pow_difficulty"`
	SoldOut           *bool      `json:"sold_out"`
}

// changed reports whether the patch sets a dial (by its field name).
func (p dialsPatch) changed(field string) bool {
	switch field {
	case "new_users_per_minute":
		return p.NewUsersPerMinute != nil
	case "total_active_users":
		return p.TotalActiveUsers != nil
	case "session_seconds":
		return p.SessionSeconds != nil
	case "claim_seconds":
		return p.ClaimSeconds != nil
	case "prequeue_at":
		return p.PrequeueAt != nil
	case "onsale_at":
		return p.OnsaleAt != nil
	case "closes_at":
		return p.ClosesAt != nil
	case "paused":
		return p.Paused != nil
	case "queueing":
		return p.Queueing != nil
	case "pow_difficulty":
		return p.PowDifficulty != nil
	case "sold_out":
		return p.SoldOut != nil
	}
	return false
}

func (p dialsPatch) apply(d *gateway.Dials) {
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	set(&d.NewUsersPerMinute, p.NewUsersPerMinute)
	set(&d.TotalActiveUsers, p.TotalActiveUsers)
	set(&d.SessionSeconds, p.SessionSeconds)
	set(&d.ClaimSeconds, p.ClaimSeconds)
	set(&d.PowDifficulty, p.PowDifficulty)
	if p.PrequeueAt != nil {
		d.PrequeueAt = *p.PrequeueAt
	}
	if p.OnsaleAt != nil {
		d.OnsaleAt = *p.OnsaleAt
	}
	if p.ClosesAt != nil {
		d.ClosesAt = *p.ClosesAt
	}
	if p.Paused != nil {
		d.Paused = *p.Paused
	}
	if p.Queueing != nil {
		d.Queueing = *p.Queueing
	}
	if p.SoldOut != nil {
		d.SoldOut = *p.SoldOut
	}
}

func (s *Server) admin(ctx *fasthttp.RequestCtx, idStr string) {
	auth := string(ctx.Request.Header.Peek("Authorization"))
	if s.AdminToken == "" || subtle.ConstantTimeCompare([]byte(auth), []byte("Bearer "+s.AdminToken)) != 1 {
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="onsale-admin"`)
		fail(ctx, 401, "unauthorized", "an admin token is required")
		return
	}
	ev, ok := eventID(idStr)
	if !ok {
		fail(ctx, 404, "not_found", "no such event")
		return
	}
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := s.Room.Ensure(c, ev)
	switch {
	case errors.Is(err, gateway.ErrNoEvent):
		fail(ctx, 404, "not_found", "no such event")
		return
	case err != nil:
		fail(ctx, 503, "unavailable", "redis is not answering")
		return
	}
	switch string(ctx.Method()) {
	case "GET":
	case "PATCH":
		if len(ctx.PostBody()) > 16<<10 {
			fail(ctx, 413, "body_too_large", "the body is over 16 KiB")
			return
		}
		var p dialsPatch
		dec := json.NewDecoder(strings.NewReader(string(ctx.PostBody())))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			fail(ctx, 400, "invalid_request", "malformed JSON body: "+err.Error())
			return
		}
		cur, err := s.Room.Store.Dials(c, ev)
		if err != nil {
			fail(ctx, 503, "unavailable", "redis is not answering")
			return
		}
		if p.OnsaleAt != nil || p.PrequeueAt != nil || p.Queueing != nil {
			if frozen, err := s.Room.Store.Frozen(c, ev); err != nil || frozen {
				fail(ctx, 409, "onsale_passed", "the pre-queue is fixed: onsale_at, prequeue_at and queueing can no longer change")
				return
			}
		}
		p.apply(&cur)
		if err := cur.Validate(); err != nil {
			fail(ctx, 400, "invalid_request", err.Error())
			return
		}
		if _, err := s.Room.Store.PatchDials(c, ev, cur, p.changed); err != nil {
			fail(ctx, 503, "unavailable", "redis is not answering")
			return
		}
		s.Log.Info("dials changed", "event", ev, "by", clientIP(ctx))
		if err := s.Room.refresh(c, ev); err == nil {
			v, _ = s.Room.View(ev)
		}
	default:
		fail(ctx, 405, "method_not_allowed", "GET or PATCH")
		return
	}
	tk := v.tick
	queued := max(0, tk.Queue-tk.Serving)
	rate := float64(tk.ClaimsPerMinute)
	drain := int64(-1)
	if rate > 0 {
		drain = int64(math.Ceil(float64(queued) / rate * 60))
	}
	writeJSON(ctx, 200, map[string]any{"event_id": ev, "dials": v.dials, "stats": map[string]any{
		"queued": queued, "serving": tk.Serving, "queue_length": tk.Queue, "admitted_per_minute": tk.ClaimsPerMinute,
		"active": tk.Active, "offered_unclaimed": tk.Offers, "drain_seconds": drain, "as_of": v.fetched}})
}
