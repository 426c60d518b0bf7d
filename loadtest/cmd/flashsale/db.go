package main

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// pendingBookings counts the event's bookings still waiting for money or a refund.
const pendingBookings = `SELECT count(*) FROM bookings WHERE event_id = $1 AND status IN ('PAYMENT_PENDING', 'REFUND_DUE')`

// settle waits (at most 3 minutes) until no booking of the event is
// pending at the core, so that the checker sees every payment settled: a
// payment no webhook settles waits for the reconciler (twice its
// ONSALE_RECONCILE_AFTER when no payment reached the provider).
func settle(ctx context.Context, c Config) {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		n, err := pending(ctx, c)
		if err == nil && n == 0 {
			return
		}
		time.Sleep(time.Second)
	}
}

func pending(ctx context.Context, c Config) (int, error) {
	conn, err := pgx.Connect(ctx, c.DatabaseURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, pendingBookings, c.Event).Scan(&n)
	return n, err
}
