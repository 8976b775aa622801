package procnode

import (
	"slices"
	"testing"
	"time"

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
	if want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 40 * time.Second}; !slices.Equal(got, want) {
		t.Fatalf("back-off sequence = %v, want %v", got, want)
	}
	if d := crash(2*40*time.Second + time.Second); d != 0 {
		t.Fatalf("after a run longer than twice the max, back-off = %v, want an immediate restart", d)
	}
	if d := crash(time.Second); d != 10*time.Second {
		t.Fatalf("after a reset the next crash waits %v, want 10s", d)
	}
	want := corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container=op pod=op-0_ns(uid-1)"}
	if r.waiting == nil || *r.waiting != want || r.restartCount != 7 {
		t.Fatalf("waiting = %+v, restartCount = %d; want %+v and 7", r.waiting, r.restartCount, want)
	}
}
