package core

import (
	"context"
	"time"
)

// Vitals are the figures of the business the core's metrics report (core/
// metrics), read from the database at a scrape: the outbox's work, the
// payments waiting for their provider, and each live show's seats.
type Vitals struct {
	Outbox               []OutboxVitals
	PaymentsPending      int
	OldestPaymentPending time.Duration
	Events               []EventVitals
}

// OutboxVitals are one job kind's pending and given-up jobs, and how long
// the oldest pending one has waited.
type OutboxVitals struct {
	Kind          string
	Pending, Dead int
	OldestPending time.Duration
}

// EventVitals are a live show's seats (or GA tickets) and running holds.
type EventVitals struct {
	ID                              int64
	Capacity, Available, Held, Sold int
	HoldsActive                     int
}

// VitalsReader reads the Vitals (core/postgres implements it).
type VitalsReader interface {
	Vitals(ctx context.Context) (*Vitals, error)
}
