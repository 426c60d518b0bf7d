// Package gateway is the waiting room's vocabulary: an event's admission
// dials, the states a fan's place in line goes through, what a tick of the
// admission bucket reports, the errors fans are told about, and the two
// interfaces the room and the HTTP edge consume: the Store (the waiting
// room's shared state, in gateway/redis) and the Catalog (the core's
// events, in gateway/coreclient). The room (gateway/room), the tokens
// (gateway/token) and the HTTP edge (gateway/http) are built on it.
package gateway

import (
	"context"
	"time"
)

// Queue states as fans and apps see them.
const (
	StatePrequeue = "prequeue" // joined before onsale: a random place is drawn at onsale
	StateWaiting  = "waiting"
	StateAdmitted = "admitted"
	StatePaused   = "paused"
	StateClosed   = "closed"
	StateSoldOut  = "sold_out"
	StateNotOpen  = "not_open" // before prequeue_at
	StateEnded    = "ended"    // this fan's session is over: one per identity
)

// Tick is what one tick of the admission bucket reports: the serving
// counter (every place up to it has been offered), the length of the line,
// live sessions, open offers, claims in the last minute, the dials' version
// (-1: the event has no dials: its room is gone), and the rate the bucket
// let the line in at: Rate, places a minute, is new_users_per_minute times
// Factor, the share of the dial the core's health allows (gateway/health;
// 1: the dial).
type Tick struct {
	Serving int64
	// Queue is the line's length: every place handed out (the draw's and
	// the later arrivals'); before onsale, the pre-queue's size.
	Queue           int64
	Active          int64
	Offers          int64
	ClaimsPerMinute int64
	DialsVersion    int64
	Now             time.Time
	Factor          float64
	Rate            float64
	// Ticker is the gateway that ran the tick (Lease.Holder; empty: a
	// tick without a lease): a gateway told another's tick is not the
	// event's ticker.
	Ticker string
	// LeaseLeft is, in a tick read with Store.LastTick, how long the
	// holder's lease had left when it was read (0: unknown): a gateway
	// that only follows the holder's ticks need not read again before
	// then, as the lease cannot lapse sooner (room: the followers' reads).
	LeaseLeft time.Duration
}

// Lease is a gateway's claim to tick an event: the holder (a name unique
// to the gateway process) and how long the claim lasts unless renewed.
// Every tick by the holder renews it, so exactly one gateway runs the
// admission bucket of an event at a time, and when it dies, or loses
// Redis, another takes over once the lease has lapsed. The zero Lease
// ticks whatever the lease (tests, and the control that shows two
// tickers).
type Lease struct {
	Holder string
	For    time.Duration
}

// JoinResult is a fan's place after joining: State is prequeue (Position
// unknown until onsale), waiting (Position known), not_open or closed (At
// says when it opens or closed), or ended (the identity had its session).
type JoinResult struct {
	State    string
	Position int64
	At       time.Time
}

// ClaimOutcome is what a claim of an offered place did.
type ClaimOutcome string

// Claim outcomes; N is the number Claim returns beside the outcome.
const (
	ClaimAdmitted ClaimOutcome = "admitted" // N: the session's end (unix ms)
	ClaimWaiting  ClaimOutcome = "waiting"  // not offered yet
	ClaimPaused   ClaimOutcome = "paused"   // admission is paused
	ClaimMoved    ClaimOutcome = "moved"    // N: the fan's current place (the token was stale)
	ClaimRequeued ClaimOutcome = "requeued" // N: the new place (the offer lapsed unclaimed)
	ClaimEnded    ClaimOutcome = "ended"    // the identity's session is over
	ClaimUnknown  ClaimOutcome = "unknown"  // the identity is not in line
)

// Held is the place a fan's signed queue token says it holds: the fan's
// proof of place when a Redis failover lost the write that gave it (the
// rule is in gateway/redis/restore.lua).
type Held struct {
	Position int64  // 0: the pre-queue
	Admitted int64  // the session's end (unix ms) once admitted; 0: not admitted
	Epoch    string // the room the place belongs to (Dials.Epoch)
}

// RestoreOutcome is what a restore did.
type RestoreOutcome string

// Restore outcomes; N is the number Restore returns beside the outcome.
const (
	RestoreKept     RestoreOutcome = "kept"     // the store had the place (N; 0: in the draw): nothing changed
	RestoreRestored RestoreOutcome = "restored" // N: the place the identity holds again
	RestorePrequeue RestoreOutcome = "prequeue" // back in the draw, which is not made yet
	RestoreEnded    RestoreOutcome = "ended"    // the identity's session is over (recorded again if lost)
	RestoreRejoin   RestoreOutcome = "rejoin"   // the token is of another room (epoch), or none: its place is gone
	RestoreOff      RestoreOutcome = "off"      // the rule is switched off (the failover test's control only)
)

// LeaveOutcome is what a leave did; fans see it as "outcome".
type LeaveOutcome string

// Leave outcomes.
const (
	LeaveEnded LeaveOutcome = "ended" // a live session ended: its room goes to the line
	LeaveLeft  LeaveOutcome = "left"  // a place in line was given up
	LeaveNone  LeaveOutcome = "none"  // nothing to leave
)

// Store is the waiting room's state shared by every gateway. Errors are
// ErrNoEvent (the event has no room) or wrap ErrUnavailable (the store
// cannot be reached: callers fail closed). Every operation is safe to retry.
type Store interface {
	// Join gives identity a place in line, or returns the place it has.
	Join(ctx context.Context, event int64, identity string) (JoinResult, error)
	// Position is a pre-queue fan's drawn place once the pre-queue is
	// frozen (0 while it is not); ErrEnded when the identity has no place
	// any more (it left, or had its session); ErrNoEvent when the frozen
	// pre-queue never knew it.
	Position(ctx context.Context, event int64, identity string) (int64, error)
	// Claim takes an offered place and starts identity's session.
	Claim(ctx context.Context, event int64, identity string, position int64) (ClaimOutcome, int64, error)
	// Restore puts identity back at the place held proves, when the store
	// has lost it (restore.lua: what a failover loses, and the bound on
	// what restoring costs). A no-op (kept) when the store has it.
	Restore(ctx context.Context, event int64, identity string, held Held) (RestoreOutcome, int64, error)
	// Leave ends identity's session early or gives up its place in line.
	Leave(ctx context.Context, event int64, identity string) (LeaveOutcome, error)
	// Tick advances the admission bucket at factor times the rate dial
	// (factor in [0, 1]: the core's health, gateway/health; 1 is the dial,
	// and nothing outside [0, 1] is ever used) and reports the event's
	// state, when lease.Holder holds the event's tick lease or takes it
	// (nobody holds it: its holder did not renew it in time), renewing it
	// for lease.For; when another gateway holds it, Tick only reports
	// that gateway's last tick (Tick.Ticker names it).
	Tick(ctx context.Context, event int64, factor float64, lease Lease) (Tick, error)
	// LastTick is the last tick stored by the event's lease holder, one
	// cheap read; false when there is none: the lease lapsed (its holder
	// stopped ticking) or the room is gone, and a Tick settles which.
	LastTick(ctx context.Context, event int64) (Tick, bool, error)
	// Release gives up holder's tick lease of the event (a gateway
	// stopping), so another gateway takes the event over at its next tick
	// rather than once the lease lapses; nothing when another holds it.
	Release(ctx context.Context, event int64, holder string) error
	// Events lists the events the room knows.
	Events(ctx context.Context) ([]int64, error)
	// Dials reads an event's dials (ErrNoEvent if none).
	Dials(ctx context.Context, event int64) (Dials, error)
	// InitDials sets the dials of an event, only those unset, and lists
	// the event in Events.
	InitDials(ctx context.Context, event int64, d Dials) error
	// Expire makes every key of the event's room expire at at (zero:
	// never); calling it again moves the expiry (Dials.ExpiresAt).
	Expire(ctx context.Context, event int64, at time.Time) error
	// Retire takes the event out of Events (the rooms the gateways tick);
	// its keys are left to expire.
	Retire(ctx context.Context, event int64) error
	// PatchDials writes the named dials of d and bumps the version.
	PatchDials(ctx context.Context, event int64, d Dials, changed []string) (int64, error)
	// Frozen reports whether the pre-queue has been drawn (onsale passed).
	Frozen(ctx context.Context, event int64) (bool, error)
	// Seatmap is the event's availability bitmap as the core keeps it
	// (nil when there is none).
	Seatmap(ctx context.Context, event int64) ([]byte, error)
}

// Watcher is a Store that tells every gateway of changes to an event's
// room that it would otherwise learn only at its next read of the
// event's tick (a follower reads it about once a lease, room.Room) or of
// the events (Store.Events): the room was set up (Store.InitDials), the
// dials changed (Store.PatchDials), or the tick lease was given up
// (Store.Release). A notice is a hint, never the only way to learn the
// change: one lost (the subscription was down) is seen at that read.
type Watcher interface {
	// Watch calls changed at every notice, from any gateway, until ctx
	// ends; it returns then.
	Watch(ctx context.Context, changed func(Notice))
}

// Notice is a Watcher's notice: the event whose room changed, and whether
// it was set up and listed (Store.InitDials: a gateway that does not know
// the event learns it from this notice, as from Store.Events; the other
// notices are only of events it knows).
type Notice struct {
	Event  int64
	Listed bool
}

// Event is what the room needs of an event from the core: its times, and
// its size and kind for the default of the account_required dial.
type Event struct {
	OnsaleAt time.Time `json:"onsale_at"`
	StartsAt time.Time `json:"starts_at"`
	Seated   bool      `json:"seated"`
	Capacity int       `json:"capacity"`
}

// StadiumCapacity is the size from which a seated event needs a verified
// account by default: a sale that large (arenas, stadiums) is what ticket
// scalpers' bots go for, and one place and one ticket limit per person is
// only real when a person is a verified phone. Smaller seated events (a
// cinema screen, a club) and standing events sell to guests by default;
// operators flip the dial either way.
const StadiumCapacity = 5000

// Dials are the event's dials the first time the gateway sees it: the
// defaults (DefaultDials) over its times, and account_required on for a
// seated event of StadiumCapacity seats or more.
func (e Event) Dials() Dials {
	d := DefaultDials(e.OnsaleAt, e.StartsAt)
	d.AccountRequired = e.Seated && e.Capacity >= StadiumCapacity
	return d
}

// DialsRecord is the durable home of the dials operators set (the core's
// database, in gateway/coreclient): the Store holds a copy. An operator's
// change is saved here before the store; when the store has lost an
// event's room, the room is set up again from the event's defaults with
// the saved dials over them, so a paused sale stays paused. Errors wrap
// ErrUnavailable (the record cannot be reached: callers fail closed, as a
// room set up from defaults could resume a paused sale) or are ErrNoEvent.
type DialsRecord interface {
	// SavedDials returns the dials operators set for event (empty: none).
	SavedDials(ctx context.Context, event int64) (DialPatch, error)
	// SaveDials merges patch into the event's saved dials on behalf of
	// operator by, who must be allowed to set dials (the core judges, and
	// audits the change under their name): EUnauthorized or EForbidden
	// when the core refuses them.
	SaveDials(ctx context.Context, event int64, patch DialPatch, by Operator) error
}

// Operator is the signed-in operator a change is made for: their name and
// role (from their token), the token itself (passed to the core, which
// checks it again against its accounts) and the request's id.
type Operator struct {
	Name, Role, Token, RequestID string
}

// Catalog is the core's catalog as the room sees it. Event returns
// ErrNoEvent when the core has no such event, an error wrapping
// ErrUnavailable when the core cannot say.
type Catalog interface {
	Event(ctx context.Context, id int64) (Event, error)
}
