//go:build !race

package token

const race = false
