package postgres

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// retry runs again exactly the errors its policy names, a bounded number of
// times, and stops when the context ends. inTx (txRetry) retries deadlocks
// and serialization failures a few times with back-off; the hold
// (holdRetry) retries a deadlock once, at once, and nothing else.
func TestRetry(t *testing.T) {
	deadlock := &pgconn.PgError{Code: "40P01"}
	serialization := &pgconn.PgError{Code: "40001"}
	other := &pgconn.PgError{Code: "23505"}
	tests := []struct {
		name      string
		policy    retryPolicy
		errs      []error // what op returns on each call; nil past the end
		cancelled bool
		calls     int
		want      error
	}{
		{"tx: success", txRetry, nil, false, 1, nil},
		{"tx: deadlock then success", txRetry, []error{deadlock}, false, 2, nil},
		{"tx: serialization failures then success", txRetry, []error{serialization, serialization}, false, 3, nil},
		{"tx: wrapped deadlock", txRetry, []error{errors.Join(errors.New("book"), deadlock)}, false, 2, nil},
		{"tx: not retryable", txRetry, []error{other}, false, 1, other},
		{"tx: gives up", txRetry, []error{deadlock, deadlock, deadlock, deadlock, deadlock}, false, 4, deadlock},
		{"tx: context ended", txRetry, []error{deadlock, deadlock}, true, 1, deadlock},

		{"hold: success", holdRetry, nil, false, 1, nil},
		{"hold: deadlock then success", holdRetry, []error{deadlock}, false, 2, nil},
		{"hold: wrapped deadlock", holdRetry, []error{errors.Join(errors.New("hold"), deadlock)}, false, 2, nil},
		{"hold: retries a deadlock once only", holdRetry, []error{deadlock, deadlock, deadlock}, false, 2, deadlock},
		{"hold: serialization failure not retried", holdRetry, []error{serialization}, false, 1, serialization},
		{"hold: not retryable", holdRetry, []error{other}, false, 1, other},
		{"hold: context ended", holdRetry, []error{deadlock, deadlock}, true, 1, deadlock},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logged bytes.Buffer
			db := &DB{log: slog.New(slog.NewTextHandler(&logged, nil))}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			calls := 0
			start := time.Now()
			err := db.retry(ctx, tc.policy, "test", func() error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			}, "event", 7)
			took := time.Since(start)
			if calls != tc.calls || !errors.Is(err, tc.want) && err != tc.want {
				t.Fatalf("retry(%v) = %v after %d calls; want %v after %d", tc.errs, err, calls, tc.want, tc.calls)
			}
			if retries := strings.Count(logged.String(), "retrying"); retries != calls-1 {
				t.Errorf("retry logged %d warnings for %d calls; want %d:\n%s", retries, calls, calls-1, logged.String())
			}
			if calls > 1 && !strings.Contains(logged.String(), "event=7") {
				t.Errorf("retry warning lacks the caller's fields (event=7):\n%s", logged.String())
			}
			// The hold never sleeps between its tries: a generous bound that
			// txRetry's first pause (>= 2.5 ms) alone would not meet in
			// principle, but a loaded machine might; the pause itself is
			// checked exactly below.
			if tc.policy.backoff == 0 && took > time.Second {
				t.Errorf("hold retry took %v; want no pause", took)
			}
		})
	}
}

// The hold's policy never pauses; inTx's pauses a jittered [d/2, d] with d
// doubling from 5 ms up to 100 ms.
func TestRetryPause(t *testing.T) {
	for attempt := 1; attempt <= 6; attempt++ {
		if d := holdRetry.pause(attempt); d != 0 {
			t.Errorf("holdRetry.pause(%d) = %v; want 0", attempt, d)
		}
		d := min(txRetry.backoff<<(attempt-1), txRetry.maxBackoff)
		for range 50 {
			if got := txRetry.pause(attempt); got < d/2 || got > d {
				t.Fatalf("txRetry.pause(%d) = %v; want in [%v, %v]", attempt, got, d/2, d)
			}
		}
	}
}
