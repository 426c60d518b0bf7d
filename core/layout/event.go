package layout

import "time"

// EventSpec is an event to put on sale on a layout: what the store's
// CreateEvent takes and what the demo catalog (core/seed) lists. Zero
// MaxPerAccount and HoldSeconds take the store's defaults (6 tickets, 480 s).
type EventSpec struct {
	Name          string
	Kind          string
	StartsAt      time.Time
	OnsaleAt      time.Time
	MaxPerAccount int
	HoldSeconds   int
	Layout        *Layout
}
