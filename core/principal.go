package core

import (
	"strconv"
	"time"
)

// Who may act on holds and bookings. A request's bearer token is resolved
// (core/http) into one Principal; these rules decide what it may do. The
// waiting-room session (the admit token) decides only who may take new
// seats; what a fan already holds or bought stays theirs after it ends,
// through the account token or the hold's own grant.

// Principal kinds, one per token kind the core accepts.
const (
	// PrincipalAdmit is the gateway's admit token: creates holds for its
	// event; acts on its own identity's holds and bookings of that event.
	PrincipalAdmit = "admit"
	// PrincipalAccount is an account token: acts on everything its
	// identity (acct:<id>) owns, whatever the event, and reads /v1/me.
	PrincipalAccount = "account"
	// PrincipalHoldGrant is a hold's grant (hold_token): acts on that one
	// hold and reads the bookings of that hold.
	PrincipalHoldGrant = "hold_grant"
	// PrincipalTicketLink is a ticket link: reads one booking and its QR
	// codes, nothing else.
	PrincipalTicketLink = "ticket_link"
	// PrincipalOperator is an operator's session token: the operators' API
	// only (core/operator.go says what each role may do there); it acts
	// on no fan's holds or bookings.
	PrincipalOperator = "operator"
)

// OperatorPrefix starts an operator's identity: "op:<name>".
const OperatorPrefix = "op:"

// Token lifetimes tied to the show: a grant outlives any hold (the state
// checks end it sooner) and a ticket link serves until the day after.
const (
	HoldGrantAfterStart  = 12 * time.Hour
	TicketLinkAfterStart = 24 * time.Hour
)

// Principal is who a request acts for.
type Principal struct {
	Kind string
	// Identity is the owner the principal speaks for: the admit token's
	// sub, acct:<id> for an account, the grant's or link's sub.
	Identity string
	EventID  int64  // admit token: its event; grant: the hold's event
	Max      int    // admit token: its ticket limit (0: the event's)
	HoldID   string // grant: its one hold
	Booking  int64  // ticket link: its one booking
	// AccountID is the account of an account token ("" otherwise).
	AccountID string
	// Operator is the operator's name of an operator token.
	Operator string
	// IssuedAt is when an operator token was signed (its session's start).
	IssuedAt time.Time
}

func forbidden(format string, args ...any) error { return Errorf(EForbidden, format, args...) }

// MayCreateHold allows new seats only to the admit token of that event.
func (p *Principal) MayCreateHold(event int64) error {
	switch {
	case p.Kind != PrincipalAdmit:
		return forbidden("taking seats needs the admit token of the waiting room")
	case p.EventID != event:
		return Errorf(EWrongEvent, "the admit token is for event %d, not %d", p.EventID, event)
	}
	return nil
}

// HoldRef names hold id for a change on the principal's behalf, or refuses
// before the store is asked: a ticket link never changes anything, a grant
// only its own hold. The store checks owner, event and version on the row.
func (p *Principal) HoldRef(id string, version int64) (HoldRef, error) {
	ref := HoldRef{ID: id, Account: p.Identity, Version: version}
	switch p.Kind {
	case PrincipalAdmit:
		ref.EventID = p.EventID
	case PrincipalAccount:
	case PrincipalHoldGrant:
		if id != p.HoldID {
			return ref, forbidden("this hold token is for another hold")
		}
		ref.EventID = p.EventID
	case PrincipalOperator:
		return ref, forbidden("an operator token acts on shows, not on a fan's holds")
	default:
		return ref, forbidden("a ticket link only shows its tickets")
	}
	return ref, nil
}

// MayReadHold checks the principal may read hold h.
func (p *Principal) MayReadHold(h *Hold) error {
	ref, err := p.HoldRef(h.ID, 0)
	switch {
	case err != nil:
		return err
	case ref.EventID != 0 && ref.EventID != h.EventID:
		return Errorf(EWrongEvent, "the token is for event %d, not %d", ref.EventID, h.EventID)
	case h.Account != p.Identity:
		return forbidden("this hold belongs to another account")
	}
	return nil
}

// MayReadBooking checks the principal may read booking b (and its QR
// codes).
func (p *Principal) MayReadBooking(b *Booking) error {
	ok := false
	switch p.Kind {
	case PrincipalAdmit:
		ok = b.Account == p.Identity && b.EventID == p.EventID
	case PrincipalAccount:
		ok = b.Account == p.Identity
	case PrincipalHoldGrant:
		ok = b.HoldID == p.HoldID && b.Account == p.Identity
	case PrincipalTicketLink:
		ok = b.ID == p.Booking && b.Account == p.Identity
	}
	if !ok {
		return forbidden("booking %s belongs to another account", strconv.FormatInt(b.ID, 10))
	}
	return nil
}

// MayUseAccount allows /v1/me only to an account token.
func (p *Principal) MayUseAccount() error {
	if p.Kind != PrincipalAccount {
		return forbidden("this needs an account token: sign in with your phone")
	}
	return nil
}
