// Package room is the gateway's in-process picture of the waiting room: one
// ticker keeps the view of every known event in its sale window
// (gateway.Dials.Window), its dials and its last tick, so a fan's status
// poll is answered from memory, with no store round trip. Of all the
// gateways, one ticks an event (the event's tick lease in the store,
// gateway.Lease): it advances the admission bucket at the share of the
// rate dial the core's health allows (gateway/health); the others follow
// it, reading its last tick once a lease (when the lease would lapse were
// it not renewed), and take the lease over when it lapses (its holder
// died, or lost the store). A change they must see at once (the dials, a
// lease given up) the store pushes to them (gateway.Watcher). So the
// store's work per event hardly grows with the number of gateways: ten
// reads of the admission bucket a second, and one cheap read a second per
// other gateway.
package room

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/onsale/onsale/gateway"
)

// View is what a gateway knows of an event between ticks: the dials and the
// last tick. Polls read it; only the ticker (and Ensure, Refresh) write it,
// and they never change a View they have stored: each change stores a new
// one in its place (Current hands the stored one out to be read).
type View struct {
	Dials   gateway.Dials
	Tick    gateway.Tick
	Fetched time.Time // of the last successful tick; zero: not yet ticked
	// OfferRate is how fast the serving counter moved over the last
	// minute, per minute: the ETA's measure (claims lag behind offers).
	OfferRate float64
	// FullSince is when the room was first seen full (live sessions and
	// open offers at the cap) in the current run of full ticks; zero
	// while it has space. OfferRate says how fast sessions turn over only
	// once the room has been full for a whole RateWindow: before that it
	// still counts the burst that filled it.
	FullSince time.Time
	history   []servingAt
	expired   time.Time // when this gateway last set the room's keys' expiry (Store.Expire)
	checked   time.Time // when the ticker last read the dials of an event outside its window
	// due is when a gateway following another's ticks reads the event's
	// tick next: when the holder's lease, as last read, would lapse (zero:
	// at the next tick).
	due time.Time
}

// Rate is how fast the line is let in, places a minute, as of the last
// tick: the rate dial times the share the core's health allows
// (Tick.Factor), never more than the dial.
func (v View) Rate() float64 { return v.Tick.Rate }

// Lowered reports whether the core's health holds the rate below the dial.
func (v View) Lowered() bool { return v.Tick.Factor < 1 && v.Dials.NewUsersPerMinute > 0 }

// RateWindow is how far back View.OfferRate measures.
const RateWindow = time.Minute

type servingAt struct {
	at      time.Time
	serving int64
}

// Room caches every known event's view, refreshed by one ticker: each tick
// advances the admission bucket in Redis and reads back the serving
// counter, so a poll costs no round trip, and a dial change (a new version)
// is read within one tick.
type Room struct {
	store   gateway.Store
	catalog gateway.Catalog // for an unknown event's onsale and show times
	log     *slog.Logger
	health  Health              // nil: the dial
	record  gateway.DialsRecord // nil: no saved dials (no operators' API)
	holder  string              // this room's name in the tick leases; empty: no lease (WithoutLease)

	mu      sync.RWMutex
	events  map[int64]*View
	ticking map[int64]bool // events whose tick is running
	tickOK  map[int64]bool // whether each event's last tick reached the store
	notices map[int64]bool // events the store says changed (gateway.Watcher), read again at the next tick
	ok      bool           // the last tick of some event reached the store
	factor  float64        // the health's last factor; < 0: not read yet
	lease   time.Duration  // how long a tick lease lasts (LeaseFor; set by Run)
}

// Health is the share of the rate dial the core's health allows, read once
// per tick on its own ticker (health.Monitor: the factor every gateway
// shares; 1 is the dial); the events' ticks use the last factor read.
type Health interface {
	Factor(ctx context.Context) float64
}

// New returns a room over store, learning new events' times from catalog;
// a nil log discards.
func New(store gateway.Store, catalog gateway.Catalog, log *slog.Logger) *Room {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Room{store: store, catalog: catalog, log: log, events: make(map[int64]*View),
		ticking: make(map[int64]bool), tickOK: make(map[int64]bool), notices: make(map[int64]bool), factor: -1, holder: newHolder(),
		lease: LeaseFor(0)}
}

// newHolder names this room in the tick leases: unique to the process
// (the host and pid say whose it is in Redis; the random part keeps two
// rooms of one process, as tests make, apart). No commas: the store
// keeps it at the end of a comma-separated tick.
func newHolder() string {
	host, _ := os.Hostname()
	var b [6]byte
	rand.Read(b[:])
	h := fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	for i := range len(h) {
		if h[i] == ',' {
			h = h[:i] + "_" + h[i+1:]
		}
	}
	return h
}

// LeaseFor is how long an event's tick lease lasts when the ticker ticks
// every interval: a second, or four ticks when that is longer, so a
// holder whose tick is late (a slow round trip; the tick's own deadline
// is tickDeadline) keeps it, and the others take over from a holder that
// died (or lost the store) within about a second: a gap only delays
// admission (the bucket lets at most a second's worth through after it).
func LeaseFor(interval time.Duration) time.Duration {
	return max(time.Second, 4*interval)
}

// Holder is this room's name in the events' tick leases (Tick.Ticker of
// the ticks it ran); empty without a lease.
func (r *Room) Holder() string { return r.holder }

// WithoutLease makes the room tick every event itself, whoever else does
// (every gateway running the bucket: what the lease ended). Only the
// lease's tests use it, as the control that shows two tickers. Call it
// before Run.
func (r *Room) WithoutLease() *Room {
	r.holder = ""
	return r
}

// WithHealth makes the room tick every bucket at h's factor (read once
// per tick) instead of the dial; call it before Run.
func (r *Room) WithHealth(h Health) *Room {
	r.health = h
	return r
}

// WithRecord makes the room set up a room Redis lost (or never had) from
// the dials operators saved in rec over the event's defaults, and gives
// the operators' API the record to save to (Record); nil: the defaults.
// Call it before Run.
func (r *Room) WithRecord(rec gateway.DialsRecord) *Room {
	r.record = rec
	return r
}

// Record is the durable record of the dials (nil: none).
func (r *Room) Record() gateway.DialsRecord { return r.record }

// Factor is the share of the dial the last tick let the line in at.
func (r *Room) Factor() float64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.factor < 0 {
		return 1 // not read yet: no tick has run, and the first reads it
	}
	return r.factor
}

// readFactor asks the health for this tick's factor (the dial without one).
func (r *Room) readFactor(ctx context.Context) float64 {
	f := 1.0
	if r.health != nil {
		f = r.health.Factor(ctx)
	}
	r.mu.Lock()
	r.factor = f
	r.mu.Unlock()
	return f
}

// tickFactor is the factor a tick uses: the last read, or a first read.
func (r *Room) tickFactor(ctx context.Context) float64 {
	r.mu.RLock()
	f := r.factor
	r.mu.RUnlock()
	if f < 0 {
		return r.readFactor(ctx)
	}
	return f
}

// Store is the store the room is over: the HTTP edge takes it from here,
// so its joins, claims and leaves go to the store whose ticks the room
// shows.
func (r *Room) Store() gateway.Store { return r.store }

// View returns a copy of an event's view, false when unknown.
func (r *Room) View(event int64) (View, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.events[event]
	if !ok {
		return View{}, false
	}
	return *v, true
}

// Current is an event's view as last stored, without a copy (false when
// unknown): every poll reads it, and a View is some 400 bytes. It is
// shared and must only be read; the room stores a new View rather than
// change this one.
func (r *Room) Current(event int64) (*View, bool) {
	r.mu.RLock()
	v, ok := r.events[event]
	r.mu.RUnlock()
	return v, ok
}

// Healthy reports whether the last tick reached the store for at least
// one event (or there was none to tick).
func (r *Room) Healthy() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.ok
}

// Run ticks every interval until ctx ends: each event in its sale window
// (gateway.Dials.Window); an event before its window is left alone but for
// a read of its dials every RestCheck (an operator may move its times), and
// an event whose window is over is retired (retire). Each event ticks on its own
// goroutine (at most tickWorkers at once) with its own deadline
// (tickDeadline), and an event whose last tick is still running is not
// ticked again until it ends; the health's factor is read on its own
// ticker. So a Redis master that times out, rather than refusing, delays
// only its own events' ticks, never the other events' nor the factor.
func (r *Room) Run(ctx context.Context, interval time.Duration) {
	deadline := tickDeadline(interval)
	r.mu.Lock()
	r.lease = LeaseFor(interval)
	r.mu.Unlock()
	defer r.release(context.WithoutCancel(ctx), deadline)
	var wg sync.WaitGroup // every tick and the health's reader end before Run returns (before release)
	defer wg.Wait()
	if r.health != nil {
		// The first factor before the first tick, so no event ticks at an
		// unread one; then on its own ticker.
		hctx, cancel := context.WithTimeout(ctx, deadline)
		r.readFactor(hctx)
		cancel()
		wg.Go(func() { r.runHealth(ctx, interval, deadline) })
	}
	listEvery := time.Second
	if w, ok := r.store.(gateway.Watcher); ok {
		wg.Go(func() { w.Watch(ctx, r.notice) })
		listEvery = ListEvery
	}
	sem := make(chan struct{}, tickWorkers)
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastList time.Time
	for {
		if time.Since(lastList) > listEvery {
			// A deadline, as every tick has (Refresh): a store that hangs
			// must not stop the ticker.
			lctx, cancel := context.WithTimeout(ctx, time.Second)
			ids, err := r.store.Events(lctx)
			cancel()
			if err == nil {
				r.mu.Lock()
				for _, id := range ids {
					if _, ok := r.events[id]; !ok {
						r.events[id] = &View{}
					}
				}
				r.mu.Unlock()
				lastList = time.Now()
			}
		}
		r.tickAll(ctx, deadline, &wg, sem)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// release gives up the tick leases this room holds, its ticks over (Run's
// end: the gateway stops), so the other gateways take its events over at
// their next tick instead of a lease later; a lease it cannot give up
// (the store does not answer) lapses by itself.
func (r *Room) release(ctx context.Context, deadline time.Duration) {
	if r.holder == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	for id, v := range r.Views() {
		if v.Tick.Ticker == r.holder {
			if err := r.store.Release(ctx, id, r.holder); err != nil {
				r.log.Warn("tick lease not given up; it lapses by itself", "event", id, "err", err)
			}
		}
	}
}

// ListEvery is how often the ticker lists the events whose rooms the
// store keeps (Store.Events) when the store tells it of a room set up
// (gateway.Watcher: the notice makes the event known at once, and the
// listing only catches a notice lost); without notices, every second. A
// gateway's listing is one read whatever the events, not per event.
const ListEvery = 5 * time.Second

// notice marks an event changed in the store (gateway.Watcher): its next
// step reads its tick and dials, whenever it read them last. An event it
// does not know it learns from a room set up and listed (as from the
// listing, Store.Events), and leaves alone otherwise (a change of the
// dials of a room nobody listed is no room to tick).
func (r *Room) notice(n gateway.Notice) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.events[n.Event]; !ok {
		if !n.Listed {
			return
		}
		r.events[n.Event] = &View{}
	}
	r.notices[n.Event] = true
}

// noticed takes the event's notice: whether the store said it changed
// since the last call.
func (r *Room) noticed(id int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.notices[id]
	delete(r.notices, id)
	return n
}

// tickWorkers bounds the events ticking at once: a few Redis round trips
// each, so a small pool keeps a gateway's connections and CPU for fans.
const tickWorkers = 16

// tickDeadline is how long one event's tick (or the health's exchange)
// may take: several ticks, so a slow round trip is not a failure, and
// never under 250 ms; well under the bucket's one second of burst.
func tickDeadline(interval time.Duration) time.Duration {
	return max(250*time.Millisecond, 5*interval)
}

// runHealth reads the health's factor every interval until ctx ends.
func (r *Room) runHealth(ctx context.Context, interval, deadline time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, deadline)
		r.readFactor(hctx)
		cancel()
	}
}

// tickAll starts a tick of every event not still ticking, as far as the
// pool allows (an event left out is ticked next time), and does not wait
// for them.
func (r *Room) tickAll(ctx context.Context, deadline time.Duration, wg *sync.WaitGroup, sem chan struct{}) {
	r.mu.Lock()
	ids := make([]int64, 0, len(r.events))
	now := time.Now()
	for id, v := range r.events {
		known := !v.Fetched.IsZero() || !v.checked.IsZero()
		if known && !v.Dials.Live(now) && now.Sub(v.checked) < RestCheck && !r.notices[id] {
			continue // outside its window, its dials read a moment ago
		}
		if !r.ticking[id] {
			ids = append(ids, id)
		}
	}
	r.setHealthy()
	r.mu.Unlock()
	for _, id := range ids {
		select {
		case sem <- struct{}{}:
		default:
			return // the pool is busy (a master hangs): the rest next time
		}
		r.mu.Lock()
		r.ticking[id] = true
		r.mu.Unlock()
		wg.Go(func() {
			defer func() { <-sem }()
			tctx, cancel := context.WithTimeout(ctx, deadline)
			err := r.step(tctx, id)
			cancel()
			if err != nil && ctx.Err() == nil {
				r.log.Warn("tick failed; serving from cache, admission paused", "event", id, "err", err)
			}
			r.mu.Lock()
			delete(r.ticking, id)
			if _, known := r.events[id]; known {
				r.tickOK[id] = err == nil
			}
			r.setHealthy()
			r.mu.Unlock()
		})
	}
}

// RestCheck is how often the ticker reads the dials of an event outside its
// sale window, instead of ticking it: an operator who moves prequeue_at
// sooner is seen within it (well inside gateway.WindowLead).
const RestCheck = 5 * time.Second

// ExpireEvery is how often a gateway ticking an event sets the expiry of
// its room's keys again (besides at set up and at every change of the
// dials): keys a join or a tick made since have none until then. The room
// ticks until the window's end, far more than ExpireEvery after the last
// join (joins close at closes_at, the window ends WindowGrace later), so by
// then every key carries the expiry.
const ExpireEvery = 30 * time.Second

// step is one event's turn of the ticker: a tick while its sale window is
// live; outside it, a read of its dials instead (no tick: the room costs
// Redis nothing while nobody can join it), and the room retired once the
// window is over or its keys are gone.
func (r *Room) step(ctx context.Context, id int64) error {
	v, ok := r.View(id)
	if !ok {
		return nil
	}
	changed := r.noticed(id)
	now := time.Now()
	if !v.Fetched.IsZero() && v.Dials.Live(now) {
		return r.refresh(ctx, id, changed)
	}
	d, err := r.store.Dials(ctx, id)
	switch {
	case errors.Is(err, gateway.ErrNoEvent):
		return r.retire(ctx, id, nil)
	case err != nil:
		return err
	case d.Ended(now):
		return r.retire(ctx, id, &d)
	case d.Live(now):
		return r.refresh(ctx, id, changed)
	}
	r.mu.Lock()
	if cur, ok := r.events[id]; ok {
		next := *cur
		next.Dials, next.checked = d, now
		r.events[id] = &next
	}
	r.mu.Unlock()
	return nil
}

// retire ends an event's room on this gateway and takes it out of the rooms
// every gateway ticks (Store.Retire), when its sale window is over (d: its
// dials; its keys' expiry, the window's end, is now past, so setting it
// again makes Redis drop them, whatever expiry they had) or its room is
// gone from Redis (nil: the keys expired, or Redis lost them). A room set
// up again meanwhile (a join on another gateway after Redis lost it, an
// operator moving closes_at later) is listed again: a set up writes the
// dials before it lists the room, so either its listing comes after
// Store.Retire or the dials read after it see the room.
func (r *Room) retire(ctx context.Context, id int64, d *gateway.Dials) error {
	if d != nil {
		if err := r.store.Expire(ctx, id, d.ExpiresAt()); err != nil {
			return err
		}
	}
	r.Forget(id)
	if err := r.store.Retire(ctx, id); err != nil {
		return err
	}
	again, err := r.store.Dials(ctx, id)
	switch {
	case errors.Is(err, gateway.ErrNoEvent):
		return nil
	case err != nil:
		return err
	case again.Ended(time.Now()):
		return nil
	}
	return r.store.InitDials(ctx, id, again)
}

// setHealthy (r.mu held) records whether the store answered the last tick
// of some event. Ready while it does: a Redis Cluster master failing over
// stops the ticks of its events only (the other masters' events keep
// ticking, and polls are answered from the views), so one event's failed
// tick must not take the whole gateway out of its load balancer. With no
// events, the tick loop has nothing to tell.
func (r *Room) setHealthy() {
	ok := len(r.events) == 0
	for id := range r.events {
		ok = ok || r.tickOK[id]
	}
	r.ok = ok
}

// Refresh brings one event's view up to date: its tick (this room's own
// when it holds the event's tick lease or takes it, else the holder's
// last) and its dials, read again (the operators' API calls it after a
// change, so the answer shows it at once, whoever ticks).
func (r *Room) Refresh(ctx context.Context, id int64) error {
	return r.refresh(ctx, id, true)
}

// tick is the event's tick as this room learns it: a room that ran the
// last tick (the lease is its own) ticks again, renewing the lease; any
// other reads the holder's last tick (one round trip: LastTick), and
// ticks only when there is none: the lease lapsed (the Tick takes it; two
// rooms racing for it, the store lets one in and tells the other the
// winner's tick) or the room is gone (the Tick says so). Without a lease,
// it always ticks.
func (r *Room) tick(ctx context.Context, id int64, last gateway.Tick) (gateway.Tick, error) {
	if r.holder != "" && (last.Ticker != r.holder || last.Now.IsZero()) {
		tk, ok, err := r.store.LastTick(ctx, id)
		if err != nil {
			return gateway.Tick{}, err
		}
		if ok && tk.Ticker != r.holder {
			return tk, nil
		}
	}
	r.mu.RLock()
	lease := gateway.Lease{Holder: r.holder, For: r.lease}
	r.mu.RUnlock()
	return r.store.Tick(ctx, id, r.tickFactor(ctx), lease)
}

// following reports whether a room that follows the event's ticks (v's
// last tick is another gateway's) read them recently enough: the holder's
// lease cannot have lapsed since (View.due). What such a room does not
// read, it does not need: it runs no admission; the rate and the offers
// are the holder's, made on the store's clock, and its view of them (the
// serving counter, the line) lags the holder's by at most a lease (a
// second at the default tick) rather than a tick, so a fan polling it
// learns of an offer at most that much later, in a claim window of at
// least ten seconds (gateway.Dials.Validate) that its polls are spread to
// see three times over (gateway/http: nearPoll). A change of the dials, or
// a lease given up, the store pushes (notice): read at once.
func (r *Room) following(v View, now time.Time) bool {
	return r.holder != "" && v.Tick.Ticker != r.holder && !v.Fetched.IsZero() && now.Before(v.due)
}

// followUntil is when a room told another's tick tk, read from start on,
// reads the event's tick next: when the holder's lease, unless renewed,
// lapses (a reader of a lapsed lease takes it over, as fast as when it
// read every tick), never more than a lease on; zero (the next tick) when
// the store did not say.
func (r *Room) followUntil(start time.Time, tk gateway.Tick) time.Time {
	r.mu.RLock()
	lease := r.lease
	r.mu.RUnlock()
	if tk.LeaseLeft <= 0 {
		return time.Time{}
	}
	return start.Add(min(tk.LeaseLeft, lease))
}

// refresh is Refresh, reading the dials again only when the tick shows
// their version moved, unless reread; without reread, a room following
// another's ticks reads nothing before they are due (following).
func (r *Room) refresh(ctx context.Context, id int64, reread bool) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	start := time.Now()
	seen, _ := r.View(id)
	if !reread && r.following(seen, start) {
		return nil
	}
	tk, err := r.tick(ctx, id, seen.Tick)
	if err != nil {
		return err
	}
	if tk.DialsVersion < 0 {
		// The event's room is gone from Redis (its keys expired, or Redis
		// lost them): retire it; the next join in its window sets it up again.
		return r.retire(ctx, id, nil)
	}
	r.mu.RLock()
	prev, ok := r.events[id]
	if !ok {
		r.mu.RUnlock()
		return nil
	}
	cur := *prev
	r.mu.RUnlock()
	now := time.Now()
	reread = reread || cur.Fetched.IsZero() || tk.DialsVersion != cur.Dials.Version
	if reread {
		d, err := r.store.Dials(ctx, id)
		if err != nil {
			return err
		}
		cur.Dials = d
	}
	ticker := tk.Ticker == r.holder // this room ran the tick (or ticks without a lease)
	cur.due = time.Time{}
	if !ticker {
		cur.expired = time.Time{} // should it take the lease over, it sets the expiry at once
		cur.due = r.followUntil(start, tk)
	}
	if at := cur.Dials.ExpiresAt(); ticker && (reread || now.Sub(cur.expired) >= ExpireEvery) && (at.IsZero() || at.After(now)) {
		// Every key of the room expires at the window's end, moved with
		// the dials: the ticking gateway's work. (An end already past is
		// retire's: the ticker's next step drops the room.)
		if err := r.store.Expire(ctx, id, at); err != nil {
			return err
		}
		cur.expired = now
	}
	if tk.Now.Before(cur.Tick.Now) {
		return nil // a concurrent refresh stored a newer tick: never go back
	}
	cur.Tick, cur.Fetched = tk, now
	cur.history = append(slices.Clip(cur.history), servingAt{now, tk.Serving})
	if tk.Active+tk.Offers < int64(cur.Dials.TotalActiveUsers) {
		cur.FullSince = time.Time{}
	} else if cur.FullSince.IsZero() {
		cur.FullSince = now
	}
	for len(cur.history) > 1 && now.Sub(cur.history[0].at) > RateWindow {
		cur.history = cur.history[1:]
	}
	if h := cur.history[0]; now.Sub(h.at) > 5*time.Second {
		cur.OfferRate = float64(tk.Serving-h.serving) / now.Sub(h.at).Minutes()
	}
	r.mu.Lock()
	r.events[id] = &cur
	r.mu.Unlock()
	return nil
}

// Views returns a copy of every event's view.
func (r *Room) Views() map[int64]View {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[int64]View, len(r.events))
	for id, v := range r.events {
		out[id] = *v
	}
	return out
}

// Forget drops an event's view.
func (r *Room) Forget(id int64) {
	r.mu.Lock()
	delete(r.events, id)
	delete(r.tickOK, id)
	delete(r.notices, id)
	r.mu.Unlock()
}

// Ensure makes an event known for a fan: its dials are initialised (only
// where unset) from the core's view of the event (Event.Dials) with the
// dials operators saved (the record) over them, then read once: so a room
// Redis lost comes back as operators left it, paused if it was. An event
// with no room is set up only in its sale window (gateway.Dials.Window)
// and before it closes: outside, Ensure writes nothing and answers a
// *gateway.Error, not_open (with opens_at) or closed, from the catalog's
// times and the record. Other errors: ErrNoEvent when neither the store
// nor the core knows the event, else the store's, the catalog's or the
// record's (wrapping ErrUnavailable: a record that cannot be read fails
// closed, never sets the room up from the defaults).
func (r *Room) Ensure(ctx context.Context, id int64) (View, error) {
	return r.ensure(ctx, id, true)
}

// Operate is Ensure for the operators' API: it sets the room up whatever
// its window, so operators can read and set an event's dials before its
// sale (the ticker then leaves the room alone until its window opens, and
// its keys expire at the window's end as any room's).
func (r *Room) Operate(ctx context.Context, id int64) (View, error) {
	return r.ensure(ctx, id, false)
}

// outside is the answer to a fan's join of an event with no room outside
// its sale window (nil inside it), as the store's join would give it.
func outside(d gateway.Dials, now time.Time) error {
	switch {
	case d.Closed(now):
		return gateway.Errorf(gateway.EClosed, "the sale is closed")
	case d.Early(now):
		opens := d.PrequeueAt
		if opens.IsZero() {
			opens = d.OnsaleAt
		}
		return gateway.Errorf(gateway.ENotOpen, "the queue opens at %s", opens.UTC().Format(time.RFC3339)).With("opens_at", opens)
	}
	return nil
}

func (r *Room) ensure(ctx context.Context, id int64, fan bool) (View, error) {
	if v, ok := r.View(id); ok && !v.Fetched.IsZero() {
		return v, nil
	}
	if _, err := r.store.Dials(ctx, id); errors.Is(err, gateway.ErrNoEvent) {
		ev, err := r.catalog.Event(ctx, id)
		if err != nil {
			return View{}, err
		}
		d := ev.Dials()
		if r.record != nil {
			saved, err := r.record.SavedDials(ctx, id)
			if errors.Is(err, gateway.ErrNoEvent) {
				// The catalog has the event: the core does not serve the
				// record (no admin token there?).
				err = fmt.Errorf("%w: the core keeps no dials for event %d", gateway.ErrUnavailable, id)
			}
			if err != nil {
				r.log.Error("the saved dials cannot be read; the room is not set up", "event", id, "err", err)
				return View{}, err
			}
			saved.Apply(&d)
		}
		if err := outside(d, time.Now()); fan && err != nil {
			return View{}, err
		}
		if err := r.store.InitDials(ctx, id, d); err != nil {
			return View{}, err
		}
	} else if err != nil {
		return View{}, err
	}
	r.mu.Lock()
	if _, ok := r.events[id]; !ok {
		r.events[id] = &View{}
	}
	r.mu.Unlock()
	if err := r.Refresh(ctx, id); err != nil {
		return View{}, err
	}
	v, _ := r.View(id)
	return v, nil
}
