package main

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// pendingBookings counts the event's bookings still waiting for money or a refund.
func pendingBookings(ctx context.Context, c config) (int, error) {
	conn, err := pgx.Connect(ctx, c.dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM bookings WHERE event_id = $1 AND status IN ('PAYMENT_PENDING', 'REFUND_DUE')`, c.event).Scan(&n)
	return n, err
}
