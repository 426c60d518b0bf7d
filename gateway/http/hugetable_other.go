//go:build !linux

package http

import "sync/atomic"

// newTable returns n zeroed buckets, on the heap (huge pages: Linux only,
// hugetable_linux.go).
func newTable(_ *limiter, n int) []atomic.Int64 { return make([]atomic.Int64, n) }
