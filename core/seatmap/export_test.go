package seatmap

// Flush applies every queued change now, in the caller's goroutine: the
// test's way to wait for the changes a commit queued (Changed runs before
// the store's call returns) instead of polling the cache for them.
func (k *Keeper) Flush() {
	for {
		select {
		case c := <-k.queue():
			k.apply(c)
		default:
			return
		}
	}
}
