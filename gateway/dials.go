package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Dials are an event's admission settings, changed live by operators.
// Times are absolute; zero means unset.
type Dials struct {
	NewUsersPerMinute int       `json:"new_users_per_minute"`
	TotalActiveUsers  int       `json:"total_active_users"`
	SessionSeconds    int       `json:"session_seconds"`
	ClaimSeconds      int       `json:"claim_seconds"`
	PrequeueAt        time.Time `json:"prequeue_at"`
	OnsaleAt          time.Time `json:"onsale_at"`
	ClosesAt          time.Time `json:"closes_at"`
	Paused            bool      `json:"paused"`
	Queueing          string    `json:"queueing"` // random (pre-queue shuffled at onsale) or fifo
	SoldOut           bool      `json:"sold_out"`
	// AccountRequired: joining needs an account token with a verified
	// phone (401 identity_required without one); off, guests join with a
	// visitor id the gateway mints and signs. Default: Event.Dials.
	AccountRequired bool  `json:"account_required"`
	Version         int64 `json:"version"`
	// Epoch names this incarnation of the event's room: set once, kept in
	// queue tokens; a token of another epoch (Redis lost the room) rejoins.
	Epoch string `json:"epoch"`
}

// Dial is one operator dial: its name (in JSON, in the PATCH body and in
// the Redis hash) and where it lives in Dials. Field returns a pointer to
// that field: *int, *bool, *string or *time.Time.
type Dial struct {
	Name  string
	Field func(*Dials) any
	// Frozen dials shape the pre-queue draw: they cannot change once the
	// pre-queue has been frozen at onsale (its ranks are places handed out).
	Frozen bool
}

// DialList is every dial an operator sets, written once: the admin PATCH,
// the Redis store's hash fields and the "what changed" of a patch all walk
// it. Version and Epoch are not dials: the store keeps them.
var DialList = []Dial{
	{Name: "new_users_per_minute", Field: func(d *Dials) any { return &d.NewUsersPerMinute }},
	{Name: "total_active_users", Field: func(d *Dials) any { return &d.TotalActiveUsers }},
	{Name: "session_seconds", Field: func(d *Dials) any { return &d.SessionSeconds }},
	{Name: "claim_seconds", Field: func(d *Dials) any { return &d.ClaimSeconds }},
	{Name: "prequeue_at", Field: func(d *Dials) any { return &d.PrequeueAt }, Frozen: true},
	{Name: "onsale_at", Field: func(d *Dials) any { return &d.OnsaleAt }, Frozen: true},
	{Name: "closes_at", Field: func(d *Dials) any { return &d.ClosesAt }},
	{Name: "paused", Field: func(d *Dials) any { return &d.Paused }},
	{Name: "queueing", Field: func(d *Dials) any { return &d.Queueing }, Frozen: true},
	{Name: "sold_out", Field: func(d *Dials) any { return &d.SoldOut }},
	{Name: "account_required", Field: func(d *Dials) any { return &d.AccountRequired }},
}

// DefaultDials are the dials of an event the gateway sees for the first
// time: the seeds' numbers (1,000 a minute, 10,000 inside, ten minutes).
func DefaultDials(onsale, closes time.Time) Dials {
	return Dials{NewUsersPerMinute: 1000, TotalActiveUsers: 10000, SessionSeconds: 600, ClaimSeconds: 120,
		PrequeueAt: onsale.Add(-time.Hour), OnsaleAt: onsale, ClosesAt: closes, Queueing: "random"}
}

// The sale window: when an event's room lives in Redis and the gateways
// tick it. It opens WindowLead before the pre-queue (prequeue_at; onsale_at
// when unset; neither: from the start), so every gateway has the room's
// view before the first fan may join, and it ends WindowGrace after the
// sale closes (closes_at; unset: the sale has no end, and its room ticks
// for as long as it is in Redis). Outside it a fan's join is answered
// not_open or closed from the catalog and the record, and writes nothing:
// so no visitor can make the gateways tick, or Redis keep, a room for an
// arbitrary catalog event. Every key of a room expires at the window's end
// (ExpiresAt), and the ticker drops an ended event from the list of rooms
// (gateway/room).
//
// Sold out does not end the window: sold_out is a dial operators turn off
// again, and seats come back when holds lapse; the sale ends at closes_at.
// The grace is the hour after closes_at in which an operator who moves
// closes_at later finds the room as it was (the line and its places); a
// later move sets up a new room from the record (a new epoch: fans rejoin).
const (
	WindowLead  = 10 * time.Minute
	WindowGrace = time.Hour
)

// Window is the sale window of an event with these dials: from (zero: no
// start) and until (zero: no end).
func (d Dials) Window() (from, until time.Time) {
	switch {
	case !d.PrequeueAt.IsZero():
		from = d.PrequeueAt.Add(-WindowLead)
	case !d.OnsaleAt.IsZero():
		from = d.OnsaleAt.Add(-WindowLead)
	}
	if !d.ClosesAt.IsZero() {
		until = d.ClosesAt.Add(WindowGrace)
	}
	return from, until
}

// Early reports whether now is before the sale window opens.
func (d Dials) Early(now time.Time) bool {
	from, _ := d.Window()
	return !from.IsZero() && now.Before(from)
}

// Ended reports whether the sale window is over at now.
func (d Dials) Ended(now time.Time) bool {
	_, until := d.Window()
	return !until.IsZero() && !now.Before(until)
}

// Closed reports whether the sale has closed at now (closes_at passed):
// joins are refused, and no room is set up for it any more.
func (d Dials) Closed(now time.Time) bool { return !d.ClosesAt.IsZero() && !now.Before(d.ClosesAt) }

// Live reports whether now is inside the sale window: the gateways tick the room.
func (d Dials) Live(now time.Time) bool { return !d.Early(now) && !d.Ended(now) }

// ExpiresAt is when every key of the event's room expires: the window's
// end (zero: never, the sale has no end).
func (d Dials) ExpiresAt() time.Time {
	_, until := d.Window()
	return until
}

// Validate checks dials an operator sets: each dial within its range, and
// the three times in order.
func (d Dials) Validate() error {
	switch {
	case d.NewUsersPerMinute < 0 || d.NewUsersPerMinute > 10_000_000:
		return errors.New("new_users_per_minute must be 0 to 10,000,000")
	case d.TotalActiveUsers < 0 || d.TotalActiveUsers > 10_000_000:
		return errors.New("total_active_users must be 0 to 10,000,000")
	case d.SessionSeconds < 30 || d.SessionSeconds > 86400:
		return errors.New("session_seconds must be 30 to 86,400")
	case d.ClaimSeconds < 10 || d.ClaimSeconds > 3600:
		return errors.New("claim_seconds must be 10 to 3,600")
	case d.Queueing != "random" && d.Queueing != "fifo":
		return errors.New("queueing must be random or fifo")
	case !d.PrequeueAt.IsZero() && !d.OnsaleAt.IsZero() && d.PrequeueAt.After(d.OnsaleAt):
		return errors.New("prequeue_at must not be after onsale_at")
	case !d.ClosesAt.IsZero() && !d.OnsaleAt.IsZero() && !d.ClosesAt.After(d.OnsaleAt):
		return errors.New("closes_at must be after onsale_at")
	}
	return nil
}

// RemovedDials are dials that no longer exist, each with why: a PATCH naming
// one is refused with the reason (an operator's script learns it was
// removed, not that it mistyped), and a stored copy that still carries one
// (a Redis hash, a saved config) is ignored, since every reader walks
// DialList.
//
// pow_difficulty (proof of work) was removed in issue 13: its challenge had
// no server nonce or expiry (precomputable) and no page solved it, and a
// real one would tax fans more than bots. Measured here (loadtest/browser's
// BenchmarkProofOfWorkCost, figures in docs/waiting-room.md): Go's
// crypto/sha256 does about 10 million hashes a CPU-second on one server
// core, a Web Worker in Chromium about 2.9 million; the difficulty that
// costs a bot one core-second a join (23 bits) costs a desktop browser
// about 3 s and a mid-range phone (a quarter of that speed) about 12 s,
// while a GPU farm pays milliseconds. account_required (one verified phone,
// one place) and the limits are the defences against join floods.
var RemovedDials = map[string]string{
	"pow_difficulty": "proof of work was removed: a puzzle that costs a bot one core-second a join costs a mid-range phone about 12 s (docs/waiting-room.md); use account_required and the rate limits",
}

// DialPatch is a partial update of the dials: the raw JSON value of each
// dial named, by dial name.
type DialPatch map[string]json.RawMessage

// ParseDialPatch reads a PATCH body: a JSON object of dials by name. An
// unknown name (names are exact: "Paused" is not a dial), a removed one
// (RemovedDials: the error says why), or a value of the wrong type, is an
// error; a
// null leaves its dial alone (as an absent one does).
func ParseDialPatch(body []byte) (DialPatch, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, err
	}
	p := DialPatch{}
	for k, v := range raw {
		d, ok := dialNamed(k)
		if why, gone := removedDial(k); !ok && gone {
			return nil, fmt.Errorf("%q: %s", k, why)
		}
		if !ok {
			names := make([]string, len(DialList))
			for i, d := range DialList {
				names[i] = d.Name
			}
			return nil, fmt.Errorf("unknown dial %q: the dials are %s", k, strings.Join(names, ", "))
		}
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			continue
		}
		var scratch Dials
		if err := json.Unmarshal(v, d.Field(&scratch)); err != nil {
			return nil, fmt.Errorf("%s: %w", d.Name, err)
		}
		p[d.Name] = v
	}
	return p, nil
}

// ParseSavedDials reads dials a DialsRecord kept: like ParseDialPatch, but
// a name that is no longer a dial (a dial since removed) or a value that
// no longer fits is skipped, not an error: what was saved under an older
// gateway must not keep a room from being set up.
func ParseSavedDials(body []byte) (DialPatch, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, err
	}
	p := DialPatch{}
	for k, v := range raw {
		if one, err := ParseDialPatch(fmt.Appendf(nil, "{%q:%s}", k, v)); err == nil {
			for name, val := range one {
				p[name] = val
			}
		}
	}
	return p, nil
}

// dialNamed finds a dial by its exact name: the API's description
// (http/openapi.yaml) names dials exactly, as the core names members.
func dialNamed(name string) (Dial, bool) {
	for _, d := range DialList {
		if d.Name == name {
			return d, true
		}
	}
	return Dial{}, false
}

// removedDial finds a removed dial by its exact name, as dialNamed does.
func removedDial(name string) (string, bool) {
	for k, why := range RemovedDials {
		if k == name {
			return why, true
		}
	}
	return "", false
}

// Changed names the dials the patch sets.
func (p DialPatch) Changed() []string {
	var out []string
	for _, d := range DialList {
		if _, ok := p[d.Name]; ok {
			out = append(out, d.Name)
		}
	}
	return out
}

// TouchesFrozen reports whether the patch sets a dial that is fixed once
// the pre-queue has been frozen.
func (p DialPatch) TouchesFrozen() bool {
	for _, d := range DialList {
		if _, ok := p[d.Name]; ok && d.Frozen {
			return true
		}
	}
	return false
}

// Apply writes the patch's dials into d (ParseDialPatch checked the values).
func (p DialPatch) Apply(d *Dials) {
	for _, dl := range DialList {
		if v, ok := p[dl.Name]; ok {
			json.Unmarshal(v, dl.Field(d))
		}
	}
}

// DialChange is one dial an operator set, with its value before and after
// (as the dials' JSON has it): the audit log's record of a change.
type DialChange struct {
	Dial   string `json:"dial"`
	Before any    `json:"before"`
	After  any    `json:"after"`
}

// Diff lists the named dials (a patch's Changed) with their values in
// before and after, in DialList's order: a dial set to the value it had is
// listed too (the operator did set it).
func Diff(before, after Dials, names []string) []DialChange {
	out := []DialChange{}
	for _, dl := range DialList {
		for _, n := range names {
			if n == dl.Name {
				out = append(out, DialChange{Dial: dl.Name, Before: deref(dl.Field(&before)), After: deref(dl.Field(&after))})
			}
		}
	}
	return out
}

// deref is the value a dial's field pointer points to.
func deref(p any) any {
	switch v := p.(type) {
	case *int:
		return *v
	case *bool:
		return *v
	case *string:
		return *v
	case *time.Time:
		return *v
	}
	return p
}
