package procnode

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func TestPreStopSleepIsBoundedByTheGracePeriod(t *testing.T) {
	c := &corev1.Container{Name: "operator", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}}
	slept := preStopSleep(context.Background(), c, 150*time.Millisecond)
	assert.GreaterOrEqual(t, slept, 150*time.Millisecond, "the hook sleeps until the grace period ends")
	assert.Less(t, slept, 2*time.Second, "and no longer")

	assert.Zero(t, preStopSleep(context.Background(), &corev1.Container{Name: "plain"}, time.Minute), "no hook, no sleep")
	assert.Zero(t, preStopSleep(context.Background(), c, 0), "a forced deletion (grace 0) skips the hook")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.Less(t, preStopSleep(ctx, c, time.Minute), time.Second, "a node shutting down does not wait for hooks")
}
