// Package startup holds what every onsale service does the same way while
// it starts: waiting for a store that does not answer yet.
package startup

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Backoff between attempts to reach a store: doubled from FirstDelay up to
// MaxDelay, so a service started while PostgreSQL fails over (about 10 s
// without a primary) or before Redis answers connects within seconds of the
// store coming back, without hammering it. Tests shorten them.
var FirstDelay, MaxDelay = 500 * time.Millisecond, 10 * time.Second

// Retry calls open until it succeeds, fails for a reason retrying cannot
// fix (permanent: a malformed URL, a bad setting; nil = none is), or ctx
// ends (SIGTERM). Every failed attempt is logged. A service that exited
// instead would leave systemd's restart limit to decide whether it ever
// runs again.
func Retry[T any](ctx context.Context, log *slog.Logger, what string, permanent func(error) bool, open func(context.Context) (T, error)) (T, error) {
	delay := FirstDelay
	for attempt := 1; ; attempt++ {
		v, err := open(ctx)
		if err == nil {
			if attempt > 1 {
				log.Info(what+" reached", "attempt", attempt)
			}
			return v, nil
		}
		if permanent != nil && permanent(err) {
			return v, err
		}
		if ctx.Err() != nil {
			return v, fmt.Errorf("%s: gave up at start-up: %w", what, err)
		}
		log.Warn(what+" not reachable at start-up; trying again", "attempt", attempt, "retry_in", delay.String(), "err", err)
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("%s: gave up at start-up: %w", what, err)
		case <-time.After(delay):
		}
		delay = min(2*delay, MaxDelay)
	}
}
