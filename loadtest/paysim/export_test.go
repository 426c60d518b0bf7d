package paysim

// SetBeforeExec lets the external tests slow down request execution.
func SetBeforeExec(s *Sim, f func()) { s.beforeExec = f }
