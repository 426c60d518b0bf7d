package postgres

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// retry (the policy of inTx and of the hold statement) runs again exactly
// the errors that abort work PostgreSQL lets run again, a bounded number of
// times, and stops when the context ends.
func TestRetry(t *testing.T) {
	deadlock := &pgconn.PgError{Code: "40P01"}
	serialization := &pgconn.PgError{Code: "40001"}
	other := &pgconn.PgError{Code: "23505"}
	tests := []struct {
		name      string
		errs      []error // what op returns on each call; nil past the end
		cancelled bool
		calls     int
		want      error
	}{
		{"success", nil, false, 1, nil},
		{"deadlock then success", []error{deadlock}, false, 2, nil},
		{"serialization failures then success", []error{serialization, serialization}, false, 3, nil},
		{"wrapped deadlock", []error{errors.Join(errors.New("book"), deadlock)}, false, 2, nil},
		{"not retryable", []error{other}, false, 1, other},
		{"gives up", []error{deadlock, deadlock, deadlock, deadlock, deadlock}, false, retryAttempts, deadlock},
		{"context ended", []error{deadlock, deadlock}, true, 1, deadlock},
	}
	db := &DB{log: slog.New(slog.DiscardHandler)}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			calls := 0
			err := db.retry(ctx, "test", func() error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			})
			if calls != tc.calls || !errors.Is(err, tc.want) && err != tc.want {
				t.Fatalf("retry(%v) = %v after %d calls; want %v after %d", tc.errs, err, calls, tc.want, tc.calls)
			}
		})
	}
}
