package topology

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"time"
)

// Port ranges. The harness already uses 2000-4999 and 12000-14999 (make
// test's Redis Cluster and its bus ports), 8080, 8081, 15432, 16379, 18090
// (make up) and 20000-39999 (stack.sh's throwaway servers and their Redis
// bus ports); the kernel hands out 32768-60999 to outgoing connections.
// A topology takes a block of consecutive ports from 5000-7999 (make
// cluster-up: DefaultBase) or from 9000-11999 (tests: FreeBlock), so none
// of these collide.
const (
	DefaultBase = 7400 // make cluster-up's fixed block: 7400-7499
	BlockSize   = 100  // ports a topology may use from its base
)

// FreeBlock returns the base of a block of n consecutive ports in
// 9000-11999 none of which accepts connections right now (for a test's own
// topology: several tests and runs side by side each take their own).
func FreeBlock(n int) (int, error) {
	for try := 0; try < 200; try++ {
		base := 9000 + rand.IntN(3000-n)
		if BlockFree(base, n) {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d free consecutive ports in 9000-11999", n)
}

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
