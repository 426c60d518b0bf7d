package check

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/onsale/onsale/shared/redisconn"
	"github.com/onsale/onsale/shared/servicetest"
)

// Each account's places in line: one each passes; a second place for one
// person (two accounts of one phone, or one account under two spellings)
// fails; a guest's place fails where the event requires an account.
func TestOnePlacePerAccount(t *testing.T) {
	phones := map[string]string{"acct:1": "+919800000001", "acct:2": "+919800000002", "acct:3": "+919800000001"}
	tests := []struct {
		name     string
		line     Line
		required bool
		pass     bool
	}{
		{"one place each", Line{IDs: map[string]string{"acct:1": "5", "acct:2": "done"}}, true, true},
		{"in the draw and the hash (one place)", Line{IDs: map[string]string{"acct:1": "pre"}, Pre: []string{"acct:1", "acct:2"}}, true, true},
		{"two accounts of one phone", Line{IDs: map[string]string{"acct:1": "5", "acct:3": "9"}}, true, false},
		{"one in the hash, the other in the draw", Line{IDs: map[string]string{"acct:1": "5"}, Pre: []string{"acct:3"}}, true, false},
		{"one account spelled twice", Line{IDs: map[string]string{"acct:7": "5", "acct:007": "6"}}, true, false},
		{"a guest where accounts are required", Line{IDs: map[string]string{"acct:1": "5", "vis:abc": "6"}}, true, false},
		{"guests where they may join", Line{IDs: map[string]string{"acct:1": "5", "vis:abc": "6", "vis:def": "7"}}, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if r := onePlacePerAccount(tc.line, phones, tc.required); r.Pass != tc.pass {
				t.Errorf("onePlacePerAccount(%+v, required %v) = %+v; want pass %v", tc.line, tc.required, r, tc.pass)
			}
		})
	}
}

// Bought at the limit passes; one ticket over fails.
func TestWithinLimit(t *testing.T) {
	ok := []Bought{{"acct:1", 6, 6}, {"acct:2", 1, 6}}
	if r := withinLimit(ok); !r.Pass {
		t.Errorf("withinLimit(%v) = %+v; want a pass", ok, r)
	}
	over := append(ok, Bought{"acct:3", 7, 6})
	if r := withinLimit(over); r.Pass || !strings.Contains(r.Detail, "acct:3 bought 7 of 6") {
		t.Errorf("withinLimit(%v) = %+v; want a failure naming acct:3", over, r)
	}
}

// ReadLine reads the line where the gateway keeps it (gateway/redis:
// {evt:<id>}:ids and {evt:<id>}:pre).
func TestReadLine(t *testing.T) {
	addr := servicetest.Env(t, "REDIS_URL")
	ctx := context.Background()
	rdb, err := redisconn.Open(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ev := 1_000_000_000 + rand.Int64N(1<<40)
	p := fmt.Sprintf("{evt:%d}:", ev)
	t.Cleanup(func() { rdb.Del(ctx, p+"ids", p+"pre") })
	rdb.HSet(ctx, p+"ids", "acct:1", "pre", "acct:2", "7", "acct:3", "done")
	rdb.ZAdd(ctx, p+"pre", goredis.Z{Score: 0.5, Member: "acct:1"}, goredis.Z{Score: 0.25, Member: "acct:9"})
	l, err := ReadLine(ctx, addr, ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.IDs) != 3 || l.IDs["acct:2"] != "7" || strings.Join(l.Pre, ",") != "acct:9,acct:1" {
		t.Errorf("ReadLine = %+v; want the three identities and the draw in place order", l)
	}
	if r := onePlacePerAccount(l, nil, true); !r.Pass || !strings.Contains(r.Detail, "4 places") {
		t.Errorf("onePlacePerAccount(%+v) = %+v; want 4 places, a pass", l, r)
	}
}

// The accounts' invariants in the core's database (its migrations, in a
// database of the test's own): good rows pass; each bad row fails its
// invariant.
func TestAccountResults(t *testing.T) {
	ctx := context.Background()
	conn := coreDB(t)
	const setup = `
INSERT INTO venues (id, name, city) VALUES (1, 'Stadium', 'Mumbai');
INSERT INTO events (id, venue_id, name, kind, starts_at, onsale_at, seated, capacity, max_per_account)
VALUES (1, 1, 'Concert', 'concert', now() + interval '1 day', now(), true, 100, 4);
INSERT INTO accounts (id, phone) VALUES (1, '+919800000001'), (2, '+919800000002');
INSERT INTO holds (id, event_id, account, quantity, claimed, status, expires_at)
VALUES ('00000000-0000-0000-0000-000000000001', 1, 'acct:1', 4, 4, 'BOOKED', now()),
       ('00000000-0000-0000-0000-000000000002', 1, 'acct:2', 2, 2, 'ACTIVE', now());
INSERT INTO bookings (hold_id, event_id, account, seat_ids, quantity, amount_paise, flow, status)
VALUES ('00000000-0000-0000-0000-000000000001', 1, 'acct:1', '{a,b,c,d}', 4, 400, 'sync', 'CONFIRMED');`
	if _, err := conn.Exec(ctx, setup); err != nil {
		t.Fatal(err)
	}
	in := Input{Event: 1, AccountsRequired: true}
	verdicts := func() map[string]Result {
		out := map[string]Result{}
		for _, r := range accountResults(ctx, conn, in) {
			out[r.Name] = r
		}
		return out
	}
	for name, r := range verdicts() {
		if !r.Pass {
			t.Fatalf("good rows: %s: %s", name, r.Detail)
		}
	}
	if len(verdicts()) != 3 {
		t.Fatalf("accountResults = %v; want three invariants", verdicts())
	}
	bad := []struct {
		name, sql, fails string
	}{
		{"a guest's hold", `INSERT INTO holds (id, event_id, account, quantity, claimed, expires_at)
VALUES ('00000000-0000-0000-0000-000000000003', 1, 'vis:abc', 1, 1, now())`, "every hold and booking belongs to an account"},
		{"one account over the limit in two bookings", `INSERT INTO bookings (hold_id, event_id, account, seat_ids, quantity, amount_paise, flow, status)
VALUES ('00000000-0000-0000-0000-000000000004', 1, 'acct:1', '{e}', 1, 100, 'sync', 'CONFIRMED')`, "no account bought more than its limit"},
		{"an account without a row (no verified phone)", `INSERT INTO holds (id, event_id, account, quantity, claimed, expires_at)
VALUES ('00000000-0000-0000-0000-000000000005', 1, 'acct:99', 1, 1, now())`, "every account that holds seats has a verified phone"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, tc.sql); err != nil {
				t.Fatal(err)
			}
			var failed []string
			for _, r := range accountResults(ctx, tx.Conn(), in) {
				if !r.Pass {
					failed = append(failed, r.Name)
				}
			}
			if len(failed) != 1 || !strings.HasPrefix(failed[0], tc.fails) {
				t.Errorf("after %s the failures are %q; want only %q", tc.name, failed, tc.fails)
			}
		})
	}
}

// coreDB is a connection to a database of the test's own with the core's
// migrations applied (their goose Up sections, in order), dropped at
// cleanup.
func coreDB(tb testing.TB) *pgx.Conn {
	tb.Helper()
	conn, _ := coreDatabase(tb)
	return conn
}

// coreDatabase is coreDB and its URL.
func coreDatabase(tb testing.TB) (*pgx.Conn, string) {
	tb.Helper()
	ctx := context.Background()
	adminURL := servicetest.Env(tb, "DATABASE_URL")
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		servicetest.Missing(tb, "PostgreSQL: "+err.Error())
	}
	name := fmt.Sprintf("onsale_check_test_%d", rand.Int64N(1<<40))
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatal(err)
	}
	cfg := admin.Config().Copy()
	cfg.Database = name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		conn.Close(ctx)
		admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
		admin.Close(ctx)
	})
	files, _ := filepath.Glob("../../core/postgres/migration/*.sql")
	sort.Strings(files)
	if len(files) == 0 {
		tb.Fatal("no migrations in ../../core/postgres/migration")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		up, _, _ := strings.Cut(string(b), "-- +goose Down")
		if _, err := conn.Exec(ctx, up); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		tb.Fatal(err)
	}
	u.Path = "/" + name
	return conn, u.String()
}
