package suiterun

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	_ "github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/providers"
)

// footprint is the registered footprint of provider.
func footprint(t *testing.T, provider string) cluster.Footprint {
	t.Helper()
	p, err := cluster.Lookup(provider)
	require.NoError(t, err)
	return p.Footprint
}

// roomy is a 2-core machine with room for many suites.
func roomy() Readings {
	return Readings{
		Cores:               2,
		Memory:              Pool{Free: 20 * gib, Source: "MemAvailable in /proc/meminfo is 20.0 GiB", More: "free memory"},
		FileHandles:         Pool{Free: 1e6, Source: "fs.file-max is 1000000, 0 in use", More: "raise fs.file-max"},
		InotifyInstances:    Pool{Free: 128, Source: "fs.inotify.max_user_instances is 128, 0 in use", More: "raise it: sysctl -w fs.inotify.max_user_instances=512"},
		InotifyWatches:      Pool{Free: 65536, Source: "fs.inotify.max_user_watches is 65536, 0 in use", More: "raise it: sysctl -w fs.inotify.max_user_watches=524288"},
		OpenFilesPerProcess: 1 << 20,
	}
}

func TestDefaultJobsFollowCoresPerProvider(t *testing.T) {
	r := roomy()
	assert.Equal(t, 3, DefaultJobs(footprint(t, "local"), r, 6), "local: cores + 1")
	assert.Equal(t, 1, DefaultJobs(footprint(t, "kind"), r, 6), "kind: one per two cores")
	assert.Equal(t, 1, DefaultJobs(footprint(t, "existing"), r, 6), "existing: its one cluster")
	r.Cores = 8
	r.InotifyInstances.Free = 512
	assert.Equal(t, 6, DefaultJobs(footprint(t, "local"), r, 6), "never more than the suites")
	assert.Equal(t, 4, DefaultJobs(footprint(t, "kind"), r, 6))
}

func TestDefaultJobsFitTheMachine(t *testing.T) {
	r := roomy()
	r.Memory.Free = 3.2 * gib
	assert.Equal(t, 2, DefaultJobs(footprint(t, "local"), r, 6), "2 × 1.5 GiB fit in 3.2 GiB, 3 do not")
	r = roomy()
	r.InotifyInstances.Free = 20
	assert.Equal(t, 1, DefaultJobs(footprint(t, "local"), r, 6), "16 instances each")
	r.Memory.Free = 0.1 * gib
	assert.Equal(t, 1, DefaultJobs(footprint(t, "local"), r, 6), "at least one, as make e2e always ran")
}

func TestCapacityCheckNamesTheLimitAndTheSetting(t *testing.T) {
	r := roomy()
	require.NoError(t, CheckCapacity("E2E_JOBS", 3, "local", footprint(t, "local"), r))

	r.Memory = Pool{Free: 4 * gib, Source: "MemAvailable in /proc/meminfo is 4.0 GiB", More: "free memory"}
	r.InotifyInstances = Pool{Free: 40, Source: "fs.inotify.max_user_instances is 128, 88 in use", More: "raise it: sysctl -w fs.inotify.max_user_instances=512"}
	err := CheckCapacity("E2E_JOBS", 4, "local", footprint(t, "local"), r)
	assert.EqualError(t, err, "E2E_JOBS=4 needs 6.0 GiB of free memory (1.5 GiB per local suite), and MemAvailable in /proc/meminfo is 4.0 GiB: lower E2E_JOBS to 2, or free memory\n"+
		"E2E_JOBS=4 needs 64 inotify instances (16 per local suite), and fs.inotify.max_user_instances is 128, 88 in use: lower E2E_JOBS to 2, or raise it: sysctl -w fs.inotify.max_user_instances=512",
	)
}

func TestCapacityCheckWhenNotOneSuiteFits(t *testing.T) {
	r := roomy()
	r.InotifyWatches = Pool{Free: 100, Source: "fs.inotify.max_user_watches is 8192, 8092 in use", More: "raise it: sysctl -w fs.inotify.max_user_watches=524288"}
	assert.EqualError(t, CheckCapacity("E2E_JOBS", 1, "kind", footprint(t, "kind"), r), "E2E_JOBS=1 needs 8192 inotify watches (8192 per kind suite), and fs.inotify.max_user_watches is 8192, 8092 in use: raise it: sysctl -w fs.inotify.max_user_watches=524288")
}

func TestCapacityCheckOfTheOpenFileLimit(t *testing.T) {
	r := roomy()
	r.OpenFilesPerProcess = 1024
	err := CheckCapacity("E2E_JOBS", 1, "local", footprint(t, "local"), r)
	require.ErrorContains(t, err, "the open-file limit (RLIMIT_NOFILE, `ulimit -Hn`) is 1024")
	assert.ErrorContains(t, err, "E2E_JOBS does not change it")
}

func TestMemAvailable(t *testing.T) {
	got, err := memAvailable("MemTotal:       24684092 kB\nMemFree:         1000 kB\nMemAvailable:   2048 kB\n")
	require.NoError(t, err)
	assert.InDelta(t, 2048*1024, got, 0)
	_, err = memAvailable("MemTotal: 1 kB\n")
	assert.EqualError(t, err, "/proc/meminfo has no MemAvailable line in kB")
}
