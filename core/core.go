// Package core is the booking core's vocabulary: events, seats, holds, the
// requests that create them and the errors they fail with. It names what the
// adapters (postgres, http) implement and consume, and imports neither.
package core

import (
	"context"
	"time"
)

// Event kinds.
const (
	KindConcert = "concert"
	KindMovie   = "movie"
)

// Event is a show on sale: a seated event sells numbered seats, a general
// admission (GA) event sells a count of interchangeable tickets.
type Event struct {
	ID            int64       `json:"id"`
	Name          string      `json:"name"`
	Kind          string      `json:"kind"`
	Venue         Venue       `json:"venue"`
	StartsAt      time.Time   `json:"starts_at"`
	OnsaleAt      time.Time   `json:"onsale_at"`
	Seated        bool        `json:"seated"`
	Capacity      int         `json:"capacity"`
	MaxPerAccount int         `json:"max_per_account"`
	HoldSeconds   int         `json:"hold_seconds"`
	Bands         []PriceBand `json:"price_bands"`
	// Status is the show's status (ShowPublished, ...; core/show.go).
	Status string `json:"status"`
	// SeriesID groups the shows an operator created together (one title's
	// shows); 0 for shows from before operators created them.
	SeriesID int64 `json:"series_id,omitempty"`
	// CancelReason is what the operator told fans when cancelling.
	CancelReason string `json:"cancel_reason,omitempty"`
}

// Venue is where events take place. Timezone is an IANA name; an event's
// calendar date is its start time in the venue's zone.
type Venue struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	City     string `json:"city"`
	Timezone string `json:"timezone"`
}

// PriceBand is a price tier of an event, in paise (1/100 rupee).
type PriceBand struct {
	Code       string `json:"code"`
	Name       string `json:"name"`
	PricePaise int64  `json:"price_paise"`
}

// EventFilter selects events for the catalog. Zero fields match everything;
// Date is a calendar day (its year, month and day are used) in each venue's zone.
type EventFilter struct {
	City string
	Date time.Time
	Kind string
	// Past lists shows that have started, latest first; otherwise shows
	// not yet started, soonest first.
	Past bool
	// Statuses lists the statuses shown (nil: the fans' catalog,
	// published and closed).
	Statuses []string
	// After continues a listing after this cursor (a Cursor's Encode).
	After Cursor
	// Limit is the page size, 1 to MaxPage (0: DefaultPage).
	Limit int
	// Now is the catalog's present (zero: the database's clock).
	Now time.Time
}

// Catalog page sizes.
const (
	DefaultPage = 50
	MaxPage     = 200
)

// EventPage is one page of a listing and the cursor of the next ("": it
// is the last).
type EventPage struct {
	Events []Event `json:"events"`
	Next   string  `json:"next_cursor,omitempty"`
}

// Hold statuses. A hold is ACTIVE until it is released, expires (swept) or
// is booked; only ACTIVE holds own seats, and only until ExpiresAt.
const (
	HoldActive   = "ACTIVE"
	HoldReleased = "RELEASED"
	HoldExpired  = "EXPIRED"
	HoldBooked   = "BOOKED"
)

// ExtendBy is how much one extension adds to a hold. A hold is extended at
// most once, at the Pay step, while it is still valid.
const ExtendBy = 2 * time.Minute

// Hold is one acquisition of seats (or GA tickets) by an account. Its ID is
// never reused and its Version grows with every change: together they are
// the fencing token every later step must match.
type Hold struct {
	ID        string    `json:"hold_id"`
	EventID   int64     `json:"event_id"`
	Account   string    `json:"account"`
	Seats     []string  `json:"seats"`
	Quantity  int       `json:"quantity"`
	Status    string    `json:"status"`
	Version   int64     `json:"version"`
	ExpiresAt time.Time `json:"expires_at"`
	Extended  bool      `json:"extended"`
	CreatedAt time.Time `json:"created_at"`
	// AmountPaise is the hold's total at the event's band prices.
	AmountPaise int64 `json:"amount_paise"`
	// Token is the hold's grant (core/http adds it to the answers): it
	// acts on this hold and reads its bookings after the session ends.
	Token string `json:"hold_token,omitempty"`
	// EventStartsAt is the event's start (the grant's expiry follows it).
	EventStartsAt time.Time `json:"-"`
}

// Effective returns the hold's status as of now: an ACTIVE hold past its
// expiry is EXPIRED (a seated hold stays ACTIVE in its row after it lapses,
// and a GA hold until the sweeper ends it).
func (h *Hold) Effective(now time.Time) string {
	if h.Status == HoldActive && !now.Before(h.ExpiresAt) {
		return HoldExpired
	}
	return h.Status
}

// MaxSeatsPerRequest bounds a seat list before any limit is looked up.
const MaxSeatsPerRequest = 64

// HoldRequest is the body of a hold: exactly one of Seats (a seated event's
// seat ids), BestAvailable (seated) or Quantity (GA).
type HoldRequest struct {
	Seats         []string       `json:"seats,omitempty"`
	BestAvailable *BestAvailable `json:"best_available,omitempty"`
	Quantity      int            `json:"quantity,omitempty"`
}

// BestAvailable asks the core to pick Count seats in price band Band, together
// in one row where it can.
type BestAvailable struct {
	Band  string `json:"band"`
	Count int    `json:"count"`
}

// HoldParams is a validated hold request on behalf of an admitted account.
type HoldParams struct {
	EventID int64
	Account string
	// Limit is the ticket limit the admit token carries; 0 leaves the
	// event's max_per_account. The stricter of the two applies.
	Limit   int
	Request HoldRequest
}

// Validate checks the request's shape (not its seats): exactly one kind of
// request, a non-empty bounded seat list, positive counts.
func (r *HoldRequest) Validate() error {
	kinds := 0
	if r.Seats != nil {
		kinds++
	}
	if r.BestAvailable != nil {
		kinds++
	}
	if r.Quantity != 0 {
		kinds++
	}
	switch {
	case kinds == 0:
		return Errorf(EInvalid, "give one of seats, best_available or quantity")
	case kinds > 1:
		return Errorf(EInvalid, "give only one of seats, best_available or quantity")
	case r.Seats != nil && len(r.Seats) == 0:
		return Errorf(EInvalid, "seats is empty")
	case len(r.Seats) > MaxSeatsPerRequest:
		return Errorf(EInvalid, "at most %d seats per request", MaxSeatsPerRequest)
	case r.Quantity < 0:
		return Errorf(EInvalid, "quantity must be positive")
	case r.Quantity > MaxSeatsPerRequest:
		return Errorf(EInvalid, "at most %d tickets per request", MaxSeatsPerRequest)
	case r.BestAvailable != nil && r.BestAvailable.Count <= 0:
		return Errorf(EInvalid, "best_available.count must be positive")
	case r.BestAvailable != nil && r.BestAvailable.Count > MaxSeatsPerRequest:
		return Errorf(EInvalid, "at most %d seats per request", MaxSeatsPerRequest)
	case r.BestAvailable != nil && r.BestAvailable.Band == "":
		return Errorf(EInvalid, "best_available.band is required")
	}
	for _, s := range r.Seats {
		if s == "" || len(s) > 64 {
			return Errorf(EInvalid, "seat ids are 1 to 64 characters")
		}
	}
	return nil
}

// HoldRef names the hold a caller wants to change and what the caller
// believes of it: the operation fails unless the hold belongs to Account,
// is for EventID (0: any event) and is at Version (0: any version).
type HoldRef struct {
	ID      string
	Account string
	EventID int64
	Version int64
}

// SweepResult reports one sweep of expired holds (the sweeper runs it; the
// store implements it).
type SweepResult struct {
	Holds int           // GA holds returned to sale (a seated hold needs no sweep)
	Lag   time.Duration // how long the oldest swept hold had been expired
}

// Catalog browses events.
type Catalog interface {
	Events(ctx context.Context, f EventFilter) (*EventPage, error)
	Event(ctx context.Context, id int64) (*Event, error)
}

// Holds is the hold path. Every method fails with *Error for outcomes a
// client must see (ESeatsTaken, ELimitExceeded, ESoldOut, EHoldExpired, ...)
// and with EUnavailable when the database cannot be reached: it never
// answers from a cache.
type Holds interface {
	CreateHold(ctx context.Context, p HoldParams) (*Hold, error)
	Hold(ctx context.Context, id string) (*Hold, error)
	// ReleaseHold ends a hold, giving its seats and quota back.
	ReleaseHold(ctx context.Context, ref HoldRef) (*Hold, error)
	// ExtendHold extends a hold once by ExtendBy, only while it is valid.
	ExtendHold(ctx context.Context, ref HoldRef) (*Hold, error)
}
