package contract

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMemoryOverBoundNamesThePodsThatRoseMoreThanTheHeadroom(t *testing.T) {
	w := &memoryWatch{container: "manager",
		baseline: map[string]uint64{"a": 40 << 20, "b": 40 << 20},
		peak:     map[string]uint64{"a": 40<<20 + memoryHeadroom, "b": 40<<20 + memoryHeadroom + 1<<20}}

	assert.Equal(t, []string{"pod b: container manager 40 MiB before the input, 191 MiB at most while it was sent (+151 MiB)"}, w.overBound(),
		"a pod exactly at the headroom is within it; one a MiB over is named with its figures")
	assert.Equal(t, map[string]string{"a": "40 MiB before, 190 MiB at most", "b": "40 MiB before, 191 MiB at most"}, w.report())
}
