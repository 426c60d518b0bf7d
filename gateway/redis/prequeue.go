package redis

import (
	"crypto/rand"
	"encoding/binary"
)

// drawScore is a fan's lot in the pre-queue draw (the rule is written out
// in prequeue.lua, where the draw happens): 53 random bits from
// crypto/rand, so the score is exact in a sorted set's float and nobody can
// predict or steer the order. Under the fifo dial the script ignores it and
// scores by arrival time.
func drawScore() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) >> 11
}
