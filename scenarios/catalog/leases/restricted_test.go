package leases

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDeletionBeganIsTheGracePeriodBeforeTheDeletionTimestamp(t *testing.T) {
	asked := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	grace := int64(30)
	// What the API server writes when a pod's deletion is asked for with a 30 s grace period.
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		DeletionTimestamp:          &metav1.Time{Time: asked.Add(30 * time.Second)},
		DeletionGracePeriodSeconds: &grace,
	}}
	assert.Equal(t, asked, deletionBegan(p))
	p.DeletionGracePeriodSeconds = nil
	assert.Equal(t, asked.Add(30*time.Second), deletionBegan(p), "with no grace period the deletion timestamp is all there is")
}
