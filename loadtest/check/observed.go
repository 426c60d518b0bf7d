package check

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// What the crowd saw, kept by the crowd itself so that the rules below do
// not rest on the database's own word: the bookings each fan was told were
// confirmed, and each fan's place in line as the fan saw it.

// Confirmation is one booking a fan was told was confirmed: the answer of
// the confirm (card) or of the booking the fan watched (UPI).
type Confirmation struct {
	Fan         int
	Account     string // the account that owns it ("" when the answer did not say)
	Booking     int64
	Seats       []string
	AmountPaise int64
	At          time.Time
}

// Place kinds: what one entry of a fan's place history records.
const (
	PlaceJoined   = "joined"   // the join's answer (Position 0: in the pre-queue, its place drawn at onsale)
	PlaceSeen     = "seen"     // a status answer with a position other than the last one
	PlaceRequeued = "requeued" // the gateway said the turn lapsed unclaimed: back in line
	PlaceReset    = "reset"    // the gateway said the room was reset (409): the place is gone
	PlaceEnded    = "ended"    // the gateway said the fan's turn is over (410) before it was admitted
	PlaceAdmitted = "admitted"
)

// Place is one change of a fan's place in line as the fan saw it.
type Place struct {
	At       time.Time
	Kind     string
	Position int64
	// Gap is the longest the fan went without asking for its place
	// (between two polls, answered or not) since the previous entry: a fan
	// that did not ask for longer than claim_seconds let its turn lapse.
	Gap time.Duration
	// Unseen, for a requeue, runs from the poll before the one answered
	// with it to that answer: the longest the gateway could have gone
	// without one of the fan's polls (a poll slow on its way, in a busy
	// gateway or a crowd short of connections, reaches it late).
	Unseen time.Duration
}

// Answer is how many requests of one route got one class of answer in
// one second: an HTTP status ("200", "503"), or "conn" (no connection, or
// it broke) or "timeout" (no answer in time) when none came.
type Answer struct {
	Route string
	Class string
	At    time.Time // the second (truncated)
	N     int
}

// Error classes beside the statuses.
const (
	ClassConn    = "conn"
	ClassTimeout = "timeout"
)

// IsError says whether an answer class is a failure of the service (a 5xx,
// no connection, no answer in time) rather than an answer about the
// request (a 4xx: seats taken, over the limit, refused).
func IsError(class string) bool {
	return class == ClassConn || class == ClassTimeout || strings.HasPrefix(class, "5")
}

// told is one booking as the database has it.
type told struct {
	Status  string
	Seats   []string
	Amount  int64
	Account string
}

const confirmationsName = "every booking a fan was told was confirmed is in the database, CONFIRMED, with the seats and amount the fan was told (the crowd's own list)"

// toldSQL reads the bookings the fans were told about, by id, whatever
// their event. $1 ids.
const toldSQL = `SELECT id, status, seat_ids, amount_paise, account FROM bookings WHERE id = ANY ($1)`

func confirmationsKept(ctx context.Context, conn *pgx.Conn, in Input) Result {
	ids := make([]int64, 0, len(in.Confirmations))
	for _, c := range in.Confirmations {
		ids = append(ids, c.Booking)
	}
	rows, err := conn.Query(ctx, toldSQL, ids)
	if err != nil {
		return Result{confirmationsName, false, "query failed: " + err.Error()}
	}
	db := map[int64]told{}
	var id int64
	var b told
	if _, err := pgx.ForEachRow(rows, []any{&id, &b.Status, &b.Seats, &b.Amount, &b.Account}, func() error {
		db[id] = told{b.Status, slices.Clone(b.Seats), b.Amount, b.Account}
		return nil
	}); err != nil {
		return Result{confirmationsName, false, "query failed: " + err.Error()}
	}
	return compareConfirmations(in.Confirmations, db)
}

// compareConfirmations checks the crowd's confirmations against the
// bookings the database holds: each must be there, CONFIRMED, owned by
// the account the fan signed in with, with exactly the seats and the
// amount the fan was told. None recorded is no evidence: the rule fails.
func compareConfirmations(cs []Confirmation, db map[int64]told) Result {
	var missing, wrong int
	var examples []string
	seen := map[int64]bool{}
	var paise int64
	for _, c := range cs {
		if seen[c.Booking] {
			continue
		}
		seen[c.Booking] = true
		paise += c.AmountPaise
		b, ok := db[c.Booking]
		why := ""
		switch {
		case !ok:
			missing++
			why = "not in the database"
		case b.Status != "CONFIRMED":
			why = "is " + b.Status
		case !sameSeats(b.Seats, c.Seats):
			why = fmt.Sprintf("has seats %v, the fan was told %v", b.Seats, c.Seats)
		case b.Amount != c.AmountPaise:
			why = fmt.Sprintf("is for %s, the fan was told %s", rupees(b.Amount), rupees(c.AmountPaise))
		case c.Account != "" && b.Account != c.Account:
			why = fmt.Sprintf("belongs to %s, the fan was %s", b.Account, c.Account)
		}
		if why == "" {
			continue
		}
		if ok {
			wrong++
		}
		if len(examples) < 3 {
			examples = append(examples, fmt.Sprintf("booking %d (fan %d) %s", c.Booking, c.Fan, why))
		}
	}
	detail := fmt.Sprintf("%d bookings the fans were told were confirmed (%s); %d not in the database, %d different there",
		len(seen), rupees(paise), missing, wrong)
	if len(examples) > 0 {
		detail += ", e.g. " + strings.Join(examples, "; ")
	}
	return evidenceOf{len(seen), "the crowd recorded no confirmation"}.rule(Result{confirmationsName, missing+wrong == 0, detail})
}

func sameSeats(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

const keptName = "no fan who held a place in line lost it (moved back, reset or ended before its turn), as the fans saw it"

// placesKept reads each fan's place history: once a fan holds a place (its
// first known position), it may only move back when the gateway says its
// turn lapsed unclaimed and the fan had indeed not asked for its place for
// claim_seconds or longer (the fan let it lapse), or its polls, though
// sent in time, reached the gateway that much apart (slow: counted and
// shown, the status latency says why). Any other move back, a reset of
// the room (409) or an end of its turn (410) before it was admitted is a
// lost place. No fan with a place is no evidence: the rule
// fails.
func placesKept(adms []Admission, claim time.Duration) Result {
	var holders, lost, lapsed, slow int
	var examples []string
	for _, a := range adms {
		place, why := int64(0), ""
		for _, p := range a.Places {
			switch p.Kind {
			case PlaceJoined, PlaceSeen:
				if place > 0 && p.Position > place {
					why = fmt.Sprintf("moved back from %d to %d at %s", place, p.Position, p.At.Format("15:04:05"))
				}
			case PlaceRequeued:
				switch {
				case place == 0:
				case p.Gap >= claim:
					lapsed++
				case p.Unseen >= claim:
					slow++
				default:
					why = fmt.Sprintf("sent back from %d to %d at %s though its polls reached the gateway at most %.1f s apart (claim_seconds %.0f)",
						place, p.Position, p.At.Format("15:04:05"), max(p.Gap, p.Unseen).Seconds(), claim.Seconds())
				}
			case PlaceReset:
				if place > 0 {
					why = fmt.Sprintf("the room was reset at %s: place %d gone", p.At.Format("15:04:05"), place)
				}
			case PlaceEnded:
				if place > 0 {
					why = fmt.Sprintf("told its turn was over at %s while waiting at %d", p.At.Format("15:04:05"), place)
				}
			}
			if why != "" {
				break
			}
			if p.Position > 0 {
				if place == 0 {
					holders++
				}
				place = p.Position
			}
		}
		if why != "" {
			lost++
			if len(examples) < 3 {
				examples = append(examples, fmt.Sprintf("fan %d %s", a.Fan, why))
			}
		}
	}
	detail := fmt.Sprintf("%d fans held a place; %d lost it; %d let their turn lapse (no poll for claim_seconds) and went back", holders, lost, lapsed)
	if slow > 0 {
		detail += fmt.Sprintf("; %d went back though they polled in time, their polls slow to reach the gateway (claim_seconds apart)", slow)
	}
	if len(examples) > 0 {
		detail += ", e.g. " + strings.Join(examples, "; ")
	}
	return evidenceOf{holders, "no fan's place history recorded"}.rule(Result{keptName, lost == 0, detail})
}
