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
	MaxConns       int32         // 0: pgx's default
	ConnectTimeout time.Duration // 0: 2 s
	Logger         *slog.Logger
	// LatePolicy decides what a payment for an expired hold gets (default refund).
	LatePolicy core.LatePolicy
	// OnSeats, when set, hears after each commit which seats became
	// unavailable (held) or available again (released, swept, undone), to
	// keep the seat-map cache current. It must not block.
	OnSeats func(event int64, seats []string, available bool)
	// ExtendBy is what the one extension of a hold adds (0: core.ExtendBy).
	ExtendBy time.Duration
}

// DB is the core's PostgreSQL store.
type DB struct {
	pool    *pgxpool.Pool
	log     *slog.Logger
	policy  core.LatePolicy
	onSeats func(event int64, seats []string, available bool)
	extend  time.Duration

	mu     sync.Mutex
	events map[int64]eventInfo // hold-path facts about events, cached briefly
	free   freeLists           // free seats per band, for best-available
}

// Open connects to url and applies pending migrations (several cores may
// start at once: a session lock serializes them).
func Open(ctx context.Context, url string, o Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
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
	cfg.ConnConfig.ConnectTimeout = o.ConnectTimeout
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LatePolicy == "" {
		o.LatePolicy = core.PolicyRefund
	}
	if o.LatePolicy != core.PolicyRefund && o.LatePolicy != core.PolicyHonour {
		pool.Close()
		return nil, fmt.Errorf("late payment policy %q: want refund or honour", o.LatePolicy)
	}
	db := &DB{pool: pool, log: o.Logger, policy: o.LatePolicy, onSeats: o.OnSeats, extend: o.ExtendBy, events: make(map[int64]eventInfo)}
	if db.extend <= 0 {
		db.extend = core.ExtendBy
	}
	if err := db.migrate(ctx); err != nil {
		pool.Close()
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
	if db.onSeats != nil && len(seats) > 0 {
		db.onSeats(event, seats, available)
	}
}

// Close closes the pool.
func (db *DB) Close() { db.pool.Close() }

// Ping reports whether the database answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.pool.Ping(ctx); err != nil {
		return translate(err)
	}
	return nil
}

// Pool exposes the pool to tests and tools in this module's tree.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// translate turns driver errors into domain errors. A server-reported error
// without a domain meaning stays an internal error; anything else (no
// connection, timeout, closed pool) means the database is out of reach and
// the caller must fail closed.
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
		case pe.Code == "40P01" || pe.Code == "40001" || pe.Code == "55P03":
			// Deadlock, serialization failure or lock not available: another
			// buyer got there first. The caller sees a taken seat and picks again.
			return &core.Error{Code: core.ESeatsTaken, Message: "seats were taken by a concurrent buyer"}
		case pe.Code == "57014" || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || pe.Code == "53300":
			return &core.Error{Code: core.EUnavailable, Message: "database unavailable"}
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
