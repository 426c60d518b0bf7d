// Package gateway is the waiting room's vocabulary: an event's admission
// dials, the states a fan's place in line goes through, and what a tick of
// the admission bucket reports. The Redis store (gateway/redis), the tokens
// (gateway/token) and the HTTP edge (gateway/http) are built on it.
package gateway

import (
	"errors"
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
	Version           int64     `json:"version"`
	// Epoch names this incarnation of the event's room: set once, kept in
	// queue tokens; a token of another epoch (Redis lost the room) rejoins.
	Epoch string `json:"epoch"`
}

// DefaultDials are the dials of an event the gateway sees for the first
// time: the seeds' numbers (1,000 a minute, 10,000 inside, ten minutes).
func DefaultDials(onsale, closes time.Time) Dials {
	return Dials{NewUsersPerMinute: 1000, TotalActiveUsers: 10000, SessionSeconds: 600, ClaimSeconds: 120,
		PrequeueAt: onsale.Add(-time.Hour), OnsaleAt: onsale, ClosesAt: closes, Queueing: "random"}
}

// Validate checks dials an operator sets.
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

// Tick is what one tick of the admission bucket reports: the serving
// counter (every place up to it has been offered), the length of the line,
// live sessions, open offers, claims in the last minute, the dials' version.
type Tick struct {
	Serving         int64
	Queue           int64
	Active          int64
	Offers          int64
	ClaimsPerMinute int64
	DialsVersion    int64
	Now             time.Time
}

// Errors.
var (
	ErrNoEvent     = errors.New("no such event in the waiting room")
	ErrUnavailable = errors.New("waiting room store unavailable")
)
