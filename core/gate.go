package core

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The gate: venue staff scan tickets, and each ticket lets one person in.
//
// Online, a scan is redeemed in the database, and the database's unique
// key on the ticket makes the redemption exactly once however many gates
// scan the same code at the same instant. Offline, a scanner can check
// only the ticket's signature, the list of revoked tickets it last synced
// and its own scans: two offline gates can each admit a copy of the same
// ticket, and the duplicate is learnt only when they sync. Offline is at
// most once per scanner, not exactly once.

// Staff is who scans: a steward at one gate of one venue (the staff
// token's claims).
type Staff struct {
	Name  string `json:"name"`
	Venue int64  `json:"venue"`
	Gate  string `json:"gate"`
}

// StaffPrefix starts a staff token's subject: "staff:<name>".
const StaffPrefix = "staff:"

// Validate checks a staff identity: a name, a venue and a gate.
func (s Staff) Validate() error {
	switch {
	case s.Name == "" || len(s.Name) > 64:
		return Errorf(EInvalid, "a staff name is 1 to 64 characters")
	case s.Venue <= 0:
		return Errorf(EInvalid, "a venue id is positive")
	case s.Gate == "" || len(s.Gate) > 32:
		return Errorf(EInvalid, "a gate is 1 to 32 characters")
	}
	return nil
}

// TicketRef is a ticket's reference on the gate's lists and answers:
// "<booking>-<n>" (ticket n of the booking), what a v2 QR code carries.
func TicketRef(booking int64, n int) string {
	return strconv.FormatInt(booking, 10) + "-" + strconv.Itoa(n)
}

// ParseTicketRef is the inverse of TicketRef.
func ParseTicketRef(ref string) (booking int64, n int, ok bool) {
	b, ns, found := strings.Cut(ref, "-")
	if !found {
		return 0, 0, false
	}
	booking, err1 := strconv.ParseInt(b, 10, 64)
	n, err2 := strconv.Atoi(ns)
	return booking, n, err1 == nil && err2 == nil && booking > 0 && n > 0 && TicketRef(booking, n) == ref // one spelling
}

// Scan is one scan of a verified ticket (its signature already checked)
// to redeem.
type Scan struct {
	Event   int64
	Booking int64
	N       int
	Staff   Staff
	// At is when the ticket was scanned: now online, the scanner's clock
	// for an offline scan being synced.
	At time.Time
	// Offline marks a scan made offline and redeemed at sync.
	Offline bool
	// ScanID is the scanner's id for this look at the ticket (a UUID, or
	// ""): a scan sent again with the same id is its own check-in, not a
	// duplicate (an online answer lost after the core committed, a sync
	// resent).
	ScanID string
	// ClientAt is the scanner's clock as it sent it (zero: none); kept
	// beside the time used and the time recorded.
	ClientAt time.Time
}

// ValidScanID tells whether id is a scan id: empty (none) or a UUID.
func ValidScanID(id string) bool { return id == "" || ValidUUID(id) }

// ValidUUID tells whether s is a UUID in its text form (hold ids, scan ids).
func ValidUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'):
			return false
		}
	}
	return true
}

// CheckIn is a redeemed ticket: the one row that says it let someone in.
type CheckIn struct {
	Ticket string `json:"ticket"` // TicketRef
	Event  int64  `json:"event_id"`
	// EventName is filled on an admitted scan.
	EventName string    `json:"event_name,omitempty"`
	Booking   int64     `json:"booking_id"`
	Seat      string    `json:"seat,omitempty"`
	Gate      string    `json:"gate"`
	Staff     string    `json:"staff"`
	At        time.Time `json:"at"`
	Offline   bool      `json:"offline,omitempty"`
	// Timezone is the venue's, for telling the time as the gate sees it.
	Timezone string `json:"-"`
}

// AlreadyUsed is the error of a second scan: "already used at gate 3 at
// 19:02", the time in the venue's zone, with gate and at as details.
func (c *CheckIn) AlreadyUsed() *Error {
	local := c.At
	if loc, err := time.LoadLocation(c.Timezone); err == nil {
		local = c.At.In(loc)
	}
	return Errorf(EAlreadyUsed, "already used at gate %s at %s", c.Gate, local.Format("15:04")).
		With("gate", c.Gate).With("at", local.Format(time.RFC3339)).With("ticket", c.Ticket)
}

// GateEvent is an event a gate scans for today.
type GateEvent struct {
	ID       int64     `json:"id"`
	Name     string    `json:"name"`
	StartsAt time.Time `json:"starts_at"`
}

// OfflinePack is what a scanner keeps for when the network is down.
type OfflinePack struct {
	Venue  Venue       `json:"venue"`
	Events []GateEvent `json:"events"`
	// Revoked are the refs of these events' tickets whose booking is no
	// longer CONFIRMED and captured (refunded, cancelled).
	Revoked []string `json:"revoked"`
	// Used are the tickets of these events already checked in: all of
	// them, or with Since those recorded from Since on.
	Used []CheckIn `json:"used"`
	AsOf time.Time `json:"as_of"`
	// Since is set on an incremental pack (GET /v1/gate/offline?since=):
	// Used holds only the check-ins recorded since then (less
	// GateSinceOverlap), to add to the scanner's list.
	Since *time.Time `json:"since,omitempty"`
}

// GateSinceOverlap is how far before since an incremental pack reaches
// back: a check-in whose transaction began before the previous pack's
// as_of but committed after its read is not missed. A scanner merges
// the lists by ticket.
const GateSinceOverlap = time.Minute

// GateDayBefore is how long after its start an event still counts as "of
// the day" for the gate: late arrivals, a show past midnight.
const GateDayBefore = 12 * time.Hour

// GateDayAhead is how soon an event must start to count as "of the day"
// whatever the date: the doors of a show just past midnight open before
// midnight, when the venue's day is still the one before.
const GateDayAhead = 6 * time.Hour

// CheckIns is the gate's store.
type CheckIns interface {
	// Redeem checks a scanned ticket in, once. It fails with ETicketRevoked
	// when the ticket's booking is not CONFIRMED and captured (or the
	// ticket was withdrawn), EWrongVenue when its event is at another venue
	// than the staff's, EWrongEvent when it is not one of the venue's events
	// of the day at the scan's time (the offline pack's window), and with CheckIn.AlreadyUsed when the ticket was
	// checked in before; a ticket the database does not know is revoked.
	Redeem(ctx context.Context, s Scan) (*CheckIn, error)
	// Offline returns the venue's offline pack: its events starting from
	// GateDayBefore ago to the end of the venue's day, or to GateDayAhead
	// ahead when that is later. A non-zero since
	// limits Used to the check-ins recorded from since-GateSinceOverlap on.
	Offline(ctx context.Context, venue int64, now, since time.Time) (*OfflinePack, error)
}

// MaxSyncScans bounds the scans of one sync request.
const MaxSyncScans = 200

// SyncResult is what a sync answers for one offline scan: admitted (this
// scan was the first), duplicate (another scan was first: gate, at),
// revoked, wrong_venue, wrong_event or invalid.
type SyncResult struct {
	Ticket  string `json:"ticket,omitempty"` // TicketRef, when the payload verified
	Result  string `json:"result"`
	Gate    string `json:"gate,omitempty"`
	At      string `json:"at,omitempty"`
	Message string `json:"message,omitempty"`
}

// Sync results.
const (
	SyncAdmitted   = "admitted"
	SyncDuplicate  = "duplicate"
	SyncRevoked    = "revoked"
	SyncWrongVenue = "wrong_venue"
	SyncWrongEvent = "wrong_event"
	SyncInvalid    = "invalid"
)

// SyncOutcome maps Redeem's outcome for an offline scan to its sync result.
func SyncOutcome(ref string, c *CheckIn, err error) SyncResult {
	if err == nil {
		return SyncResult{Ticket: ref, Result: SyncAdmitted, Gate: c.Gate, At: c.At.Format(time.RFC3339)}
	}
	e, ok := err.(*Error)
	if !ok {
		return SyncResult{Ticket: ref, Result: SyncInvalid, Message: "internal error"}
	}
	r := SyncResult{Ticket: ref, Message: e.Message}
	switch e.Code {
	case EAlreadyUsed:
		r.Result = SyncDuplicate
		r.Gate = fmt.Sprint(e.Detail["gate"])
		r.At = fmt.Sprint(e.Detail["at"])
	case ETicketRevoked:
		r.Result = SyncRevoked
	case EWrongVenue:
		r.Result = SyncWrongVenue
	case EWrongEvent:
		r.Result = SyncWrongEvent
	default:
		r.Result = SyncInvalid
	}
	return r
}
