package postgres_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
)

var codeKey = []byte("test code key")

// naiveVerify is the obvious version of a code check: read the live code,
// compare, then mark it used. The gap between read and write is a round
// trip in real life; a short sleep stands in for it.
func naiveVerify(db *postgres.DB, phone string, hash []byte) (bool, error) {
	var stored []byte
	err := db.Pool().QueryRow(ctx, `SELECT code_hash FROM signin_codes WHERE phone = $1 AND used_at IS NULL AND expires_at > now()`, phone).Scan(&stored)
	if err != nil {
		return false, nil
	}
	if !bytes.Equal(stored, hash) {
		return false, nil
	}
	time.Sleep(time.Millisecond)
	_, err = db.Pool().Exec(ctx, `UPDATE signin_codes SET used_at = now() WHERE phone = $1`, phone)
	return err == nil, err
}

// N concurrent verifies of one right code, from N addresses: exactly one
// signs in, every time.
func TestRaceVerifyCode(t *testing.T) {
	const trials, fans = 30, 8
	newCode := func(t *testing.T, db *postgres.DB, trial int) (string, []byte) {
		t.Helper()
		phone := fmt.Sprintf("+9198%08d", trial)
		hash := core.CodeHash(codeKey, phone, "424242")
		if err := db.StoreCode(ctx, core.CodeRequest{Phone: phone, Addr: "setup", Hash: hash}, core.SignInLimits{SendsPerAddr: 1000}); err != nil {
			t.Fatal(err)
		}
		return phone, hash
	}

	t.Run("control: check-then-write signs in twice", func(t *testing.T) {
		db := postgrestest.NewDB(t, postgres.Options{})
		doubles := 0
		for trial := range trials {
			phone, hash := newCode(t, db, trial)
			var winners atomic.Int32
			together(fans, func(i int) {
				ok, err := naiveVerify(db, phone, hash)
				if err != nil {
					t.Error(err)
				}
				if ok {
					winners.Add(1)
				}
			})
			if winners.Load() > 1 {
				doubles++
			}
		}
		t.Logf("naive: %d of %d races used one code more than once", doubles, trials)
		if doubles == 0 {
			t.Fatal("the naive verify never signed in twice: the harness cannot see the bug")
		}
	})

	t.Run("product: one sign-in per code", func(t *testing.T) {
		db := postgrestest.NewDB(t, postgres.Options{})
		for trial := range trials {
			phone, hash := newCode(t, db, trial)
			var winners, refused atomic.Int32
			together(fans, func(i int) {
				a, err := db.VerifyCode(ctx, phone, fmt.Sprintf("10.0.%d.%d", trial, i), hash, core.SignInLimits{})
				switch {
				case err == nil && a.Phone == phone:
					winners.Add(1)
				case core.ErrorCode(err) == core.ECodeInvalid:
					refused.Add(1)
				default:
					t.Errorf("verify: %v", err)
				}
			})
			if winners.Load() != 1 || refused.Load() != fans-1 {
				t.Fatalf("trial %d: %d sign-ins, %d refusals; want 1 and %d", trial, winners.Load(), refused.Load(), fans-1)
			}
		}
		var accounts int
		if err := db.Pool().QueryRow(ctx, `SELECT count(*) FROM accounts`).Scan(&accounts); err != nil {
			t.Fatal(err)
		}
		if accounts != trials {
			t.Fatalf("%d accounts; want %d", accounts, trials)
		}
	})
}

// naiveAddrCount is the obvious per-address counter: read this hour's
// count, compare, then add one. The gap between read and write is a round
// trip in real life; a short sleep stands in for it.
func naiveAddrCount(db *postgres.DB, addr string, limit int) (bool, error) {
	var n int
	err := db.Pool().QueryRow(ctx, `SELECT coalesce(max(n), 0) FROM signin_counts
 WHERE scope = 'send_addr' AND key = $1 AND bucket = date_trunc('hour', now())`, addr).Scan(&n)
	if err != nil || n >= limit {
		return false, err
	}
	time.Sleep(time.Millisecond)
	_, err = db.Pool().Exec(ctx, `INSERT INTO signin_counts (scope, key, bucket, n) VALUES ('send_addr', $1, date_trunc('hour', now()), 1)
ON CONFLICT (scope, key, bucket) DO UPDATE SET n = signin_counts.n + 1`, addr)
	return err == nil, err
}

// warm opens n pooled connections, so that a race starts together rather
// than staggered by connection set-up.
func warm(t *testing.T, db *postgres.DB, n int) {
	together(n, func(int) {
		if _, err := db.Pool().Exec(ctx, `SELECT pg_sleep(0.05)`); err != nil {
			t.Error(err)
		}
	})
}

// The per-address limit is exact under concurrency: M sends from one
// address at once, each to its own phone, with room for N get exactly N
// through, and the refused ones leave no code behind.
func TestRaceSendLimit(t *testing.T) {
	const fans, room = 16, 5

	t.Run("control: read-then-count passes the limit", func(t *testing.T) {
		db := postgrestest.NewDB(t, postgres.Options{})
		warm(t, db, fans)
		var sent atomic.Int32
		together(fans, func(i int) {
			ok, err := naiveAddrCount(db, "10.9.9.9", room)
			if err != nil {
				t.Error(err)
			}
			if ok {
				sent.Add(1)
			}
		})
		t.Logf("read-then-count: %d of %d sends from one address passed a limit of %d", sent.Load(), fans, room)
		if sent.Load() <= room {
			t.Fatal("the naive counter held: the harness cannot see the bug")
		}
	})

	t.Run("product: one conditional upsert", func(t *testing.T) {
		db := postgrestest.NewDB(t, postgres.Options{})
		warm(t, db, fans)
		var sent, limited atomic.Int32
		together(fans, func(i int) {
			phone := fmt.Sprintf("+9197%08d", i)
			err := db.StoreCode(ctx, core.CodeRequest{Phone: phone, Addr: "10.9.9.9", Hash: core.CodeHash(codeKey, phone, "111111")},
				core.SignInLimits{SendsPerAddr: room})
			switch {
			case err == nil:
				sent.Add(1)
			case core.ErrorCode(err) == core.ERateLimited:
				limited.Add(1)
			default:
				t.Error(err)
			}
		})
		var codes, counted int
		if err := db.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM signin_codes), (SELECT coalesce(sum(n), 0) FROM signin_counts)`).Scan(&codes, &counted); err != nil {
			t.Fatal(err)
		}
		if sent.Load() != room || limited.Load() != fans-room || codes != room || counted != room {
			t.Fatalf("%d sent, %d limited, %d codes, counted %d; want %d, %d, %d, %d", sent.Load(), limited.Load(), codes, counted, room, fans-room, room, room)
		}
	})
}

// Verifies per address are exact too, and a refused verify uses no
// attempt: M wrong codes from one address at once with room for N get N
// code_invalid answers and N attempts, the rest rate_limited.
func TestRaceVerifyAddrLimit(t *testing.T) {
	const fans, room = 16, 5
	db := postgrestest.NewDB(t, postgres.Options{})
	for i := range fans {
		phone := fmt.Sprintf("+9195%08d", i)
		if err := db.StoreCode(ctx, core.CodeRequest{Phone: phone, Addr: "setup", Hash: core.CodeHash(codeKey, phone, "111111")}, core.SignInLimits{SendsPerAddr: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	var wrong, limited atomic.Int32
	together(fans, func(i int) {
		phone := fmt.Sprintf("+9195%08d", i)
		_, err := db.VerifyCode(ctx, phone, "10.8.8.8", core.CodeHash(codeKey, phone, "222222"), core.SignInLimits{VerifiesPerAddr: room})
		switch core.ErrorCode(err) {
		case core.ECodeInvalid:
			wrong.Add(1)
		case core.ERateLimited:
			limited.Add(1)
		default:
			t.Errorf("verify: %v", err)
		}
	})
	var attempts int
	if err := db.Pool().QueryRow(ctx, `SELECT sum(attempts) FROM signin_codes`).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if wrong.Load() != room || limited.Load() != fans-room || attempts != room {
		t.Fatalf("%d code_invalid, %d limited, %d attempts; want %d, %d, %d", wrong.Load(), limited.Load(), attempts, room, fans-room, room)
	}
}

// Last hour's count carries into this hour's estimate: an address that
// used its limit many times over last hour is refused now, with a wait of
// at most the window, and the refusal records nothing.
func TestSendLimitCarriesLastHour(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	if _, err := db.Pool().Exec(ctx, `INSERT INTO signin_counts (scope, key, bucket, n)
VALUES ('send_addr', '10.7.7.7', date_trunc('hour', now()) - interval '1 hour', 1000000)`); err != nil {
		t.Fatal(err)
	}
	err := db.StoreCode(ctx, core.CodeRequest{Phone: "+919600000001", Addr: "10.7.7.7", Hash: []byte("h")}, core.SignInLimits{SendsPerAddr: 5})
	e, _ := err.(*core.Error)
	if core.ErrorCode(err) != core.ERateLimited || e == nil {
		t.Fatalf("StoreCode = %v; want rate_limited", err)
	}
	if wait, _ := e.Detail["retry_after_seconds"].(int); wait < 1 || wait > 3600 {
		t.Errorf("retry after %v seconds; want 1 to 3600", e.Detail["retry_after_seconds"])
	}
	var codes, rows int
	if err := db.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM signin_codes), (SELECT count(*) FROM signin_counts)`).Scan(&codes, &rows); err != nil {
		t.Fatal(err)
	}
	if codes != 0 || rows != 1 {
		t.Fatalf("a refused send left %d codes and %d counters; want 0 and 1", codes, rows)
	}
	if err := db.StoreCode(ctx, core.CodeRequest{Phone: "+919600000001", Addr: "10.7.7.8", Hash: []byte("h")}, core.SignInLimits{SendsPerAddr: 5}); err != nil {
		t.Fatalf("another address: %v", err)
	}
}

// PurgeSignIn deletes codes and limit counters past retention only; last
// hour's counter still counts and stays.
func TestPurgeSignIn(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	for i, p := range []string{"+919700000001", "+919700000002"} {
		if err := db.StoreCode(ctx, core.CodeRequest{Phone: p, Addr: fmt.Sprint("a", i), Hash: []byte("h")}, core.SignInLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Pool().Exec(ctx, `UPDATE signin_codes SET expires_at = now() - interval '3 hours' WHERE phone = '+919700000001';
UPDATE signin_counts SET bucket = bucket - interval '3 hours' WHERE key = 'a0';
UPDATE signin_counts SET bucket = bucket - interval '1 hour' WHERE key = 'a1'`); err != nil {
		t.Fatal(err)
	}
	n, err := db.PurgeSignIn(ctx)
	if err != nil || n != 2 {
		t.Fatalf("PurgeSignIn = %d, %v; want 2 rows (one code, one counter)", n, err)
	}
	var codes, counters int
	db.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM signin_codes), (SELECT count(*) FROM signin_counts WHERE key = 'a1')`).Scan(&codes, &counters)
	if codes != 1 || counters != 1 {
		t.Fatalf("%d codes, %d of last hour's counters left; want 1 and 1", codes, counters)
	}
}

// A booking's attempt (its rank among its hold's bookings, FAILED ones
// included) is counted on every booking read: it must use an index on
// (hold_id, id), not scan the table (bookings_live_hold skips FAILED rows).
func TestBookingAttemptUsesIndex(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// An empty table is cheapest to scan: forbid that, so the plan shows
	// which index the count can use.
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	rows, err := tx.Query(ctx, `EXPLAIN SELECT (SELECT count(*) FROM bookings x WHERE x.hold_id = b.hold_id AND x.id <= b.id) FROM bookings b WHERE b.id = 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan.String(), "bookings_hold") {
		t.Fatalf("the attempt count does not use bookings_hold:\n%s", plan.String())
	}
}

// sendFrom stores a code for phone asked from addr, after moving the
// phone's last send past the resend wait.
func sendFrom(t *testing.T, db *postgres.DB, phone, addr, code string, l core.SignInLimits) error {
	t.Helper()
	if _, err := db.Pool().Exec(ctx, `UPDATE signin_codes SET created_at = created_at - interval '1 minute',
  sent_at = ARRAY(SELECT s - interval '1 minute' FROM unnest(sent_at) s) WHERE phone = $1`, phone); err != nil {
		t.Fatal(err)
	}
	return db.StoreCode(ctx, core.CodeRequest{Phone: phone, Addr: addr, Hash: core.CodeHash(codeKey, phone, code)}, l)
}

// One address cannot use up a number's sends: it gets SendsPerPhoneAddr
// codes an hour to one number, other addresses get the rest of the
// number's SendsPerPhone.
func TestSendLimitPerPhoneAddr(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	l := core.SignInLimits{SendsPerPhone: 5, SendsPerPhoneAddr: 2}
	phone := "+919400000001"
	steps := []struct {
		addr string
		want string // "" or the error code
	}{
		{"10.6.0.1", ""}, {"10.6.0.1", ""},
		{"10.6.0.1", core.ERateLimited}, // the attacker's share is used up
		{"10.6.0.2", ""},                // the owner still gets a code
		{"10.6.0.3", ""}, {"10.6.0.3", ""},
		{"10.6.0.4", core.ERateLimited}, // the number's total is used up
	}
	for i, s := range steps {
		err := sendFrom(t, db, phone, s.addr, "123456", l)
		if core.ErrorCode(err) != s.want && !(s.want == "" && err == nil) {
			t.Fatalf("send %d from %s = %v; want %q", i+1, s.addr, err, s.want)
		}
		if i == 2 && !strings.Contains(err.Error(), "from this address") {
			t.Errorf("refusal %q does not name the address", err)
		}
		if i == 6 && !strings.Contains(err.Error(), "sent to this number") {
			t.Errorf("refusal %q does not name the number", err)
		}
	}
	var sent, from int
	if err := db.Pool().QueryRow(ctx, `SELECT cardinality(sent_at), cardinality(sent_from) FROM signin_codes WHERE phone = $1`, phone).Scan(&sent, &from); err != nil {
		t.Fatal(err)
	}
	if sent != 5 || from != 5 {
		t.Fatalf("%d sends, %d addresses recorded; want 5 and 5", sent, from)
	}
}

// A send the phone refuses gives the address's count back: the address
// is counted first (its own statement), then the phone refuses, and the
// refused send must not use up one of the address's sends. Both ways a
// count comes back: a count of 1 (its row goes) and a larger one.
func TestSendRefusedByPhoneGivesAddrCountBack(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	l := core.SignInLimits{SendsPerAddr: 2}
	send := func(phone, addr string) error {
		return db.StoreCode(ctx, core.CodeRequest{Phone: phone, Addr: addr, Hash: core.CodeHash(codeKey, phone, "123456")}, l)
	}
	count := func(addr string) int {
		t.Helper()
		var n int
		if err := db.Pool().QueryRow(ctx, `SELECT coalesce(sum(n), 0) FROM signin_counts WHERE scope = $1 AND key = $2`, core.ScopeSendAddr, addr).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// +919500000001 has just had a code from elsewhere: a resend now is
	// refused (ResendAfter), from an address that had no count yet.
	if err := send("+919500000001", "10.7.0.9"); err != nil {
		t.Fatal(err)
	}
	if err := send("+919500000001", "10.7.0.1"); core.ErrorCode(err) != core.ERateLimited {
		t.Fatalf("resend at once = %v; want %s", err, core.ERateLimited)
	}
	if n := count("10.7.0.1"); n != 0 {
		t.Fatalf("after its only send was refused by the phone, 10.7.0.1 has %d counted; want 0", n)
	}
	// Now from a counted address: 1 send, a refused one, then a second
	// number still gets its code (2 of 2), and a third is refused by the
	// address.
	if err := send("+919500000002", "10.7.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := send("+919500000001", "10.7.0.1"); core.ErrorCode(err) != core.ERateLimited {
		t.Fatalf("resend at once = %v; want %s", err, core.ERateLimited)
	}
	if n := count("10.7.0.1"); n != 1 {
		t.Fatalf("10.7.0.1 has %d counted after 1 send and 1 refused; want 1", n)
	}
	if err := send("+919500000003", "10.7.0.1"); err != nil {
		t.Fatalf("the address's second send: %v (the refused one was not given back)", err)
	}
	if err := send("+919500000004", "10.7.0.1"); core.ErrorCode(err) != core.ERateLimited || !strings.Contains(err.Error(), "address") {
		t.Fatalf("the address's third send = %v; want refused for the address", err)
	}
}

// A targeted lockout fails: wrong guesses from one address kill the code
// for that address only; the owner signs in with it from another. Enough
// wrong guesses in all kill it outright.
func TestCodeWrongPerAddr(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	l := core.SignInLimits{}
	verify := func(phone, addr, code string) error {
		_, err := db.VerifyCode(ctx, phone, addr, core.CodeHash(codeKey, phone, code), l)
		return err
	}
	wrong := func(t *testing.T, phone, addr string, n int) {
		t.Helper()
		for i := range n {
			if err := verify(phone, addr, "000000"); core.ErrorCode(err) != core.ECodeInvalid {
				t.Fatalf("wrong guess %d from %s = %v", i+1, addr, err)
			}
		}
	}
	t.Run("one address's guesses", func(t *testing.T) {
		phone := "+919400000011"
		if err := sendFrom(t, db, phone, "10.6.1.1", "424242", l); err != nil {
			t.Fatal(err)
		}
		wrong(t, phone, "10.6.1.1", core.CodeWrongPerAddr)
		if err := verify(phone, "10.6.1.1", "424242"); core.ErrorCode(err) != core.ECodeInvalid {
			t.Fatalf("the right code from the guessing address = %v; want code_invalid", err)
		}
		if err := verify(phone, "10.6.1.2", "424242"); err != nil {
			t.Fatalf("the owner's right code from another address = %v; want a sign-in", err)
		}
	})
	t.Run("guesses in all", func(t *testing.T) {
		phone := "+919400000012"
		if err := sendFrom(t, db, phone, "10.6.2.9", "424242", l); err != nil {
			t.Fatal(err)
		}
		for i := range core.CodeAttempts / core.CodeWrongPerAddr {
			wrong(t, phone, fmt.Sprintf("10.6.2.%d", i), core.CodeWrongPerAddr)
		}
		if err := verify(phone, "10.6.2.99", "424242"); core.ErrorCode(err) != core.ECodeInvalid {
			t.Fatalf("the right code after %d wrong ones = %v; want code_invalid", core.CodeAttempts, err)
		}
		// A new code starts afresh.
		if err := sendFrom(t, db, phone, "10.6.2.99", "535353", l); err != nil {
			t.Fatal(err)
		}
		if err := verify(phone, "10.6.2.0", "535353"); err != nil {
			t.Fatalf("a new code = %v", err)
		}
	})
}

// A code whose SMS failed is dropped: dead, and its send no longer counts
// (a resend works at once, within the phone's limits); a later code, or
// the wrong hash, is left alone.
func TestDropCode(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	l := core.SignInLimits{SendsPerPhone: 2}
	phone := "+919400000021"
	hash := func(code string) []byte { return core.CodeHash(codeKey, phone, code) }
	if err := sendFrom(t, db, phone, "10.6.3.1", "111111", l); err != nil {
		t.Fatal(err)
	}
	if err := sendFrom(t, db, phone, "10.6.3.1", "222222", l); err != nil {
		t.Fatal(err)
	}
	if err := db.DropCode(ctx, phone, hash("999999")); err != nil {
		t.Fatal(err)
	}
	if err := db.DropCode(ctx, phone, hash("222222")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.VerifyCode(ctx, phone, "10.6.3.1", hash("222222"), l); core.ErrorCode(err) != core.ECodeInvalid {
		t.Fatalf("a dropped code = %v; want code_invalid", err)
	}
	// At once (no resend wait), and the dropped send left the phone's count.
	if err := db.StoreCode(ctx, core.CodeRequest{Phone: phone, Addr: "10.6.3.1", Hash: hash("333333")}, l); err != nil {
		t.Fatalf("a resend after a drop = %v", err)
	}
	if err := db.DropCode(ctx, phone, hash("222222")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.VerifyCode(ctx, phone, "10.6.3.1", hash("333333"), l); err != nil {
		t.Fatalf("a drop of an older code killed the live one: %v", err)
	}
	var sent int
	if err := db.Pool().QueryRow(ctx, `SELECT cardinality(sent_at) FROM signin_codes WHERE phone = $1`, phone).Scan(&sent); err != nil {
		t.Fatal(err)
	}
	if sent != 2 {
		t.Fatalf("%d sends recorded; want 2 (the dropped one undone)", sent)
	}
}
