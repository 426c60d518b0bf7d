// Package redis keeps the waiting room in Redis: dials, the pre-queue, the
// line, the admission bucket, offers and sessions. Every key of an event
// carries the hash tag {evt:<id>} and every script takes its keys through
// KEYS, so the scripts run on Redis Cluster as on a single server.
package redis

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/shared/redisconn"
	"github.com/onsale/onsale/shared/seatmap"
)

// Every script is the prelude (clock, dials), the pre-queue draw's
// functions (prequeue.lua: the draw's rule lives there) and its own body.
var (
	//go:embed prelude.lua
	preludeLua string
	//go:embed prequeue.lua
	prequeueLua string
	//go:embed join.lua
	joinLua string
	//go:embed admission_bucket.lua
	admissionBucketLua string
	//go:embed claim.lua
	claimLua string
	//go:embed position.lua
	positionLua string
	//go:embed leave.lua
	leaveLua string
	//go:embed restore.lua
	restoreLua string
	//go:embed release.lua
	releaseLua string

	prelude = preludeLua + prequeueLua

	joinScript            = goredis.NewScript(prelude + joinLua)
	admissionBucketScript = goredis.NewScript(prelude + admissionBucketLua)
	claimScript           = goredis.NewScript(prelude + claimLua)
	positionScript        = goredis.NewScript(prelude + positionLua)
	leaveScript           = goredis.NewScript(prelude + leaveLua)
	restoreScript         = goredis.NewScript(prelude + restoreLua)
	releaseScript         = goredis.NewScript(releaseLua)
)

var (
	_ gateway.Store   = (*Store)(nil)
	_ gateway.Watcher = (*Store)(nil)
)

// Store is the waiting room's Redis store.
type Store struct {
	rdb goredis.UniversalClient
}

// Open connects to one server (redis://...) or a cluster (a comma-separated
// list of host:port), the one way every onsale service does (shared/redisconn),
// and pings it.
func Open(ctx context.Context, addrs string) (*Store, error) {
	rdb, err := redisconn.Open(ctx, addrs)
	if err != nil {
		return nil, err
	}
	return &Store{rdb: rdb}, nil
}

// NewStore wraps an existing client.
func NewStore(rdb goredis.UniversalClient) *Store { return &Store{rdb: rdb} }

// Close closes the client.
func (s *Store) Close() error { return s.rdb.Close() }

// Client exposes the client to tests.
func (s *Store) Client() goredis.UniversalClient { return s.rdb }

// keys of one event; the {evt:<id>} hash tag puts them in one cluster slot.
// tick (the last tick, and so the tick lease: admission_bucket.lua)
// expires by itself a lease after the last tick, so Expire leaves it alone.
type keys struct{ dials, pre, ids, frozen, seq, bucket, offers, active, claims, tick string }

func keysOf(event int64) keys {
	p := "{evt:" + strconv.FormatInt(event, 10) + "}:"
	return keys{p + "dials", p + "pre", p + "ids", p + "frozen", p + "seq", p + "bucket", p + "offers", p + "active", p + "claims",
		p + "tick"}
}

func unavailable(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %v", gateway.ErrUnavailable, err)
}

// decode reads a script's reply into dst (each a *string or an *int64), or
// says why it cannot: never an index out of range or a failed type
// assertion, which would panic in the handler. Redis cuts a reply table
// at its first nil, so a script that returns a nil by mistake answers
// fewer values than it declares.
func decode(script string, v []any, dst ...any) error {
	if len(v) != len(dst) {
		return malformed(script, v, len(dst))
	}
	for i, d := range dst {
		ok := false
		switch d := d.(type) {
		case *string:
			*d, ok = v[i].(string)
		case *int64:
			*d, ok = v[i].(int64)
		}
		if !ok {
			return fmt.Errorf("redis: the %s script answered %v: value %d is a %T", script, v, i, v[i])
		}
	}
	return nil
}

// malformed is the error of a reply of the wrong length: a bug in a script
// (or a script of another version), not Redis being unreachable.
func malformed[T any](script string, v []T, want int) error {
	return fmt.Errorf("redis: the %s script answered %v: %d values, want %d", script, v, len(v), want)
}

// Join gives identity a place in line (join.lua), or returns the place it has.
func (s *Store) Join(ctx context.Context, event int64, identity string) (gateway.JoinResult, error) {
	k := keysOf(event)
	v, err := joinScript.Run(ctx, s.rdb, []string{k.dials, k.pre, k.ids, k.frozen, k.seq}, identity, drawScore()).Slice()
	if err != nil {
		return gateway.JoinResult{}, unavailable(err)
	}
	var state string
	var pos, at int64
	if err := decode("join", v, &state, &pos, &at); err != nil {
		return gateway.JoinResult{}, err
	}
	r := gateway.JoinResult{Position: pos, At: time.UnixMilli(at)}
	switch state {
	case "no_event":
		return r, gateway.ErrNoEvent
	case "pre":
		r.State = gateway.StatePrequeue
	case "pos":
		r.State = gateway.StateWaiting
	case "not_open":
		r.State = gateway.StateNotOpen
	case "closed":
		r.State = gateway.StateClosed
	case "ended":
		r.State = gateway.StateEnded
	}
	return r, nil
}

// Position returns a pre-queue fan's place once the pre-queue is frozen
// (0 while it is not): ErrEnded for an identity that left or had its
// session, ErrNoEvent for one the frozen pre-queue never knew.
func (s *Store) Position(ctx context.Context, event int64, identity string) (int64, error) {
	k := keysOf(event)
	v, err := positionScript.Run(ctx, s.rdb, []string{k.dials, k.pre, k.ids, k.frozen}, identity).Slice()
	if err != nil {
		return 0, unavailable(err)
	}
	var state string
	var pos int64
	if err := decode("position", v, &state, &pos); err != nil {
		return 0, err
	}
	switch state {
	case "unknown":
		return 0, gateway.ErrNoEvent
	case "ended":
		return 0, gateway.ErrEnded
	}
	return pos, nil
}

// Tick advances the admission bucket (admission_bucket.lua) at factor times
// the rate dial (clamped to [0, 1] by the script: never above the dial) and
// reports the event's state, with the factor and the rate it used, when
// lease.Holder holds the event's tick lease or takes it (renewed for
// lease.For); else it reports the holder's last tick. The zero lease ticks
// whoever holds it.
func (s *Store) Tick(ctx context.Context, event int64, factor float64, lease gateway.Lease) (gateway.Tick, error) {
	k := keysOf(event)
	ms := lease.For.Milliseconds()
	if ms <= 0 {
		ms = DefaultLease.Milliseconds()
	}
	v, err := admissionBucketScript.Run(ctx, s.rdb, []string{k.dials, k.pre, k.frozen, k.seq, k.bucket, k.offers, k.active, k.claims, k.tick},
		strconv.FormatFloat(factor, 'f', -1, 64), lease.Holder, ms).Text()
	if err != nil {
		return gateway.Tick{}, unavailable(err)
	}
	return parseTick(v)
}

// DefaultLease is the tick lease of a Tick whose lease says none.
const DefaultLease = time.Second

// LastTick reads the tick the event's lease holder stored, and how long
// its lease has left (Tick.LeaseLeft), in one round trip (GET and PTTL);
// false when there is none (the lease lapsed with it, or the room is gone).
func (s *Store) LastTick(ctx context.Context, event int64) (gateway.Tick, bool, error) {
	key := keysOf(event).tick
	var get *goredis.StringCmd
	var ttl *goredis.DurationCmd
	_, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		get, ttl = p.Get(ctx, key), p.PTTL(ctx, key)
		return nil
	})
	if errors.Is(get.Err(), goredis.Nil) {
		return gateway.Tick{}, false, nil
	}
	if err != nil {
		return gateway.Tick{}, false, unavailable(err)
	}
	tk, err := parseTick(get.Val())
	if err != nil {
		return gateway.Tick{}, false, err
	}
	if left := ttl.Val(); left > 0 { // -1 (no expiry) and -2 (gone since the GET): unknown
		tk.LeaseLeft = left
	}
	return tk, true, nil
}

// Release gives up holder's tick lease of the event (release.lua), and
// tells the other gateways (Watch), so one takes the event over at once
// rather than at its next read of the tick.
func (s *Store) Release(ctx context.Context, event int64, holder string) error {
	n, err := releaseScript.Run(ctx, s.rdb, []string{keysOf(event).tick}, holder).Int()
	if err == nil && n == 1 {
		s.notify(ctx, gateway.Notice{Event: event})
	}
	return unavailable(err)
}

// noticeChannel carries the ids of events whose room changed in a way the
// gateways following its ticks should see at once (Watch). Few messages:
// a room set up, an operator's change, a gateway stopping; never one a
// tick.
const noticeChannel = "onsale:room"

// noticePing is how often a quiet subscription to the notices is pinged.
const noticePing = 30 * time.Second

// notify tells every gateway watching (Watch) that the event's room
// changed: the message is the event's id, and " listed" after it when the
// room was set up and listed. A notice that cannot be sent is not an
// error: a gateway sees the change at its next read of the tick (within a
// lease) or of the events anyway.
func (s *Store) notify(ctx context.Context, n gateway.Notice) {
	msg := strconv.FormatInt(n.Event, 10)
	if n.Listed {
		msg += " listed"
	}
	s.rdb.Publish(ctx, noticeChannel, msg)
}

// Watch implements gateway.Watcher: it subscribes to the notices and calls
// changed with each event's id until ctx ends. The client resubscribes
// after a lost connection by itself; notices sent meanwhile are lost
// (what a gateway then learns at its next read of the tick).
func (s *Store) Watch(ctx context.Context, changed func(gateway.Notice)) {
	ps := s.rdb.Subscribe(ctx, noticeChannel)
	defer ps.Close()
	// The client pings a quiet subscription to find a dead connection; the
	// notices are hints, so every 30 s (not its 3 s) will do: a ping per
	// gateway, not per event.
	ch := ps.Channel(goredis.WithChannelHealthCheckInterval(noticePing))
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			id, kind, _ := strings.Cut(m.Payload, " ")
			if ev, err := strconv.ParseInt(id, 10, 64); err == nil {
				changed(gateway.Notice{Event: ev, Listed: kind == "listed"})
			}
		}
	}
}

// parseTick decodes a tick as admission_bucket.lua encodes it: nine
// numbers and the ticker's name, comma-separated.
func parseTick(v string) (gateway.Tick, error) {
	f := strings.SplitN(v, ",", 10)
	if len(f) != 10 {
		return gateway.Tick{}, malformed("admission bucket", f, 10)
	}
	var n [9]int64
	for i := range n {
		var err error
		if n[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return gateway.Tick{}, fmt.Errorf("redis: the admission bucket script answered %q: %w", v, err)
		}
	}
	return gateway.Tick{Serving: n[0], Queue: n[1], Active: n[2], Offers: n[3], ClaimsPerMinute: n[4], DialsVersion: n[5],
		Now: time.UnixMilli(n[6]), Factor: float64(n[7]) / 1e6, Rate: float64(n[8]) / 1000, Ticker: f[9]}, nil
}

// Claim takes an offered place (claim.lua): it starts identity's session
// (N is when it ends, unix ms); see gateway's Claim outcomes. Safe to retry.
func (s *Store) Claim(ctx context.Context, event int64, identity string, position int64) (gateway.ClaimOutcome, int64, error) {
	k := keysOf(event)
	v, err := claimScript.Run(ctx, s.rdb, []string{k.dials, k.bucket, k.offers, k.active, k.claims, k.ids, k.pre, k.frozen, k.seq},
		identity, position).Slice()
	if err != nil {
		return "", 0, unavailable(err)
	}
	var outcome string
	var n int64
	if err := decode("claim", v, &outcome, &n); err != nil {
		return "", 0, err
	}
	return gateway.ClaimOutcome(outcome), n, nil
}

// Restore puts identity back at the place its token holds when the store
// lost it (restore.lua holds the rule and the bound). Safe to retry.
func (s *Store) Restore(ctx context.Context, event int64, identity string, held gateway.Held) (gateway.RestoreOutcome, int64, error) {
	k := keysOf(event)
	v, err := restoreScript.Run(ctx, s.rdb, []string{k.dials, k.pre, k.ids, k.frozen, k.seq, k.bucket, k.active},
		identity, held.Position, held.Admitted, held.Epoch, drawScore()).Slice()
	if err != nil {
		return "", 0, unavailable(err)
	}
	var outcome string
	var n int64
	if err := decode("restore", v, &outcome, &n); err != nil {
		return "", 0, err
	}
	return gateway.RestoreOutcome(outcome), n, nil
}

// Leave ends identity's session early, or gives up its place in line, and
// keeps it from queueing again for the event (leave.lua); see gateway's
// Leave outcomes. Safe to retry.
func (s *Store) Leave(ctx context.Context, event int64, identity string) (gateway.LeaveOutcome, error) {
	k := keysOf(event)
	v, err := leaveScript.Run(ctx, s.rdb, []string{k.active, k.ids, k.pre, k.frozen}, identity).Text()
	if err != nil {
		return "", unavailable(err)
	}
	return gateway.LeaveOutcome(v), nil
}

// Frozen reports whether the event's pre-queue has been fixed (onsale passed).
func (s *Store) Frozen(ctx context.Context, event int64) (bool, error) {
	n, err := s.rdb.Exists(ctx, keysOf(event).frozen).Result()
	return n == 1, unavailable(err)
}

const eventsKey = "onsale:events"

// InitDials sets the dials of an event the room has not seen, field by
// field only where unset, so concurrent gateways agree and an operator's
// change is never overwritten, lists the event and tells every gateway
// (Watch).
func (s *Store) InitDials(ctx context.Context, event int64, d gateway.Dials) error {
	k := keysOf(event)
	_, err := s.rdb.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		for f, v := range dialFields(d) {
			p.HSetNX(ctx, k.dials, f, v)
		}
		// The epoch tells places handed out by this room from places of a
		// room Redis has since lost: tokens of another epoch must rejoin.
		p.HSetNX(ctx, k.dials, "epoch", strconv.FormatInt(time.Now().UnixNano(), 36))
		return nil
	})
	if err == nil {
		err = s.rdb.SAdd(ctx, eventsKey, event).Err()
	}
	if err == nil {
		s.notify(ctx, gateway.Notice{Event: event, Listed: true}) // the other gateways know the room at once, not at their next listing (Events)
	}
	return unavailable(err)
}

// Expire sets every key of the event's room to expire at at, or to never
// expire (PERSIST) when at is zero, in one round trip. A key the room
// writes later (a join's, a tick's) has no expiry until the next call: the
// room calls it at every set up and dials change and then every
// room.ExpireEvery while it ticks, so by the window's end every key has it.
func (s *Store) Expire(ctx context.Context, event int64, at time.Time) error {
	k := keysOf(event)
	_, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, key := range []string{k.dials, k.pre, k.ids, k.frozen, k.seq, k.bucket, k.offers, k.active, k.claims} {
			if at.IsZero() {
				p.Persist(ctx, key)
			} else {
				p.PExpireAt(ctx, key, at)
			}
		}
		return nil
	})
	return unavailable(err)
}

// Retire takes the event out of the rooms the gateways tick (Events).
func (s *Store) Retire(ctx context.Context, event int64) error {
	return unavailable(s.rdb.SRem(ctx, eventsKey, event).Err())
}

// Events lists the events the room knows.
func (s *Store) Events(ctx context.Context) ([]int64, error) {
	ids, err := s.rdb.SMembers(ctx, eventsKey).Result()
	if err != nil {
		return nil, unavailable(err)
	}
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// Dials reads an event's dials (ErrNoEvent if none).
func (s *Store) Dials(ctx context.Context, event int64) (gateway.Dials, error) {
	m, err := s.rdb.HGetAll(ctx, keysOf(event).dials).Result()
	if err != nil {
		return gateway.Dials{}, unavailable(err)
	}
	if len(m) == 0 {
		return gateway.Dials{}, gateway.ErrNoEvent
	}
	return parseDials(m), nil
}

// SetDials writes every dial and bumps the version, atomically.
func (s *Store) SetDials(ctx context.Context, event int64, d gateway.Dials) (int64, error) {
	var all []string
	for _, dl := range gateway.DialList {
		all = append(all, dl.Name)
	}
	return s.PatchDials(ctx, event, d, all)
}

// PatchDials writes only the named dials of d (so two operators changing
// different dials at once do not undo each other) and bumps the version,
// and tells every gateway (Watch).
func (s *Store) PatchDials(ctx context.Context, event int64, d gateway.Dials, changed []string) (int64, error) {
	k := keysOf(event)
	var ver *goredis.IntCmd
	_, err := s.rdb.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		all := dialFields(d)
		f := make(map[string]any, len(changed))
		for _, name := range changed {
			if v, ok := all[name]; ok {
				f[name] = v
			}
		}
		if len(f) > 0 {
			p.HSet(ctx, k.dials, f)
		}
		ver = p.HIncrBy(ctx, k.dials, "version", 1)
		return nil
	})
	if err != nil {
		return 0, unavailable(err)
	}
	s.notify(ctx, gateway.Notice{Event: event}) // the other gateways read the new dials at once, not at their next read of the tick
	return ver.Val(), nil
}

// dialFields encodes the dials as the hash stores them, walking
// gateway.DialList: numbers and strings as they are, booleans as 0/1, times
// as unix milliseconds (0: unset); and the version.
func dialFields(d gateway.Dials) map[string]any {
	f := map[string]any{"version": d.Version}
	for _, dl := range gateway.DialList {
		switch v := dl.Field(&d).(type) {
		case *int:
			f[dl.Name] = *v
		case *string:
			f[dl.Name] = *v
		case *bool:
			f[dl.Name] = 0
			if *v {
				f[dl.Name] = 1
			}
		case *time.Time:
			f[dl.Name] = int64(0)
			if !v.IsZero() {
				f[dl.Name] = v.UnixMilli()
			}
		default:
			panic(fmt.Sprintf("dial %s: no Redis encoding for %T", dl.Name, v))
		}
	}
	return f
}

// parseDials decodes the hash dialFields wrote, and the epoch.
func parseDials(m map[string]string) gateway.Dials {
	i := func(k string) int64 { n, _ := strconv.ParseInt(m[k], 10, 64); return n }
	d := gateway.Dials{Version: i("version"), Epoch: m["epoch"]}
	for _, dl := range gateway.DialList {
		switch v := dl.Field(&d).(type) {
		case *int:
			*v = int(i(dl.Name))
		case *string:
			*v = m[dl.Name]
		case *bool:
			*v = i(dl.Name) == 1
		case *time.Time:
			if n := i(dl.Name); n != 0 {
				*v = time.UnixMilli(n)
			}
		default:
			panic(fmt.Sprintf("dial %s: no Redis encoding for %T", dl.Name, v))
		}
	}
	return d
}

// Forget deletes every key of an event (tests, and events long over).
func (s *Store) Forget(ctx context.Context, event int64) error {
	k := keysOf(event)
	err := s.rdb.Del(ctx, k.dials, k.pre, k.ids, k.frozen, k.seq, k.bucket, k.offers, k.active, k.claims, k.tick).Err()
	if err == nil {
		err = s.rdb.SRem(ctx, eventsKey, event).Err()
	}
	return unavailable(err)
}

// Seatmap returns an event's availability bitmap as the core keeps it (nil
// when there is none).
func (s *Store) Seatmap(ctx context.Context, event int64) ([]byte, error) {
	b, err := s.rdb.Get(ctx, seatmap.Key(event)).Bytes()
	if err == goredis.Nil {
		return nil, nil
	}
	return b, unavailable(err)
}
