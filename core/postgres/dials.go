package postgres

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/onsale/onsale/core"
)

var _ core.EventDials = (*DB)(nil)

// selectDials reads an event's stored dials; the outer join tells an event
// without stored dials ({}) from no event (no row).
const selectDials = `
SELECT COALESCE(d.dials, '{}'::jsonb)
FROM events e LEFT JOIN event_dials d ON d.event_id = e.id
WHERE e.id = $1`

// mergeDials stores a change of an event's dials: the dials it names
// replace the stored ones (jsonb ||), the others stay, in one statement, so
// two operators changing different dials at once keep both changes. The
// foreign key refuses an unknown event.
const mergeDials = `
INSERT INTO event_dials (event_id, dials) VALUES ($1, $2)
ON CONFLICT (event_id) DO UPDATE
SET dials = event_dials.dials || EXCLUDED.dials, version = event_dials.version + 1, updated_at = now()
RETURNING dials`

// Dials implements core.EventDials.
func (db *DB) Dials(ctx context.Context, event int64) (json.RawMessage, error) {
	var d json.RawMessage
	err := db.pool.QueryRow(ctx, selectDials, event).Scan(&d)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, core.Errorf(core.ENotFound, "no event %d", event)
	}
	return d, translate(err)
}

// PatchDials implements core.EventDials. The merge stays one statement
// (two operators changing different dials at once keep both); the dials
// before it, for the audit, are what the merge replaced, read under the
// row lock the merge then takes.
func (db *DB) PatchDials(ctx context.Context, event int64, patch json.RawMessage, by core.Actor) (json.RawMessage, error) {
	var d json.RawMessage
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var before json.RawMessage
		err := tx.QueryRow(ctx, `SELECT dials FROM event_dials WHERE event_id = $1 FOR UPDATE`, event).Scan(&before)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err := tx.QueryRow(ctx, mergeDials, event, patch).Scan(&d); err != nil {
			return err
		}
		return audit(ctx, tx, by, "dials.update", showSubject(event), before, d)
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23503" { // foreign key: no such event
		return nil, core.Errorf(core.ENotFound, "no event %d", event)
	}
	return d, translate(err)
}
