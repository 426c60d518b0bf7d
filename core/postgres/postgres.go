// Package postgres implements the core's catalog and hold path on
// PostgreSQL with pgx. Every seat change is one conditional statement; the
// database, never a cache, decides who owns a seat.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/onsale/onsale/core"
)

//go:embed migration/*.sql
var migrations embed.FS

// Options tune the connection pool.
type Options struct {
	MaxConns int32 // 0: pgx's default
	// ReadMaxConns sizes a pool of its own for the public catalog reads
	// (see DB.reads); 0: those reads share the main pool.
	ReadMaxConns   int32
	ConnectTimeout time.Duration // 0: 2 s
	Logger         *slog.Logger
	// LatePolicy decides what a payment for an expired hold gets (default refund).
	LatePolicy core.LatePolicy
	// OnSeats, when set, hears after each commit which seats became
	// unavailable (held) or available again (released, settled, undone), to
	// keep the seat-map cache current (a lapsed hold's seats show free at
	// the keeper's next rebuild). It must not block.
	OnSeats func(event int64, seats []string, available bool)
	// Taken, when set, refuses holds of seats known taken without a
	// statement, and hears of this core's holds and releases (refuse.go).
	Taken TakenSeats
	// ExtendBy is what the one extension of a hold adds (0: core.ExtendBy).
	ExtendBy time.Duration
	// IdleInTxTimeout and LockTimeout are set on every connection as
	// PostgreSQL's idle_in_transaction_session_timeout and lock_timeout
	// (0: the server's setting; a value in the database URL wins). See
	// DefaultIdleInTxTimeout for why the core sets them.
	IdleInTxTimeout, LockTimeout time.Duration
}

// DefaultIdleInTxTimeout and DefaultLockTimeout (Options.IdleInTxTimeout
// and LockTimeout, set by cmd/core) are the rule that keeps a stalled core
// from holding seats or acting late: a core frozen by a GC pause, SIGSTOP,
// a starved CPU or a network partition, then let go.
//
// Every change to a seat, hold, booking or job is a conditional statement
// judged by the database, on the rows as they are when it runs and by the
// database's clock (seatFree in hold.go, bookSQL, endHoldSQL, extendSQL,
// sweepSQL, the outbox's lease). A core owns nothing between statements:
// no hold, seat or job is "this core's" in memory. So a thawed core's next
// statement is judged afresh: a hold that ran out meanwhile owns nothing
// (lazy expiry), seats another hold took are not its seats, and a booking
// settled by another core's webhook is settled. What is left is a
// transaction open at the moment of the freeze:
//
//   - It holds row locks (the booking, the hold, its seats) that make every
//     other fan's statement on them wait, and its now() is its start, so
//     were it let commit after the freeze it would book a hold whose time
//     ran out during the freeze, with the seats kept from everyone else
//     meanwhile. idle_in_transaction_session_timeout (IdleInTxTimeout, 5 s
//     by default) makes the server end such a session: the transaction
//     rolls back, its locks go, and the thawed core's next statement or
//     COMMIT fails (503 to its client, who retries and is judged afresh).
//     The core's transactions never wait on anything outside the
//     database (no provider or HTTP call inside one), so a transaction idle
//     for seconds is a stalled core, never work in progress.
//   - A statement of another core that waits behind those locks gives up
//     after lock_timeout (LockTimeout, 2 s by default) with 55P03, answered
//     503 unavailable with Retry-After, instead of holding a connection of
//     its pool until the request's deadline.
//   - A COMMIT that had reached the server before the freeze completes
//     without the client: the decision was taken under the locks, in time.
//
// statement_timeout is not set: a running statement does not wait on its
// client, and each request's context deadline already ends the request's
// wait for it. pgx v5 (its default DeadlineContextWatcherHandler) does
// that by closing the connection, without a cancel request: the server
// finishes the statement it is running and ends the session when it next
// talks to the closed socket (an open transaction rolls back). That is
// kept on purpose. A cancel request reaching a COMMIT that waits for the
// synchronous standby ends the wait and leaves the commit local and
// unreplicated ("canceling wait for synchronous replication"), which a
// failover would then lose; a closed socket does not interrupt the wait,
// so the commit is replicated before the server acts on it. Either way
// the client saw an error and told no fan it was booked.
//
// The outbox: a job whose lease ran out while its worker was frozen may be
// claimed by another worker. Both call the provider under the job's
// idempotency key (one refund, one capture, however many calls); finishing
// is guarded by the job's status (a second finish changes nothing), and a
// failure is recorded only by the lease's holder (failJobSQL's attempts
// guard), so a thawed worker cannot reschedule a job another worker holds.
// A webhook being applied is one Settle transaction: the case above.
const (
	DefaultIdleInTxTimeout = 5 * time.Second
	DefaultLockTimeout     = 2 * time.Second
)

// DB is the core's PostgreSQL store.
type DB struct {
	// pool serves holds, payments, the outbox, accounts and every write:
	// the work a sale is made of.
	pool *pgxpool.Pool
	// reads serves the public catalog reads a crowd of browsers sends
	// (Events, Event, Layout, FreePositions, SeatPositions, Counts,
	// LiveSeatedEvents), in a pool of its own (Options.ReadMaxConns) so
	// that however many of them are in flight (a flood of catalog
	// requests, each waiting up to its request's deadline for a slow
	// database) they hold at most ReadMaxConns connections and never the
	// ones a hold or a payment is waiting for. A read that finds its pool
	// busy waits in that pool's queue until its own deadline; a hold never
	// queues behind it. It is pool itself when ReadMaxConns is 0 (tools and
	// tests that need no such split).
	reads   *pgxpool.Pool
	log     *slog.Logger
	policy  core.LatePolicy
	onSeats func(event int64, seats []string, available bool)
	taken   TakenSeats
	extend  time.Duration
	// settleLock is settleLockSQL, run before every settle of an account
	// (settleQuota); a race test's control runs settles without it.
	settleLock string

	mu     sync.Mutex
	events map[int64]eventInfo // hold-path facts about events, cached briefly
	free   freeLists           // free seats per band, for best-available
}

// ErrConfig marks an Open error that no retry can fix: the URL or an
// option is wrong. Any other error (no server, no primary yet, a lock
// wait) may pass.
var ErrConfig = errors.New("bad configuration")

// IsConfigError reports whether err is an ErrConfig.
func IsConfigError(err error) bool { return errors.Is(err, ErrConfig) }

// Open connects to url and applies pending migrations (several cores may
// start at once: a session lock serializes them).
func Open(ctx context.Context, url string, o Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: parse database url: %w", ErrConfig, err)
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	// The hold statements are planned once per connection: re-planning
	// them per execution (PostgreSQL's default for the first executions,
	// and for as long as a custom plan looks cheaper) costs more than
	// running them. Their generic plans use the primary key like the
	// custom ones do.
	if _, ok := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !ok {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	// Every statement of the core is written for READ COMMITTED: a
	// snapshot per statement, and a row another transaction changed
	// re-checked as its newest version (the conditional UPDATEs), never a
	// serialization failure. Whatever the server, role or URL default.
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "read committed"
	for name, d := range map[string]time.Duration{
		"idle_in_transaction_session_timeout": o.IdleInTxTimeout, "lock_timeout": o.LockTimeout} {
		if _, ok := cfg.ConnConfig.RuntimeParams[name]; !ok && d > 0 {
			cfg.ConnConfig.RuntimeParams[name] = strconv.FormatInt(d.Milliseconds(), 10)
		}
	}
	cfg.ConnConfig.ConnectTimeout = o.ConnectTimeout
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	}
	// A failover (see unavailable): a connection to a server that
	// went away is closed by pgx at its first error and never returns to
	// the pool, and one idle for over a second is pinged before it is
	// handed out (pgxpool's default), so dead connections cost one failed
	// request each at most and the pool refills from whichever member
	// accepts writes now (a multi-host URL with target_session_attrs=
	// read-write). A connection still open to a server that has become a
	// standby (it reports in_hot_standby on) is dropped when it is given
	// back, rather than answering read-only errors until it is recycled.
	cfg.AfterRelease = func(c *pgx.Conn) bool {
		return c.PgConn().ParameterStatus("in_hot_standby") != "on"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	reads := pool
	if o.ReadMaxConns > 0 {
		rcfg := cfg.Copy()
		rcfg.MaxConns = o.ReadMaxConns
		rcfg.MinConns = 0
		if reads, err = pgxpool.NewWithConfig(ctx, rcfg); err != nil {
			pool.Close()
			return nil, fmt.Errorf("open read pool: %w", err)
		}
	}
	closePools := func() {
		if reads != pool {
			reads.Close()
		}
		pool.Close()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LatePolicy == "" {
		o.LatePolicy = core.PolicyRefund
	}
	if o.LatePolicy != core.PolicyRefund && o.LatePolicy != core.PolicyHonour {
		closePools()
		return nil, fmt.Errorf("%w: late payment policy %q: want refund or honour", ErrConfig, o.LatePolicy)
	}
	db := &DB{pool: pool, reads: reads, log: o.Logger, policy: o.LatePolicy, onSeats: o.OnSeats, taken: o.Taken, extend: o.ExtendBy, settleLock: settleLockSQL, events: make(map[int64]eventInfo)}
	if db.extend <= 0 {
		db.extend = core.ExtendBy
	}
	if err := db.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func (db *DB) migrate(ctx context.Context) error {
	fsys, err := fs.Sub(migrations, "migration")
	if err != nil {
		return err
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return err
	}
	sqlDB := stdlib.OpenDBFromPool(db.pool)
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, fsys, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, r := range res {
		db.log.Info("migration applied", "version", r.Source.Version, "path", r.Source.Path, "took", r.Duration)
	}
	return nil
}

func (db *DB) seatsChanged(event int64, seats []string, available bool) {
	if available {
		db.seatsFreed(event, seats) // refuse.go
	}
	if db.onSeats != nil && len(seats) > 0 {
		db.onSeats(event, seats, available)
	}
}

// Close closes the pools.
func (db *DB) Close() {
	if db.reads != db.pool {
		db.reads.Close()
	}
	db.pool.Close()
}

// Ping reports whether the database answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.pool.Ping(ctx); err != nil {
		return translate(err)
	}
	return nil
}

// Pool exposes the pool to tests and tools in this module's tree.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// ReadPool exposes the catalog reads' pool (Pool itself without
// Options.ReadMaxConns) to tests.
func (db *DB) ReadPool() *pgxpool.Pool { return db.reads }

// unavailable reports whether a SQLSTATE means the database cannot serve
// now but may in a moment. It is the rule for a database that goes away
// under the core: a PostgreSQL primary killed, Patroni promoting its
// synchronous standby about a TTL (10 s) later. Until then every statement
// fails, and the core answers 503 unavailable with Retry-After, never 500,
// and keeps no broken connection (Open). The errors of that window are: no
// connection at all (pgconn's connect errors, an I/O error or EOF
// mid-statement, a timeout), and those the server sends: class 08
// (connection exception), 57P01 admin_shutdown (Patroni's fast stop),
// 57P02 crash_shutdown, 57P03 cannot_connect_now (starting, or in
// recovery), 25006 read_only_sql_transaction (a connection that reached a
// standby), 53xxx (insufficient resources, e.g. 53300 too many connections
// while clients reconnect at once), 58xxx (I/O errors), 57014 (a statement
// cancelled at its deadline) and 40003 (statement completion unknown); and
// from a stalled core's transaction (DefaultIdleInTxTimeout): 25P03 (the
// server ended it) and 55P03 (a lock wait behind it ran out).
//
// A COMMIT whose answer never arrives (the connection died during it) has
// an unknown outcome: it may have committed on the old primary and, with
// synchronous_mode, on the standby that is promoted, or not at all. Every
// payment step is safe to run again, so the client's retry settles it:
// Confirm and Pay keep their Idempotency-Key (released on a 503, so the
// retry runs anew; if the release fails too, the key's lease runs out in
// 8 s), StartPayment returns the booking a first try made, the provider's
// payment is keyed by the booking (charge:<hold>), Settle locks the
// booking and applies an outcome once (payment_events, and core.Transition
// refusing a repeated step), and outbox jobs carry the provider's
// idempotency keys. A hold is one autocommit statement with no key: a hold
// whose COMMIT was lost on the way back may exist without its fan knowing
// its id. The fan's retry of the same seats is then told seats_taken (by
// that hold), and the seats come back when it expires (the event's hold
// time, 8 minutes by default); until then its tickets count against the
// fan's limit. No seat is sold twice; at most a fan's seats are out of
// sale for one hold time (the proof test counts these as orphaned holds).
func unavailable(code string) bool {
	switch code {
	case "25006", "25P03", "55P03", "57014", "57P01", "57P02", "57P03", "40003":
		return true
	}
	switch code[:min(2, len(code))] {
	case "08", "53", "58":
		return true
	}
	return false
}

// translate turns driver errors into domain errors. A server-reported error
// without a domain meaning stays an internal error; anything else (no
// connection, timeout, closed pool) means the database is out of reach and
// the caller must fail closed (unavailable lists the server's codes of the
// same meaning).
func translate(err error) error {
	if err == nil {
		return nil
	}
	var ce *core.Error
	if errors.As(err, &ce) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "40P01" || pe.Code == "40001":
			// Deadlock or serialization failure: another buyer got there
			// first. The caller sees a taken seat and picks again.
			return &core.Error{Code: core.ESeatsTaken, Message: "seats were taken by a concurrent buyer"}
		case unavailable(pe.Code):
			return &core.Error{Code: core.EUnavailable, Message: "database unavailable"}
		case pe.Code == "22021" || pe.Code == "22P05":
			// A client's text PostgreSQL cannot store (a NUL, bytes that are
			// not UTF-8): no such seat, key or payment can exist (found by
			// the fuzz targets of core/http).
			return core.Errorf(core.EInvalid, "a value holds a character that cannot be stored (NUL or not UTF-8)")
		}
		return fmt.Errorf("database: %w", err)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Errorf(core.ENotFound, "not found")
	}
	return &core.Error{Code: core.EUnavailable, Message: "database unavailable: " + err.Error()}
}

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func constraint(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.ConstraintName
	}
	return ""
}

// retryPolicy says which aborted work runs again, how often and with what
// pause. A deadlock (40P01) or a serialization failure (40001) means
// PostgreSQL aborted the work to let a concurrent transaction through, and
// running it again usually succeeds; past the last attempt the caller sees
// the error (translate makes it ESeatsTaken: another buyer got there first).
type retryPolicy struct {
	attempts   int           // tries in all, the first included
	codes      []string      // SQLSTATEs that run again
	backoff    time.Duration // first pause; 0 retries at once
	maxBackoff time.Duration // the pause doubles up to this
}

// txRetry is inTx's policy: a few attempts on either code, with a jittered
// back-off doubling from 5 ms up to 100 ms, so two victims of one deadlock
// do not meet again in lockstep. A multi-statement transaction is worth
// the wait; it is never on the hold path.
var txRetry = retryPolicy{
	attempts:   4,
	codes:      []string{"40P01", "40001"},
	backoff:    5 * time.Millisecond,
	maxBackoff: 100 * time.Millisecond,
}

// holdRetry is the hold statement's policy: one immediate retry on a
// deadlock, nothing else. The hold is the hottest path; PostgreSQL does not
// promise the order in which one UPDATE locks its rows, so two groups may
// deadlock, and the loser asks once more to get the true answer instead of
// a spurious refusal. It never sleeps (the fan is waiting and the other
// party has already committed or is about to), and it does not retry
// 40001, which a READ COMMITTED autocommit statement does not raise.
var holdRetry = retryPolicy{attempts: 2, codes: []string{"40P01"}}

// retryable reports whether err aborted work that p runs again.
func (p retryPolicy) retryable(err error) bool {
	return slices.Contains(p.codes, sqlState(err))
}

// pause is the sleep after the given failed attempt (1-based): jittered in
// [d/2, d] for d = backoff doubled per attempt up to maxBackoff; zero when
// the policy retries at once.
func (p retryPolicy) pause(attempt int) time.Duration {
	if p.backoff <= 0 {
		return 0
	}
	d := min(p.backoff<<(attempt-1), p.maxBackoff)
	return d/2 + rand.N(d/2+1)
}

// retry runs op under policy p until it returns an error p does not retry
// (or nil), p.attempts times at most, pausing between tries. It gives up
// early, returning op's last error, when ctx ends. op must be safe to run
// again: a whole transaction, or one autocommit statement. logArgs are
// added to the warning logged before each retry.
func (db *DB) retry(ctx context.Context, p retryPolicy, what string, op func() error, logArgs ...any) error {
	for attempt := 1; ; attempt++ {
		err := op()
		if !p.retryable(err) || attempt >= p.attempts {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		d := p.pause(attempt)
		db.log.Warn(what+" aborted by the server, retrying",
			append(logArgs, "sqlstate", sqlState(err), "attempt", attempt, "backoff", d)...)
		if d == 0 {
			continue
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// inTx runs fn in one READ COMMITTED transaction, committed when fn returns
// nil, rolled back otherwise; it is the one helper for every
// multi-statement transaction (pkgsite's DB.Transact shape, on
// pgx.BeginTxFunc). A deadlock or serialization failure anywhere in fn
// rolls the whole transaction back and runs fn again (txRetry), so fn
// must start from scratch: it may not keep results of an earlier try in
// variables it does not reset. fn returns driver errors unchanged (wrapping
// is fine); callers translate the result once.
//
// The hold path never uses it: a hold is one autocommit statement, and
// wrapping it in a transaction would only hold its locks longer.
func (db *DB) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return db.retry(ctx, txRetry, "transaction", func() error {
		return pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{}, fn)
	})
}
