package postgres

import (
	"context"
	"errors"
	"io/fs"
	"strings"

	"github.com/onsale/onsale/core"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

// SweepIgnoringOpenTransactions is Sweep as it would be without
// sweepBoundSQL: it lets the mark move up to now, past the start of
// transactions still open (the control of TestSweepMark).
func (db *DB) SweepIgnoringOpenTransactions(ctx context.Context) (core.SweepResult, error) {
	return db.sweepWith(ctx, sweepFastSQL, sweepSQL, sweepBatch, `SELECT now()`)
}

// SweepOneBatch runs one sweep statement of at most batch holds, as Sweep
// runs each of its batches; withoutFullBatchBound drops the rule that a
// full batch moves the mark no further than its last expiry (the control
// of TestSweepMark's backlog case: the mark jumps past the holds after
// the batch).
func (db *DB) SweepOneBatch(ctx context.Context, batch int, withoutFullBatchBound bool) (core.SweepResult, error) {
	if !withoutFullBatchBound {
		return db.sweep(ctx, batch)
	}
	if !strings.Contains(sweepSQL, fullBatchBoundSQL) {
		return core.SweepResult{}, errors.New("sweepSQL has no full batch bound to drop")
	}
	return db.sweepWith(ctx, sweepStatement(false, "NULL"), sweepStatement(true, "NULL"), batch, sweepBoundSQL)
}

// SettleQuota runs the settle a hold refused over its limit runs
// (settleQuotaSQL), for the race tests: it returns the tickets given back and
// the account's counter after it.
func (db *DB) SettleQuota(ctx context.Context, event int64, account string) (returned, have int, err error) {
	return db.settleQuota(ctx, event, account)
}

// SettleWithoutLock makes every settle of an account run settleQuotaSQL
// alone, without settleLockSQL before it: it skips the hold rows others
// hold at that instant (the control of TestRaceLazyLimit's shortfall).
func (db *DB) SettleWithoutLock() { db.settleLock = "" }

// MigrateDownTo undoes every migration after version (their Down
// sections), for the migration tests; Migrate applies them again.
func (db *DB) MigrateDownTo(ctx context.Context, version int64) error {
	fsys, err := fs.Sub(migrations, "migration")
	if err != nil {
		return err
	}
	sqlDB := stdlib.OpenDBFromPool(db.pool)
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, fsys)
	if err != nil {
		return err
	}
	_, err = p.DownTo(ctx, version)
	return err
}

// Migrate applies the pending migrations, as Open does.
func (db *DB) Migrate(ctx context.Context) error { return db.migrate(ctx) }
