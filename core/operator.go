package core

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"time"
)

// This file holds every rule of who runs onsale: named operator accounts,
// the roles they have, what each role may do, and the audit record every
// change leaves. The store (core/postgres) keeps accounts and audit; the
// HTTP layer (core/http/operator.go) signs operators in and asks May.

// Roles. A role is a fixed set of permissions (rolePermissions).
const (
	// RoleAdmin does everything, and alone manages operator accounts.
	RoleAdmin = "admin"
	// RoleBoxOffice runs the catalog: venues, layouts, shows, publishing,
	// closing and cancelling, sales figures and attendee lists; and the
	// waiting room's dials.
	RoleBoxOffice = "box_office"
	// RoleSaleDesk steers a sale: reads the shows and the live view and
	// sets the waiting room's dials, nothing else.
	RoleSaleDesk = "sale_desk"
)

// Roles lists the roles, most powerful first.
var Roles = []string{RoleAdmin, RoleBoxOffice, RoleSaleDesk}

// Permissions, each named for what it allows.
const (
	PermReadShows = "shows:read"      // list venues, layouts, shows, the audit of a show, the live view
	PermEditShows = "shows:write"     // import layouts; create, edit, publish and close shows
	PermCancel    = "shows:cancel"    // cancel a show (every booking refunded)
	PermSales     = "sales:read"      // sales figures and the attendee list
	PermDials     = "dials:write"     // the waiting room's dials (rate, cap, pause, ...)
	PermOperators = "operators:write" // create, change and disable operator accounts; read the whole audit log
)

var rolePermissions = map[string][]string{
	RoleAdmin:     {PermReadShows, PermEditShows, PermCancel, PermSales, PermDials, PermOperators},
	RoleBoxOffice: {PermReadShows, PermEditShows, PermCancel, PermSales, PermDials},
	RoleSaleDesk:  {PermReadShows, PermDials},
}

// ValidRole reports whether r is one of Roles.
func ValidRole(r string) bool { return rolePermissions[r] != nil }

// RoleMay reports whether role r has permission perm.
func RoleMay(r, perm string) bool { return slices.Contains(rolePermissions[r], perm) }

// Operator is a named person who runs shows.
type Operator struct {
	ID          int64     `json:"id"`
	Name        string    `json:"name"`
	DisplayName string    `json:"display_name"`
	Role        string    `json:"role"`
	CreatedAt   time.Time `json:"created_at"`
	Disabled    bool      `json:"disabled"`
	// SessionsAfter: a session token issued before it is refused (a
	// password, role or disabled change ends the sessions).
	SessionsAfter time.Time `json:"-"`
}

// May refuses an operator a permission its role lacks, or any action once
// disabled.
func (o *Operator) May(perm string) error {
	switch {
	case o.Disabled:
		return Errorf(EForbidden, "operator %s is disabled", o.Name)
	case !RoleMay(o.Role, perm):
		return Errorf(EForbidden, "a %s operator may not do this (needs %s)", o.Role, perm).With("needs", perm)
	}
	return nil
}

// Actor is who makes a change, as the audit log records it: the operator
// and the request's id (RequestID, the edge's X-Request-Id).
type Actor struct {
	Operator  string
	RequestID string
}

// Operator rules.
const (
	// OperatorTokenTTL is the life of an operator's session token: one
	// working day; the console and the CLI sign in again after it.
	OperatorTokenTTL = 12 * time.Hour
	// MinPassword is the shortest operator password accepted (NIST
	// 800-63B's minimum for a password chosen by its user is 8; operators
	// move money, so 12).
	MinPassword = 12
	// MaxPassword bounds a password (bcrypt reads at most 72 bytes).
	MaxPassword = 72
)

var operatorName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidOperatorName reports whether name could be an operator's.
func ValidOperatorName(name string) bool { return operatorName.MatchString(name) }

// NewOperator is an operator account to create.
type NewOperator struct {
	Name        string `json:"name"`
	DisplayName string `json:"display_name"`
	Role        string `json:"role"`
	Password    string `json:"password"`
}

// Validate checks a new operator: a login name of lower-case letters,
// digits, '.', '_' and '-' (1 to 63, starting with a letter or digit), a
// known role and a password of MinPassword to MaxPassword bytes.
func (n NewOperator) Validate() error {
	switch {
	case !operatorName.MatchString(n.Name):
		return Errorf(EInvalid, "name must be 1 to 63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit")
	case len(n.DisplayName) > 100:
		return Errorf(EInvalid, "display_name is at most 100 characters")
	case !ValidRole(n.Role):
		return Errorf(EInvalid, "role must be one of %v", Roles)
	}
	return ValidPassword(n.Password)
}

// ValidPassword checks an operator password's length.
func ValidPassword(p string) error {
	if len(p) < MinPassword || len(p) > MaxPassword {
		return Errorf(EInvalid, "a password is %d to %d bytes", MinPassword, MaxPassword)
	}
	return nil
}

// OperatorPatch changes an operator account: each non-nil field.
type OperatorPatch struct {
	DisplayName *string `json:"display_name"`
	Role        *string `json:"role"`
	Password    *string `json:"password"`
	Disabled    *bool   `json:"disabled"`
}

// Validate checks the fields the patch sets.
func (p OperatorPatch) Validate() error {
	switch {
	case p.DisplayName == nil && p.Role == nil && p.Password == nil && p.Disabled == nil:
		return Errorf(EInvalid, "nothing to change: give display_name, role, password or disabled")
	case p.DisplayName != nil && len(*p.DisplayName) > 100:
		return Errorf(EInvalid, "display_name is at most 100 characters")
	case p.Role != nil && !ValidRole(*p.Role):
		return Errorf(EInvalid, "role must be one of %v", Roles)
	case p.Password != nil:
		return ValidPassword(*p.Password)
	}
	return nil
}

// AuditEntry is one change: who, when, what, and the subject before and
// after (JSON, null where it did not exist).
type AuditEntry struct {
	ID        int64           `json:"id"`
	At        time.Time       `json:"at"`
	Actor     string          `json:"actor"`
	Action    string          `json:"action"`
	Subject   string          `json:"subject"`
	Before    json.RawMessage `json:"before"`
	After     json.RawMessage `json:"after"`
	RequestID string          `json:"request_id,omitempty"`
}

// AuditFilter selects audit entries: Subject "" is every subject; entries
// older than Before (an id; 0: the newest) newest first, at most Limit.
type AuditFilter struct {
	Subject string
	Before  int64
	Limit   int
}

// Operators is the store of operator accounts and the audit log. Each
// change is written with its audit entry in one transaction.
type Operators interface {
	// CreateOperator creates an account with the password's hash, or
	// EConflict when the name is taken.
	CreateOperator(ctx context.Context, n NewOperator, hash []byte, by Actor) (*Operator, error)
	// OperatorByName returns an account and its password hash, or
	// ENotFound.
	OperatorByName(ctx context.Context, name string) (*Operator, []byte, error)
	// UpdateOperator applies p (the password already hashed into hash when
	// p sets one), or ENotFound.
	UpdateOperator(ctx context.Context, name string, p OperatorPatch, hash []byte, by Actor) (*Operator, error)
	ListOperators(ctx context.Context) ([]Operator, error)
	// Audit lists entries, newest first.
	Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
	// Record writes an audit entry of a change made elsewhere (the
	// gateway's dials).
	Record(ctx context.Context, by Actor, action, subject string, before, after any) error
}
