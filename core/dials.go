package core

import (
	"context"
	"encoding/json"
)

// EventDials is the durable home of the dials operators set for an
// event's waiting room (the gateway's admission settings). The core keeps
// them for the gateways and does not read them: a JSON object of dial
// values by dial name, the gateway's vocabulary (gateway.DialList). The
// gateways' Redis holds a copy; when it loses an event's room, the
// gateways set it up from here, so a paused sale stays paused.
type EventDials interface {
	// Dials returns the event's stored dials ({} when none were set);
	// ENotFound when there is no such event.
	Dials(ctx context.Context, event int64) (json.RawMessage, error)
	// PatchDials merges patch (a JSON object) into the event's stored
	// dials for by, audited (the dials before and after) in the same
	// transaction, and returns the result; ENotFound when there is no such
	// event.
	PatchDials(ctx context.Context, event int64, patch json.RawMessage, by Actor) (json.RawMessage, error)
}
