package core

import "context"

// SeatLayout is an event's seats as the seat map draws them: sections of
// rows; seat i of a row has position Pos+i and number Numbers[i]. It never
// changes once the event exists. A seat's position is also its bit in the
// seat-map bitmap the gateway serves.
type SeatLayout struct {
	EventID  int64           `json:"event_id"`
	Capacity int             `json:"capacity"`
	Bands    []PriceBand     `json:"price_bands"`
	Sections []LayoutSection `json:"sections"`
}

// LayoutSection is one block of rows.
type LayoutSection struct {
	Code string      `json:"code"`
	Rows []LayoutRow `json:"rows"`
}

// LayoutRow is one row: its label, band, first position and seat numbers.
type LayoutRow struct {
	Label   string `json:"label"`
	Band    string `json:"band"`
	Pos     int    `json:"pos"`
	Numbers []int  `json:"numbers"`
}

// Counts are an event's tickets by state, for the operators' console.
// Available counts seats a fan could hold now (free, or held by an expired
// hold not yet swept); Held counts only holds still running.
type Counts struct {
	Capacity  int `json:"capacity"`
	Available int `json:"available"`
	Held      int `json:"held"`
	Sold      int `json:"sold"`
}

// Layouts serves what the gateway's seat map draws: the static layout and
// the moving counts. Both fail with ENotFound for an unknown event; Layout
// also for a general-admission event, which has no seat map.
type Layouts interface {
	Layout(ctx context.Context, event int64) (*SeatLayout, error)
	Counts(ctx context.Context, event int64) (*Counts, error)
}
