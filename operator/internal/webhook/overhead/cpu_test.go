package overhead

import (
	"syscall"
	"testing"
	"time"
)

// cpuClock measures the CPU time (user and system) the process spends in a benchmark's loop,
// client and server together, reported as cpu-ns/op. On a machine shared with other work it
// varies far less than the loop's wall time (ns/op), which includes waiting for a core.
type cpuClock struct {
	b     *testing.B
	start time.Duration
}

func startCPU(b *testing.B) cpuClock {
	b.ResetTimer()
	return cpuClock{b: b, start: processCPU(b)}
}

func (c cpuClock) report() {
	c.b.StopTimer()
	c.b.ReportMetric(float64(processCPU(c.b)-c.start)/float64(c.b.N), "cpu-ns/op")
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
