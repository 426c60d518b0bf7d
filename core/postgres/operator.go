package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/onsale/onsale/core"
)

// Operator accounts and the audit log (core/operator.go has the rules).

const operatorColumns = `id, name, display_name, role, created_at, disabled_at IS NOT NULL, sessions_after`

func scanOperator(row pgx.Row, extra ...any) (*core.Operator, error) {
	var o core.Operator
	var after pgtype.Timestamptz
	err := row.Scan(append([]any{&o.ID, &o.Name, &o.DisplayName, &o.Role, &o.CreatedAt, &o.Disabled, &after}, extra...)...)
	if after.Valid && after.InfinityModifier == pgtype.Finite {
		o.SessionsAfter = after.Time
	}
	return &o, err
}

// lockOperatorsSQL serializes changes of operator accounts: two admins
// demoting each other at once cannot both commit (the table is tiny and
// changes are rare).
const lockOperatorsSQL = `LOCK TABLE operators IN SHARE ROW EXCLUSIVE MODE`

// mayManageSQL re-reads, under the lock, whether the actor is still an
// enabled admin (its role was checked before the transaction).
const mayManageSQL = `SELECT EXISTS (SELECT 1 FROM operators WHERE name = $1 AND role = 'admin' AND disabled_at IS NULL)`

// adminsLeftSQL counts the enabled admins.
const adminsLeftSQL = `SELECT count(*) FROM operators WHERE role = 'admin' AND disabled_at IS NULL`

// mayManage checks, under the lock, that by may change operator accounts:
// an enabled admin now, or the core itself creating the first operator.
func mayManage(ctx context.Context, tx pgx.Tx, by core.Actor) error {
	if _, err := tx.Exec(ctx, lockOperatorsSQL); err != nil {
		return err
	}
	if strings.HasPrefix(by.Operator, "system:") {
		return nil
	}
	var ok bool
	if err := tx.QueryRow(ctx, mayManageSQL, by.Operator).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return core.Errorf(core.EForbidden, "operator %s is no longer an enabled admin", by.Operator)
	}
	return nil
}

const createOperatorSQL = `
INSERT INTO operators (name, display_name, role, password_hash) VALUES ($1, $2, $3, $4)
ON CONFLICT (name) DO NOTHING
RETURNING ` + operatorColumns

// CreateOperator creates an operator account, audited, or EConflict when
// the name is taken.
func (db *DB) CreateOperator(ctx context.Context, n core.NewOperator, hash []byte, by core.Actor) (*core.Operator, error) {
	var o *core.Operator
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		if err := mayManage(ctx, tx, by); err != nil {
			return err
		}
		var err error
		o, err = scanOperator(tx.QueryRow(ctx, createOperatorSQL, n.Name, n.DisplayName, n.Role, hash))
		if errors.Is(err, pgx.ErrNoRows) {
			return core.Errorf(core.EConflict, "an operator named %s exists", n.Name)
		}
		if err != nil {
			return err
		}
		return audit(ctx, tx, by, "operator.create", "operator:"+o.Name, nil, o)
	})
	if err != nil {
		return nil, translate(err)
	}
	return o, nil
}

const operatorByNameSQL = `SELECT ` + operatorColumns + `, password_hash FROM operators WHERE name = $1`

// OperatorByName returns an operator and its password hash, or ENotFound.
func (db *DB) OperatorByName(ctx context.Context, name string) (*core.Operator, []byte, error) {
	var hash []byte
	o, err := scanOperator(db.pool.QueryRow(ctx, operatorByNameSQL, name), &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, core.Errorf(core.ENotFound, "no operator %s", name)
	}
	if err != nil {
		return nil, nil, translate(err)
	}
	return o, hash, nil
}

const updateOperatorSQL = `
UPDATE operators SET
    display_name  = coalesce($2, display_name),
    role          = coalesce($3, role),
    password_hash = coalesce($4, password_hash),
    disabled_at   = CASE WHEN $5::boolean IS NULL THEN disabled_at
                         WHEN $5 THEN coalesce(disabled_at, now()) ELSE NULL END,
    sessions_after = CASE WHEN $4::bytea IS NOT NULL
                            OR ($5::boolean IS NOT NULL AND $5 IS DISTINCT FROM (disabled_at IS NOT NULL))
                            OR ($3::text IS NOT NULL AND $3 IS DISTINCT FROM role)
                          THEN date_trunc('second', now()) ELSE sessions_after END
 WHERE name = $1
RETURNING ` + operatorColumns

// UpdateOperator changes an operator account, audited (the password's
// hash never reaches the log), or ENotFound.
func (db *DB) UpdateOperator(ctx context.Context, name string, p core.OperatorPatch, hash []byte, by core.Actor) (*core.Operator, error) {
	var after *core.Operator
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		if err := mayManage(ctx, tx, by); err != nil {
			return err
		}
		before, err := scanOperator(tx.QueryRow(ctx, `SELECT `+operatorColumns+` FROM operators WHERE name = $1 FOR UPDATE`, name))
		if errors.Is(err, pgx.ErrNoRows) {
			return core.Errorf(core.ENotFound, "no operator %s", name)
		}
		if err != nil {
			return err
		}
		var h any
		if hash != nil {
			h = hash
		}
		if after, err = scanOperator(tx.QueryRow(ctx, updateOperatorSQL, name, p.DisplayName, p.Role, h, p.Disabled)); err != nil {
			return err
		}
		var admins int
		if err := tx.QueryRow(ctx, adminsLeftSQL).Scan(&admins); err != nil {
			return err
		}
		if admins == 0 {
			return core.Errorf(core.EConflict, "this would leave no enabled admin: make another admin first")
		}
		type change struct {
			*core.Operator
			PasswordChanged bool `json:"password_changed,omitempty"`
		}
		return audit(ctx, tx, by, "operator.update", "operator:"+name, before, change{after, hash != nil})
	})
	if err != nil {
		return nil, translate(err)
	}
	return after, nil
}

// ListOperators lists every operator account by name.
func (db *DB) ListOperators(ctx context.Context) ([]core.Operator, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+operatorColumns+` FROM operators ORDER BY name`)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	ops := []core.Operator{}
	for rows.Next() {
		o, err := scanOperator(rows)
		if err != nil {
			return nil, translate(err)
		}
		ops = append(ops, *o)
	}
	return ops, translate(rows.Err())
}

// CountOperators is the number of operator accounts (the first operator is
// created only into an empty table).
func (db *DB) CountOperators(ctx context.Context) (int, error) {
	var n int
	err := db.pool.QueryRow(ctx, `SELECT count(*) FROM operators`).Scan(&n)
	return n, translate(err)
}

const auditSQL = `
INSERT INTO audit_log (actor, action, subject, before, after, request_id) VALUES ($1, $2, $3, $4, $5, $6)`

// audit writes one audit entry in tx: before and after are marshalled to
// JSON (nil: NULL).
func audit(ctx context.Context, tx pgx.Tx, by core.Actor, action, subject string, before, after any) error {
	b, err := auditJSON(before)
	if err != nil {
		return err
	}
	a, err := auditJSON(after)
	if err != nil {
		return err
	}
	if by.Operator == "" {
		return fmt.Errorf("audit %s %s: no actor", action, subject)
	}
	_, err = tx.Exec(ctx, auditSQL, by.Operator, action, subject, b, a, by.RequestID)
	return err
}

func auditJSON(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return b, nil
}

// Record writes an audit entry of a change made outside the core's
// transactions (the gateway's dials, stored by PatchDials before the
// gateway applies them).
func (db *DB) Record(ctx context.Context, by core.Actor, action, subject string, before, after any) error {
	return translate(db.inTx(ctx, func(tx pgx.Tx) error { return audit(ctx, tx, by, action, subject, before, after) }))
}

const auditListSQL = `
SELECT id, at, actor, action, subject, coalesce(before, 'null'), coalesce(after, 'null'), request_id
  FROM audit_log
 WHERE ($1::text IS NULL OR subject = $1) AND ($2::bigint = 0 OR id < $2)
 ORDER BY id DESC
 LIMIT $3`

// Audit lists audit entries, newest first.
func (db *DB) Audit(ctx context.Context, f core.AuditFilter) ([]core.AuditEntry, error) {
	if f.Limit <= 0 || f.Limit > core.MaxPage {
		f.Limit = core.DefaultPage
	}
	rows, err := db.pool.Query(ctx, auditListSQL, nullable(f.Subject), f.Before, f.Limit)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	out := []core.AuditEntry{}
	for rows.Next() {
		var e core.AuditEntry
		var before, after []byte
		if err := rows.Scan(&e.ID, &e.At, &e.Actor, &e.Action, &e.Subject, &before, &after, &e.RequestID); err != nil {
			return nil, translate(err)
		}
		e.Before, e.After = before, after
		out = append(out, e)
	}
	return out, translate(rows.Err())
}
