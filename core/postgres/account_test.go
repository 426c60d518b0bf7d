package postgres_test

import (
	"bytes"
	"fmt"
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

// N concurrent verifies of one right code, from N addresses (an address's
// verifies queue behind its limit's lock, so one address could never race
// itself): exactly one signs in, every time.
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

// The limits are exact under concurrency: N sends from one address at once
// with room for K get exactly K through.
func TestRaceSendLimit(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	const fans, room = 16, 5
	var sent, limited atomic.Int32
	together(fans, func(i int) {
		phone := fmt.Sprintf("+9197%08d", i)
		err := db.StoreCode(ctx, core.CodeRequest{Phone: phone, Addr: "10.9.9.9", Hash: core.CodeHash(codeKey, phone, "111111")},
			core.SignInLimits{SendsPerAddr: room})
		switch core.ErrorCode(err) {
		case core.ERateLimited:
			limited.Add(1)
		default:
			if err != nil {
				t.Error(err)
			} else {
				sent.Add(1)
			}
		}
	})
	if sent.Load() != room || limited.Load() != fans-room {
		t.Fatalf("%d sent, %d limited; want %d and %d", sent.Load(), limited.Load(), room, fans-room)
	}
}

// PurgeSignIn deletes codes and limit records past retention only.
func TestPurgeSignIn(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	for _, p := range []string{"+919700000001", "+919700000002"} {
		if err := db.StoreCode(ctx, core.CodeRequest{Phone: p, Addr: "a", Hash: []byte("h")}, core.SignInLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Pool().Exec(ctx, `UPDATE signin_codes SET expires_at = now() - interval '3 hours' WHERE phone = '+919700000001';
UPDATE signin_log SET at = now() - interval '3 hours' WHERE key IN ('+919700000001')`); err != nil {
		t.Fatal(err)
	}
	n, err := db.PurgeSignIn(ctx)
	if err != nil || n != 2 {
		t.Fatalf("PurgeSignIn = %d, %v; want 2 rows (one code, one log row)", n, err)
	}
	var codes int
	db.Pool().QueryRow(ctx, `SELECT count(*) FROM signin_codes`).Scan(&codes)
	if codes != 1 {
		t.Fatalf("%d codes left; want 1", codes)
	}
}
