package http

import (
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// A limiter's table is read at two random buckets a request: in 4 KB
// pages an 8 MB table costs a TLB miss on top of the cache miss at nearly
// every poll. A table of hugeTableMin or more is therefore mapped by itself
// and offered to the kernel's transparent huge pages (2 MB: the token
// table is four of them); where the kernel says no (THP off, not Linux)
// it stays in 4 KB pages, or on the heap, and works the same.

const (
	hugePage     = 2 << 20
	hugeTableMin = hugePage
)

// newTable returns n zeroed buckets; owner's cleanup unmaps a mapped table.
func newTable(owner *limiter, n int) []atomic.Int64 {
	size := n * int(unsafe.Sizeof(atomic.Int64{}))
	if size < hugeTableMin || runtime.GOOS != "linux" {
		return make([]atomic.Int64, n)
	}
	mem, err := syscall.Mmap(-1, 0, size+hugePage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return make([]atomic.Int64, n)
	}
	off := (hugePage - int(uintptr(unsafe.Pointer(&mem[0]))%hugePage)) % hugePage // the table starts on a huge page
	table := mem[off : off+size]
	syscall.Madvise(table, 14) // MADV_HUGEPAGE; refused where THP is off: 4 KB pages then
	runtime.AddCleanup(owner, func(m []byte) { syscall.Munmap(m) }, mem)
	return unsafe.Slice((*atomic.Int64)(unsafe.Pointer(&table[0])), n)
}
