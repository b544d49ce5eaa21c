package tollgateotel_test

import (
	"runtime"
	"syscall"
	"time"
)

// rusageThread is Linux's RUSAGE_THREAD: the calling thread's usage.
const rusageThread = 1

// threadClock returns a clock of the CPU time the calling goroutine's
// thread has run, locking the goroutine to it, and a func that unlocks
// it. On a machine shared with other work, the CPU a request used is
// steadier than the wall-clock time it took.
func threadClock() (now func() time.Duration, done func()) {
	runtime.LockOSThread()
	now = func() time.Duration {
		var ru syscall.Rusage
		if syscall.Getrusage(rusageThread, &ru) != nil {
			return 0
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return now, runtime.UnlockOSThread
}
