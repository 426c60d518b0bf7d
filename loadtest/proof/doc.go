// Package proof holds the end-to-end payment experiments: the real core
// (HTTP API, PostgreSQL, outbox) against the payment-provider simulator,
// whose ledger shows every charge, capture and refund. Its tests are the
// proof; the package itself has no code.
package proof
