//go:build race

package token

// race: sync.Pool drops what is put back at random under the race
// detector, so allocation counts are not the program's own.
const race = true
