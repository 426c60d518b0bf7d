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
	PowDifficulty     int       `json:"pow_difficulty"`
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
	{Name: "pow_difficulty", Field: func(d *Dials) any { return &d.PowDifficulty }},
	{Name: "sold_out", Field: func(d *Dials) any { return &d.SoldOut }},
	{Name: "account_required", Field: func(d *Dials) any { return &d.AccountRequired }},
}

// DefaultDials are the dials of an event the gateway sees for the first
// time: the seeds' numbers (1,000 a minute, 10,000 inside, ten minutes).
func DefaultDials(onsale, closes time.Time) Dials {
	return Dials{NewUsersPerMinute: 1000, TotalActiveUsers: 10000, SessionSeconds: 600, ClaimSeconds: 120,
		PrequeueAt: onsale.Add(-time.Hour), OnsaleAt: onsale, ClosesAt: closes, Queueing: "random"}
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
	case d.PowDifficulty < 0 || d.PowDifficulty > 28:
		return errors.New("pow_difficulty must be 0 to 28 bits")
	case !d.PrequeueAt.IsZero() && !d.OnsaleAt.IsZero() && d.PrequeueAt.After(d.OnsaleAt):
		return errors.New("prequeue_at must not be after onsale_at")
	case !d.ClosesAt.IsZero() && !d.OnsaleAt.IsZero() && !d.ClosesAt.After(d.OnsaleAt):
		return errors.New("closes_at must be after onsale_at")
	}
	return nil
}

// DialPatch is a partial update of the dials: the raw JSON value of each
// dial named, by dial name.
type DialPatch map[string]json.RawMessage

// ParseDialPatch reads a PATCH body: a JSON object of dials by name. An
// unknown name, a name given twice (in any case), or a value of the wrong
// type, is an error; a null leaves its dial alone (as an absent one does).
func ParseDialPatch(body []byte) (DialPatch, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, err
	}
	p := DialPatch{}
	seen := map[string]bool{}
	for k, v := range raw {
		d, ok := dialNamed(k)
		if !ok {
			return nil, fmt.Errorf("json: unknown field %q", k)
		}
		if seen[d.Name] { // "paused" and "PAUSED": which one won would be the map's order
			return nil, fmt.Errorf("%s: named twice", d.Name)
		}
		seen[d.Name] = true
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

// dialNamed finds a dial by name, ignoring case as encoding/json does.
func dialNamed(name string) (Dial, bool) {
	for _, d := range DialList {
		if strings.EqualFold(d.Name, name) {
			return d, true
		}
	}
	return Dial{}, false
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
