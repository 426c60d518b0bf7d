// Package attack is the attack suite: the real binaries (bin/core,
// bin/gateway, bin/paysim, started by package stack on a database of the
// suite's own) attacked over HTTP the way people attack a noon sale: forged
// and confused tokens, forged and replayed webhooks, other fans' holds,
// bookings and tickets, oversized requests, slow clients, forged client
// addresses, floods of random event ids and of catalog reads, cookie
// pile-ups and cross-site joins.
//
// Each attack is one named subtest of TestAttacks. It asserts the refusal
// (status and error code) and that nothing changed: the rows of every table
// the attack could touch, the Redis keys of the events it names, and for
// floods the gateway's memory after a forced collection. At the end the
// suite logs a table (attack, expected refusal, seen) for the closing note.
// Its tests are the proof; the package itself has no code.
package attack
