//go:build linux

package http

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A limiter's table is read at two random buckets a request: in 4 KB
// pages an 8 MB table costs a TLB miss on top of the cache miss at nearly
// every poll. A table of hugeTableMin or more is therefore mapped by itself
// and offered to the kernel's transparent huge pages (2 MB: the token
// table is four of them); where the kernel says no (THP off) it stays in
// 4 KB pages, and elsewhere than Linux on the heap (hugetable_other.go):
// it works the same.

const (
	hugePage     = 2 << 20
	hugeTableMin = hugePage
)

// newTable returns n zeroed buckets; owner's cleanup unmaps a mapped table.
// The mapping is outside the Go heap: it lives as long as owner is
// reachable, so the buckets may be used only through a live limiter (its
// methods, as now), never kept apart from it; the tables (about 20 MB)
// are not in the runtime's memory figures or GOMEMLIMIT.
func newTable(owner *limiter, n int) []atomic.Int64 {
	size := n * int(unsafe.Sizeof(atomic.Int64{}))
	if size < hugeTableMin {
		return make([]atomic.Int64, n)
	}
	mem, err := unix.Mmap(-1, 0, size+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return make([]atomic.Int64, n)
	}
	off := (hugePage - int(uintptr(unsafe.Pointer(&mem[0]))%hugePage)) % hugePage // the table starts on a huge page
	table := mem[off : off+size]
	unix.Madvise(table, unix.MADV_HUGEPAGE) // refused where THP is off: 4 KB pages then
	runtime.AddCleanup(owner, func(m []byte) { unix.Munmap(m) }, mem)
	return unsafe.Slice((*atomic.Int64)(unsafe.Pointer(&table[0])), n)
}
