package check

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/onsale/onsale/shared/account"
	"github.com/onsale/onsale/shared/redisconn"
)

// The accounts' invariants: with accounts required, one place in line and
// the per-account limit bind a person (one account per verified phone).

// guestOwnedSQL counts the event's holds and bookings that belong to no
// account (a guest's vis: identity, or anything else). $1 event.
const guestOwnedSQL = `
SELECT (SELECT count(*) FROM holds WHERE event_id = $1 AND account NOT LIKE 'acct:%')
     + (SELECT count(*) FROM bookings WHERE event_id = $1 AND account NOT LIKE 'acct:%')`

// boughtSQL is, per account, the tickets of its CONFIRMED bookings for the
// event, beside the event's max_per_account: read from the bookings
// themselves, not from the account_tickets counter the hold statement
// keeps. $1 event.
const boughtSQL = `
SELECT b.account, sum(b.quantity)::int, e.max_per_account
  FROM bookings b JOIN events e ON e.id = b.event_id
 WHERE b.event_id = $1 AND b.status = 'CONFIRMED'
 GROUP BY b.account, e.max_per_account`

// unverifiedSQL counts the accounts holding (or having held) seats of the
// event with no account row with a phone: an account is created only when
// a code sent to its phone is verified, so its row's phone is the verified
// one. $1 event.
const unverifiedSQL = `
SELECT count(DISTINCT h.account) FROM holds h
  LEFT JOIN accounts a ON h.account = 'acct:' || a.id
 WHERE h.event_id = $1 AND h.account LIKE 'acct:%'
   AND (a.id IS NULL OR a.phone IS NULL OR a.phone !~ '^\+[1-9][0-9]{7,14}$')`

// accountHoldersSQL counts the accounts holding (or having held) seats of
// the event, for the verdict's detail. $1 event.
const accountHoldersSQL = `SELECT count(DISTINCT account) FROM holds WHERE event_id = $1 AND account LIKE 'acct:%'`

// phonesSQL is every account's identity and phone.
const phonesSQL = `SELECT 'acct:' || id, phone FROM accounts`

// accountResults are the accounts' invariants read from the core's
// database: every hold and booking an account's (when accounts are
// required), nobody bought more than the limit, every account holding
// seats has a verified phone.
func accountResults(ctx context.Context, conn *pgx.Conn, in Input) []Result {
	var out []Result
	ev := in.Event
	if in.AccountsRequired {
		var n, holds int
		r := Result{Name: "every hold and booking belongs to an account (acct:), the event requiring one"}
		if err := conn.QueryRow(ctx, guestOwnedSQL, ev).Scan(&n); err != nil {
			r.Detail = "query failed: " + err.Error()
		} else if err := conn.QueryRow(ctx, `SELECT count(*) FROM holds WHERE event_id = $1`, ev).Scan(&holds); err != nil {
			r.Detail = "query failed: " + err.Error()
		} else {
			r.Pass, r.Detail = n == 0, fmt.Sprintf("%d holds; %d held or bought by guests", holds, n)
			r = evidenceOf{holds, "no hold of the event in the database"}.rule(r)
		}
		out = append(out, r)
	}
	out = append(out, boughtWithin(ctx, conn, ev))
	var bad, holders int
	r := Result{Name: "every account that holds seats has a verified phone"}
	if err := conn.QueryRow(ctx, unverifiedSQL, ev).Scan(&bad); err != nil {
		r.Detail = "query failed: " + err.Error()
	} else if err := conn.QueryRow(ctx, accountHoldersSQL, ev).Scan(&holders); err != nil {
		r.Detail = "query failed: " + err.Error()
	} else {
		r.Pass, r.Detail = bad == 0, fmt.Sprintf("%d accounts held seats, %d without a verified phone", holders, bad)
		r = evidenceOf{holders, "no account held seats of the event"}.rule(r)
	}
	return append(out, r)
}

// Bought is what one account bought for the event.
type Bought struct {
	Account     string
	Tickets     int // in its CONFIRMED bookings
	MaxPerEvent int // the event's max_per_account
}

func boughtWithin(ctx context.Context, conn *pgx.Conn, ev int64) Result {
	rows, err := conn.Query(ctx, boughtSQL, ev)
	if err != nil {
		return Result{limitName, false, "query failed: " + err.Error()}
	}
	bought, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Bought])
	if err != nil {
		return Result{limitName, false, "query failed: " + err.Error()}
	}
	return withinLimit(bought)
}

const limitName = "no account bought more than its limit (tickets in CONFIRMED bookings per account <= max_per_account)"

// withinLimit fails when any account bought more tickets than the limit.
func withinLimit(bought []Bought) Result {
	var over []string
	most, limit := 0, 0
	for _, b := range bought {
		if b.Tickets > most {
			most, limit = b.Tickets, b.MaxPerEvent
		}
		if b.Tickets > b.MaxPerEvent {
			over = append(over, fmt.Sprintf("%s bought %d of %d", b.Account, b.Tickets, b.MaxPerEvent))
		}
	}
	detail := fmt.Sprintf("%d accounts bought; the most by one account %d (limit %d); %d over", len(bought), most, limit, len(over))
	if len(over) > 0 {
		sort.Strings(over)
		detail += ", e.g. " + strings.Join(over[:min(3, len(over))], "; ")
	}
	return evidenceOf{len(bought), "no account bought"}.rule(Result{limitName, len(over) == 0, detail})
}

// Line is the gateway's line of one event as it keeps it in Redis
// (gateway/redis: join.lua, prequeue.lua, claim.lua): {evt:<id>}:ids maps
// every identity that was given a place to that place (a number; "pre"
// while in the pre-queue draw, whose places are its ranks in {evt:<id>}:pre;
// "done" once its session ended), and {evt:<id>}:pre holds the draw.
type Line struct {
	IDs map[string]string // identity: place, "pre" or "done"
	Pre []string          // the pre-queue draw's identities, in place order
}

// ReadLine reads event's line from the Redis at addr (a redis:// URL or a
// cluster's host:port list: shared/redisconn).
func ReadLine(ctx context.Context, addr string, event int64) (Line, error) {
	rdb, err := redisconn.Open(ctx, addr, func(o *goredis.UniversalOptions) { o.ReadTimeout = 5 * time.Second })
	if err != nil {
		return Line{}, err
	}
	defer rdb.Close()
	p := "{evt:" + strconv.FormatInt(event, 10) + "}:"
	ids, err := rdb.HGetAll(ctx, p+"ids").Result()
	if err != nil {
		return Line{}, fmt.Errorf("read the line: %w", err)
	}
	pre, err := rdb.ZRange(ctx, p+"pre", 0, -1).Result()
	if err != nil {
		return Line{}, fmt.Errorf("read the pre-queue: %w", err)
	}
	return Line{IDs: ids, Pre: pre}, nil
}

const placesName = "no account held more than one place in line (the gateway's queue in Redis, per account and per phone)"

// onePlacePerAccount counts the places in line per account, and per
// person: phones maps an account identity to its phone (an account is one
// verified phone; two accounts of one phone are one person). Every
// identity in the ids hash or the draw held a place (the hash keeps one per
// identity, so a second place for a person is a second identity). With
// accounts required, a place held by a non-account identity fails too.
func onePlacePerAccount(l Line, phones map[string]string, required bool) Result {
	holders := map[string]bool{}
	for id := range l.IDs {
		holders[id] = true
	}
	for _, id := range l.Pre {
		holders[id] = true
	}
	perPerson := map[string][]string{}
	guests := 0
	for id := range holders {
		acct := account.AccountOf(id)
		if acct == "" {
			guests++
			continue
		}
		person := "account " + strings.TrimLeft(strings.ToLower(strings.TrimSpace(acct)), "0")
		if ph, ok := phones[account.IdentityPrefix+acct]; ok {
			person = "phone " + ph
		}
		perPerson[person] = append(perPerson[person], id)
	}
	var twice []string
	for person, ids := range perPerson {
		if len(ids) > 1 {
			sort.Strings(ids)
			twice = append(twice, fmt.Sprintf("%s: %s", person, strings.Join(ids, ", ")))
		}
	}
	sort.Strings(twice)
	detail := fmt.Sprintf("%d places: %d accounts (%d people), %d guests; %d people with more than one place",
		len(holders), len(holders)-guests, len(perPerson), guests, len(twice))
	if len(twice) > 0 {
		detail += ", e.g. " + strings.Join(twice[:min(3, len(twice))], "; ")
	}
	pass := len(twice) == 0
	if required && guests > 0 {
		pass = false
		detail += "; the event requires an account, yet guests held places"
	}
	return Result{placesName, pass, detail}
}

// linePlaces reads the line and the accounts' phones and checks
// onePlacePerAccount.
func linePlaces(ctx context.Context, conn *pgx.Conn, in Input) Result {
	l, err := ReadLine(ctx, in.RedisURL, in.Event)
	if err != nil {
		return Result{placesName, false, err.Error()}
	}
	rows, err := conn.Query(ctx, phonesSQL)
	if err != nil {
		return Result{placesName, false, "query failed: " + err.Error()}
	}
	phones := map[string]string{}
	var id, phone string
	if _, err := pgx.ForEachRow(rows, []any{&id, &phone}, func() error { phones[id] = phone; return nil }); err != nil {
		return Result{placesName, false, "query failed: " + err.Error()}
	}
	if len(l.IDs) == 0 && len(l.Pre) == 0 {
		return Result{placesName, false, "the line is empty: is this the gateway's Redis?"}
	}
	return onePlacePerAccount(l, phones, in.AccountsRequired)
}
