//go:build !race

package http_test

const race = false
