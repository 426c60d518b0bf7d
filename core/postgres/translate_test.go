package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/onsale/onsale/core"
)

// What a failover looks like to the core (the primary killed, Patroni
// promoting a standby, a connection reaching a standby, a stalled core's
// transaction ended by the server) is unavailable, answered 503 with
// Retry-After; never internal (500).
func TestTranslateFailover(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Severity: "FATAL", Code: code, Message: "m"} }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"admin shutdown (Patroni stops the old primary)", pg("57P01"), core.EUnavailable},
		{"crash shutdown", pg("57P02"), core.EUnavailable},
		{"cannot connect now (starting up, in recovery)", pg("57P03"), core.EUnavailable},
		{"connection failure", pg("08006"), core.EUnavailable},
		{"connection does not exist", pg("08003"), core.EUnavailable},
		{"protocol violation", pg("08P01"), core.EUnavailable},
		{"read-only transaction (a standby)", pg("25006"), core.EUnavailable},
		{"idle in transaction timeout (a stalled core)", pg("25P03"), core.EUnavailable},
		{"lock timeout (behind a stalled core)", pg("55P03"), core.EUnavailable},
		{"statement cancelled", pg("57014"), core.EUnavailable},
		{"too many connections", pg("53300"), core.EUnavailable},
		{"out of memory", pg("53200"), core.EUnavailable},
		{"I/O error", pg("58030"), core.EUnavailable},
		{"statement completion unknown", pg("40003"), core.EUnavailable},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, core.EUnavailable},
		{"EOF mid-statement", fmt.Errorf("commit: %w", io.ErrUnexpectedEOF), core.EUnavailable},
		{"deadline", context.DeadlineExceeded, core.EUnavailable},
		{"deadlock", pg("40P01"), core.ESeatsTaken},
		{"serialization failure", pg("40001"), core.ESeatsTaken},
		{"a bug: syntax error", pg("42601"), core.EInternal},
		{"a bug: undefined column", pg("42703"), core.EInternal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := core.ErrorCode(translate(tc.err)); got != tc.want {
				t.Errorf("translate(%v) = %s; want %s", tc.err, got, tc.want)
			}
		})
	}
	if translate(nil) != nil {
		t.Error("translate(nil) != nil")
	}
	if err := translate(errors.New("x")); core.ErrorCode(err) != core.EUnavailable {
		t.Errorf("a driver error without a server code = %v; want unavailable", err)
	}
}
