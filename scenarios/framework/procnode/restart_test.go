package procnode

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestCrashingContainerRestartsWithKubeletBackOff(t *testing.T) {
	w := statusWorker(corev1.RestartPolicyAlways)
	w.n.recorder = record.NewFakeRecorder(100)
	clock := clocktesting.NewFakeClock(time.Now())
	w.backoff = flowcontrol.NewFakeBackOff(10*time.Second, 40*time.Second, clock)
	r := &containerRun{name: "op", everStarted: true}
	// crash lets the container run for ranFor and exit; it returns the wait before the
	// restart, then restarts it.
	crash := func(ranFor time.Duration) time.Duration {
		clock.Step(ranFor)
		w.scheduleRestart(r, clock.Now())
		delay := r.nextStart.Sub(clock.Now())
		clock.SetTime(r.nextStart)
		w.countRestart(r)
		return delay
	}

	var got []time.Duration
	for range 5 {
		got = append(got, crash(time.Second))
	}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 40 * time.Second}
	require.True(t, slices.Equal(got, want), "back-off sequence = %v, want %v", got, want)
	d := crash(2*40*time.Second + time.Second)
	require.Zero(t, d, "after a run longer than twice the max, back-off = %v, want an immediate restart", d)
	d = crash(time.Second)
	require.Equal(t, 10*time.Second, d, "after a reset the next crash waits %v, want 10s", d)
	wantWaiting := corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container=op pod=op-0_ns(uid-1)"}
	require.NotNil(t, r.waiting, "waiting = %+v, restartCount = %d; want %+v and 7", r.waiting, r.restartCount, wantWaiting)
	require.Equal(t, wantWaiting, *r.waiting, "waiting = %+v, restartCount = %d; want %+v and 7", r.waiting, r.restartCount, wantWaiting)
	require.Equal(t, int32(7), r.restartCount, "waiting = %+v, restartCount = %d; want %+v and 7", r.waiting, r.restartCount, wantWaiting)
}
