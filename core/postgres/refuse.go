package postgres

import (
	"time"

	"github.com/onsale/onsale/core"
)

// TakenSeats is the core's memory of the seats a hold cannot win
// (core/seatmap.Taken, whose rules say when it refuses). The store asks it
// before each hold of named seats (refusing, without a statement, the
// seats it names) and each best-available hold (refusing sold out a band
// it knows has too few seats left); it tells it of this core's own holds
// and releases as they commit. It only ever refuses: every hold it passes
// is decided by the database, so a stale memory can cost a fan a refusal
// a retry a second later would not get, never a double sale. GA holds do
// not ask: the counter's one statement refuses them as cheaply.
type TakenSeats interface {
	// Refuse names the seats (of seats) known taken; nil: ask the database.
	Refuse(event int64, seats []string) []string
	// SoldOut reports whether fewer than count seats of band are not known
	// taken (a best-available hold that cannot win); false: ask the database.
	SoldOut(event int64, band string, count int) bool
	// Held records seats this core held, until a deadline no later than
	// the hold's lapse.
	Held(event int64, seats []string, until time.Time)
	// Freed records seats this core gave back to sale.
	Freed(event int64, seats []string)
}

// refuse answers a hold of seats the core knows are taken with the
// database's own answer (seatsTaken): ESeatsTaken naming those seats.
// A nil error means: ask the database.
func (db *DB) refuse(event int64, seats []string) error {
	if db.taken == nil {
		return nil
	}
	taken := db.taken.Refuse(event, seats)
	if len(taken) == 0 {
		return nil
	}
	return core.Errorf(core.ESeatsTaken, "%d of the seats are no longer available", len(taken)).With("seats", taken)
}

// refuseBand answers a best-available hold for a band the core knows has
// fewer than count seats left with the database's own answer (bandSoldOut).
// A nil error means: ask the database.
func (db *DB) refuseBand(event int64, band string, count int) error {
	if db.taken == nil || !db.taken.SoldOut(event, band, count) {
		return nil
	}
	return core.Errorf(core.ESoldOut, "fewer than %d seats left in %s", count, band).With("band", band)
}

// seatsHeld tells the memory of seats this core has just held: sent is
// when the hold statement was first sent, before the database read the
// clock from which it counts the hold's seconds.
func (db *DB) seatsHeld(event int64, seats []string, sent time.Time, holdSeconds int) {
	if db.taken != nil {
		db.taken.Held(event, seats, sent.Add(time.Duration(holdSeconds)*time.Second))
	}
}

// seatsFreed tells the memory of seats this core has just given back.
func (db *DB) seatsFreed(event int64, seats []string) {
	if db.taken != nil {
		db.taken.Freed(event, seats)
	}
}
