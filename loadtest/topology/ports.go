package topology

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Port ranges. The harness already uses 2000-4999 and 12000-14999 (make
// test's Redis Cluster and its bus ports), 8080, 8081, 8090, 8091, 15432, 16379,
// 18090 (make up) and 20000-39999 (stack.sh's throwaway servers and their Redis
// bus ports); the kernel hands out 32768-60999 to outgoing connections.
// A topology takes a block of consecutive ports from 5000-7999 (make
// cluster-up: DefaultBase) or from 9000-11999 (tests: FreeBlock), so none
// of these collide.
const (
	DefaultBase = 7400 // make cluster-up's fixed block: 7400-7499
	BlockSize   = 100  // ports a topology may use from its base
)

// FreeBlock reserves a block of n (at most BlockSize) consecutive ports in
// 9000-11999 none of which accepts connections right now, for a test's own
// topology, and returns its first port. Blocks start at multiples of
// BlockSize; each is reserved by an exclusive flock on
// /tmp/onsale-topology-<base>.lock, so test binaries of several packages
// (and several worktrees) starting topologies at the same moment never
// pick the same block: probing alone would let both see it free. The
// reservation lasts until ReleaseBlock (Stop of the topology, PG or Redis
// Cluster started on it calls it) or the process's exit, when the kernel
// drops the lock.
func FreeBlock(n int) (int, error) {
	if n < 1 || n > BlockSize {
		return 0, fmt.Errorf("FreeBlock(%d): 1 to %d ports", n, BlockSize)
	}
	const first, blocks = 9000, 30 // 9000-11999
	for _, i := range rand.Perm(blocks) {
		base := first + i*BlockSize
		if reserveBlock(base) {
			if BlockFree(base, n) {
				return base, nil
			}
			ReleaseBlock(base) // someone else's listener, not a topology of ours
		}
	}
	return 0, fmt.Errorf("no block of %d free ports in 9000-11999 (each of the 30 is reserved or in use)", n)
}

var reserved = struct {
	sync.Mutex
	m map[int]*os.File // base -> its locked file
}{m: map[int]*os.File{}}

// reserveBlock takes base's lock, unless this process or another holds it.
func reserveBlock(base int) bool {
	reserved.Lock()
	defer reserved.Unlock()
	if _, mine := reserved.m[base]; mine {
		return false
	}
	f, err := os.OpenFile(blockLockPath(base), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return false // another user's file we may not open: theirs
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	reserved.m[base] = f
	return true
}

// ReleaseBlock gives back the reservation FreeBlock made of base; a block
// this process did not reserve is left alone.
func ReleaseBlock(base int) {
	reserved.Lock()
	defer reserved.Unlock()
	if f, ok := reserved.m[base]; ok {
		f.Close() // drops the flock
		delete(reserved.m, base)
	}
}

func blockLockPath(base int) string { return fmt.Sprintf("/tmp/onsale-topology-%d.lock", base) }

// BlockFree reports whether nothing listens on 127.0.0.1 at base..base+n-1.
func BlockFree(base, n int) bool {
	for p := base; p < base+n; p++ {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return false
		}
	}
	return true
}
