package core

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// This file holds every rule of a show's life: how operators create shows
// on a venue's layout, what they may edit and until when, and which status
// may follow which. A show is what is sold (one performance: a film at
// 18:30 on one screen, a concert on one night); the API calls it an event,
// and every URL and token names it by its event id. Shows created together
// share a SeriesID, so a title's shows are listed together.

// Show statuses.
const (
	// ShowDraft is being prepared: fans cannot see it or buy.
	ShowDraft = "draft"
	// ShowPublished is in the catalog and sells from its on-sale time.
	ShowPublished = "published"
	// ShowClosed is in the catalog, but its sale has stopped: no new holds,
	// the tickets sold stand. It may be published again.
	ShowClosed = "closed"
	// ShowCancelled will not take place: every booking is refunded and
	// every ticket invalid. Nothing follows it.
	ShowCancelled = "cancelled"
)

// ShowStatuses lists the statuses.
var ShowStatuses = []string{ShowDraft, ShowPublished, ShowClosed, ShowCancelled}

// transitions lists, for each status, the statuses an operator may move a
// show to, with the name of the action.
var transitions = map[string]map[string]string{
	ShowDraft:     {ShowPublished: "publish", ShowCancelled: "cancel"},
	ShowPublished: {ShowClosed: "close", ShowCancelled: "cancel"},
	ShowClosed:    {ShowPublished: "publish", ShowCancelled: "cancel"},
}

// ShowTransition checks that a show in status from may move to status to.
func ShowTransition(from, to string) error {
	if _, ok := transitions[from][to]; ok {
		return nil
	}
	if from == to {
		return Errorf(EConflict, "the show is %s already", from).With("show_status", from)
	}
	return Errorf(EConflict, "a %s show cannot become %s", from, to).With("show_status", from)
}

// ActionOf names the move from status from to status to ("publish",
// "close", "cancel"), or "" when it is not allowed.
func ActionOf(from, to string) string { return transitions[from][to] }

// EditFreeze is how long before its sale opens a show stops taking edits:
// the cores cache a show's prices and limits for a few seconds
// (core/postgres eventTTL), so a change must be made well before the first
// hold can be priced with it. After the freeze, a show is changed only by
// closing or cancelling it.
const EditFreeze = time.Minute

// Editable refuses an edit of show e at now: a show that is closed or
// cancelled, or whose sale opens within EditFreeze (or has opened).
func (e *Event) Editable(now time.Time) error {
	switch {
	case e.Status == ShowCancelled || e.Status == ShowClosed:
		return Errorf(EShowLocked, "a %s show cannot be edited", e.Status).With("show_status", e.Status)
	case !now.Add(EditFreeze).Before(e.OnsaleAt):
		return Errorf(EShowLocked, "the sale opens at %s: a show can be edited until %s before it opens",
			e.OnsaleAt.Format(time.RFC3339), EditFreeze).With("onsale_at", e.OnsaleAt)
	}
	return nil
}

// Bounds of what an operator may set on a show.
const (
	MaxShowsPerRequest = 100
	MaxTitle           = 200
	MinHoldSeconds     = 60
	MaxHoldSeconds     = 3600
	MaxPricePaise      = 100_000_000 // ₹10,00,000 a ticket
)

// ShowRequest is the wire form of the shows an operator creates: one or
// many start times of one title on one layout. Times are local times of
// the venue's zone ("2026-12-20T19:30"), or RFC 3339 with an offset.
// Prices sets a price per band (paise); a band it does not name keeps the
// layout's price. Zero MaxPerAccount and HoldSeconds take 6 and 480.
type ShowRequest struct {
	Title         string           `json:"title"`
	Kind          string           `json:"kind"`
	LayoutID      int64            `json:"layout_id"`
	Starts        []string         `json:"starts"`
	OnsaleAt      string           `json:"onsale_at"`
	Prices        map[string]int64 `json:"prices,omitempty"`
	MaxPerAccount int              `json:"max_per_account,omitempty"`
	HoldSeconds   int              `json:"hold_seconds,omitempty"`
}

// ShowPlan is a validated ShowRequest: what the store creates.
type ShowPlan struct {
	Title         string
	Kind          string
	LayoutID      int64
	Starts        []time.Time
	OnsaleAt      time.Time
	Bands         []PriceBand // every band of the layout, priced
	MaxPerAccount int
	HoldSeconds   int
}

// ParseLocal reads a time an operator typed: RFC 3339 with an offset, or a
// local date and time (minutes or seconds) in zone.
func ParseLocal(s string, zone *time.Location) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, s, zone); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: give 2026-12-20T19:30 (the venue's local time) or RFC 3339", s)
}

// Plan validates the request against its layout's venue zone and bands at
// now: a title, a kind, 1 to MaxShowsPerRequest distinct start times in
// the future and after the sale opens, a sale that opens after EditFreeze
// from now, a price for known bands only, and bounded limits.
func (r ShowRequest) Plan(zone *time.Location, bands []PriceBand, now time.Time) (ShowPlan, error) {
	p := ShowPlan{Title: strings.TrimSpace(r.Title), Kind: r.Kind, LayoutID: r.LayoutID,
		MaxPerAccount: r.MaxPerAccount, HoldSeconds: r.HoldSeconds}
	if err := checkTitle(p.Title); err != nil {
		return p, err
	}
	if p.Kind != KindConcert && p.Kind != KindMovie {
		return p, Errorf(EInvalid, "kind must be %s or %s", KindConcert, KindMovie)
	}
	if len(r.Starts) == 0 || len(r.Starts) > MaxShowsPerRequest {
		return p, Errorf(EInvalid, "starts lists 1 to %d start times", MaxShowsPerRequest)
	}
	onsale, err := ParseLocal(r.OnsaleAt, zone)
	if err != nil {
		return p, Errorf(EInvalid, "onsale_at: %v", err)
	}
	p.OnsaleAt = onsale
	if !now.Add(EditFreeze).Before(onsale) {
		return p, Errorf(EInvalid, "onsale_at %s is past or within %s: a sale opens in the future", r.OnsaleAt, EditFreeze)
	}
	for i, s := range r.Starts {
		t, err := ParseLocal(s, zone)
		if err != nil {
			return p, Errorf(EInvalid, "starts[%d]: %v", i, err)
		}
		if !t.After(onsale) {
			return p, Errorf(EInvalid, "starts[%d] %s is not after the sale opens (%s)", i, s, r.OnsaleAt)
		}
		if slices.ContainsFunc(p.Starts, t.Equal) {
			return p, Errorf(EInvalid, "starts[%d] %s is listed twice", i, s)
		}
		p.Starts = append(p.Starts, t)
	}
	if p.MaxPerAccount == 0 {
		p.MaxPerAccount = 6
	}
	if p.HoldSeconds == 0 {
		p.HoldSeconds = 480
	}
	if err := checkLimits(p.MaxPerAccount, p.HoldSeconds); err != nil {
		return p, err
	}
	p.Bands, err = Priced(bands, r.Prices)
	return p, err
}

// Priced returns bands with the prices set (by band code): every code set
// must be a band's, every price 0 to MaxPricePaise.
func Priced(bands []PriceBand, prices map[string]int64) ([]PriceBand, error) {
	out := slices.Clone(bands)
	for code, price := range prices {
		i := slices.IndexFunc(out, func(b PriceBand) bool { return b.Code == code })
		switch {
		case i < 0:
			codes := make([]string, len(bands))
			for j, b := range bands {
				codes[j] = b.Code
			}
			return nil, Errorf(EInvalid, "prices: no band %q on this layout (its bands: %s)", code, strings.Join(codes, ", "))
		case price < 0 || price > MaxPricePaise:
			return nil, Errorf(EInvalid, "prices: band %s: a price is 0 to %d paise", code, MaxPricePaise)
		}
		out[i].PricePaise = price
	}
	return out, nil
}

func checkTitle(t string) error {
	if t == "" || utf8.RuneCountInString(t) > MaxTitle {
		return Errorf(EInvalid, "title is 1 to %d characters", MaxTitle)
	}
	return nil
}

func checkLimits(maxPerAccount, holdSeconds int) error {
	switch {
	case maxPerAccount < 1 || maxPerAccount > MaxSeatsPerRequest:
		return Errorf(EInvalid, "max_per_account is 1 to %d", MaxSeatsPerRequest)
	case holdSeconds < MinHoldSeconds || holdSeconds > MaxHoldSeconds:
		return Errorf(EInvalid, "hold_seconds is %d to %d", MinHoldSeconds, MaxHoldSeconds)
	}
	return nil
}

// ShowPatch is an edit of one show: each set field changes.
type ShowPatch struct {
	Title         *string          `json:"title"`
	StartsAt      *string          `json:"starts_at"`
	OnsaleAt      *string          `json:"onsale_at"`
	Prices        map[string]int64 `json:"prices"`
	MaxPerAccount *int             `json:"max_per_account"`
	HoldSeconds   *int             `json:"hold_seconds"`
}

// Apply returns show e with the patch applied, validated as Plan validates
// a new show (zone: the venue's), or the first thing wrong. It does not
// check that e may be edited (Editable).
func (p ShowPatch) Apply(e Event, zone *time.Location, now time.Time) (Event, error) {
	if p.Title == nil && p.StartsAt == nil && p.OnsaleAt == nil && p.Prices == nil && p.MaxPerAccount == nil && p.HoldSeconds == nil {
		return e, Errorf(EInvalid, "nothing to change: give title, starts_at, onsale_at, prices, max_per_account or hold_seconds")
	}
	if p.Title != nil {
		e.Name = strings.TrimSpace(*p.Title)
		if err := checkTitle(e.Name); err != nil {
			return e, err
		}
	}
	var err error
	if p.StartsAt != nil {
		if e.StartsAt, err = ParseLocal(*p.StartsAt, zone); err != nil {
			return e, Errorf(EInvalid, "starts_at: %v", err)
		}
	}
	if p.OnsaleAt != nil {
		if e.OnsaleAt, err = ParseLocal(*p.OnsaleAt, zone); err != nil {
			return e, Errorf(EInvalid, "onsale_at: %v", err)
		}
		if !now.Add(EditFreeze).Before(e.OnsaleAt) {
			return e, Errorf(EInvalid, "onsale_at %s is past or within %s: a sale opens in the future", *p.OnsaleAt, EditFreeze)
		}
	}
	if !e.StartsAt.After(e.OnsaleAt) {
		return e, Errorf(EInvalid, "the show starts (%s) before its sale opens (%s)",
			e.StartsAt.In(zone).Format(time.DateTime), e.OnsaleAt.In(zone).Format(time.DateTime))
	}
	if p.MaxPerAccount != nil {
		e.MaxPerAccount = *p.MaxPerAccount
	}
	if p.HoldSeconds != nil {
		e.HoldSeconds = *p.HoldSeconds
	}
	if err := checkLimits(e.MaxPerAccount, e.HoldSeconds); err != nil {
		return e, err
	}
	if p.Prices != nil {
		if e.Bands, err = Priced(e.Bands, p.Prices); err != nil {
			return e, err
		}
	}
	return e, nil
}

// VenueLayout is a seat layout an operator imported: a venue's plan of
// sections, rows and seats (or a general-admission capacity) with its
// bands' default prices. Shows are created on a layout and copy its seats.
type VenueLayout struct {
	ID        int64       `json:"id"`
	Name      string      `json:"name"`
	Venue     Venue       `json:"venue"`
	Seated    bool        `json:"seated"`
	Capacity  int         `json:"capacity"`
	Bands     []PriceBand `json:"price_bands"`
	CreatedAt time.Time   `json:"created_at"`
	CreatedBy string      `json:"created_by"`
}

// MaxCancelReason bounds the reason a cancellation gives fans.
const MaxCancelReason = 500

// Cancellation is how far a show's cancellation has come: its bookings by
// where their money is (due back, back in the fan's account as the
// provider confirmed), the messages sent, and jobs that gave up. Done once
// every booking's money is back and every holder told.
type Cancellation struct {
	EventID     int64     `json:"event_id"`
	Cancelled   bool      `json:"cancelled"`
	CancelledAt time.Time `json:"cancelled_at,omitzero"`
	Reason      string    `json:"reason"`
	// Bookings were confirmed when the show was cancelled.
	Bookings       int   `json:"bookings"`
	RefundDue      int   `json:"refund_due"`
	Refunded       int   `json:"refunded"`
	DuePaise       int64 `json:"due_paise"`
	RefundedPaise  int64 `json:"refunded_paise"`
	StillConfirmed int   `json:"still_confirmed"` // must be 0 once cancelled
	Notified       int   `json:"notified"`        // emails and SMS sent (or skipped: no address)
	NotifyPending  int   `json:"notify_pending"`
	DeadJobs       int   `json:"dead_jobs"` // jobs past their attempts: an operator looks
	// OldestDue is when the oldest refund still due was queued.
	OldestDue time.Time `json:"oldest_due,omitzero"`
	Done      bool      `json:"done"`
}
