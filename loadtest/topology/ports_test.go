package topology

import (
	"os/exec"
	"testing"
)

// A block FreeBlock handed out is reserved, for this process and for
// every other (a test binary of another package probing at the same
// moment), until ReleaseBlock.
func TestFreeBlockReserves(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock(1) to play the other process")
	}
	base, err := FreeBlock(BlockSize)
	if err != nil {
		t.Fatal(err)
	}
	defer ReleaseBlock(base)
	other := func() error { return exec.Command("flock", "-n", blockLockPath(base), "true").Run() }
	if other() == nil {
		t.Fatalf("another process could lock block %d while it is ours", base)
	}
	for range 5 {
		b, err := FreeBlock(BlockSize)
		if err != nil {
			t.Fatal(err)
		}
		defer ReleaseBlock(b)
		if b == base {
			t.Fatalf("FreeBlock handed out %d twice", base)
		}
	}
	ReleaseBlock(base)
	if err := other(); err != nil {
		t.Fatalf("block %d still locked after ReleaseBlock: %v", base, err)
	}
}
