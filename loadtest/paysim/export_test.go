package paysim

// SetBeforeExec lets the external tests slow down request execution.
func SetBeforeExec(s *Sim, f func()) { s.beforeExec = f }

// SetAfterDue lets the external tests see the webhook scheduler look at the
// queue (f runs with the simulator's lock held: it must not call it).
func SetAfterDue(s *Sim, f func(queued int)) {
	s.mu.Lock()
	s.afterDue = f
	s.mu.Unlock()
}
