// Package sweeper runs the sweep of expired holds on a timer.
package sweeper

import (
	"context"
	"log/slog"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/metrics"
)

// Store sweeps expired holds back to sale (core/postgres implements it; the
// rule of what is swept, and why it is safe beside the hold path, is
// sweepSQL in core/postgres/sweep.go).
type Store interface {
	Sweep(ctx context.Context) (core.SweepResult, error)
	// CancelStragglers moves to refund the confirmed bookings of cancelled
	// shows that committed after their cancellation read them (the
	// cancellations' backstop, core/postgres), and counts them.
	CancelStragglers(ctx context.Context) (int, error)
}

// Run sweeps every interval until ctx ends. Each sweep is conditional in the
// database, so several cores may run sweepers at once.
func Run(ctx context.Context, holds Store, interval time.Duration, log *slog.Logger, m *metrics.Metrics) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		r, err := holds.Sweep(ctx)
		m.SweepDuration.Observe(time.Since(start).Seconds())
		if err != nil {
			if ctx.Err() == nil {
				m.SweepErrors.Inc()
				log.Error("sweep failed", "err", err)
			}
			continue
		}
		if n, err := holds.CancelStragglers(ctx); err != nil && ctx.Err() == nil {
			log.Error("cancelled shows' late bookings not checked", "err", err)
		} else if n > 0 {
			m.CancelStragglers.Add(float64(n))
		}
		m.SweptHolds.Add(float64(r.Holds))
		m.SweepLag.Set(r.Lag.Seconds())
		if r.Holds > 0 {
			log.Info("swept expired holds", "holds", r.Holds, "lag", r.Lag, "took", time.Since(start))
		}
	}
}
