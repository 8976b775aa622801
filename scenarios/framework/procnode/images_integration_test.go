package procnode

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// operatorImage is an image the node knows the contents of, as a foreign operator's: its
// manager (podserver) at /manager, a second program at /crd-apply (the host's cat, which prints
// the file it is given and exits), and a directory of files at carriedPath.
const operatorImage = "example.com/gauntlet/operator:1.0"

// describeOperatorImage adds operatorImage to the node's image map (re-read on every container
// start) and returns where the image holds its files.
func describeOperatorImage(t *testing.T, c *testCluster) (carriedPath string) {
	t.Helper()
	cat, err := exec.LookPath("cat")
	require.NoError(t, err, "the image's second program is the host's cat")
	crds := filepath.Join(t.TempDir(), "crds")
	require.NoError(t, os.MkdirAll(crds, 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(crds, "greeting"), []byte("hello from the image"), 0o600))
	carriedPath = mountRoot + "/crds"

	raw, err := os.ReadFile(c.imagesFile)
	require.NoError(t, err)
	var images map[string]Image
	require.NoError(t, json.Unmarshal(raw, &images))
	images[ImageRepository(operatorImage)] = Image{
		Binary: c.podserver, Entrypoint: "/manager",
		Programs: map[string]string{"/crd-apply": cat},
		Files:    map[string]string{carriedPath: crds},
	}
	raw, err = json.Marshal(images)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(c.imagesFile, raw, 0o600))
	return carriedPath
}

func TestAnImageHoldsItsProgramsAndFilesAndNothingElse(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	carried := describeOperatorImage(t, c)
	greeting := carried + "/greeting"

	t.Run("an init container runs the image's second program, which reads a file the image carries", func(t *testing.T) {
		pod := simplePod("carrier", operatorImage)
		pod.Spec.InitContainers = []corev1.Container{{Name: "crd-apply", Image: operatorImage, Command: []string{"/crd-apply", greeting}}}
		pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/crd-apply", greeting}}}}
		mustSucceed(t, objErr(c.client.CoreV1().Pods(testNamespace).Create(ctx, pod, metav1.CreateOptions{})))
		p := waitForPod(t, c, "carrier", 60*time.Second, "Ready: init done, the exec probe naming the image's program passing", isPodReady)
		init := p.Status.InitContainerStatuses[0].State.Terminated
		require.NotNil(t, init, "init container status %+v, want terminated", p.Status.InitContainerStatuses[0])
		assert.Equal(t, int32(0), init.ExitCode, "init container %+v, want exit 0", init)
		logs, err := c.client.CoreV1().Pods(testNamespace).GetLogs("carrier", &corev1.PodLogOptions{Container: "crd-apply"}).DoRaw(ctx)
		require.NoError(t, err)
		assert.Equal(t, "hello from the image", string(logs), "the init container ran /crd-apply (cat) on the carried file, not the manager")
		assert.Equal(t, "hello from the image", podGet(t, p, "/file?path="+url.QueryEscape(greeting)), "the manager reads the carried file at its path")
		_, err = os.Stat(greeting)
		assert.True(t, os.IsNotExist(err), "the carried file is visible on the host at %s (stat err %v); it must stay in the container", greeting, err)
		deletePodAndWait(t, c, "carrier")
	})

	t.Run("a command naming a program the image lacks fails to start, naming what the image holds", func(t *testing.T) {
		pod := simplePod("missing-program", operatorImage)
		pod.Spec.Containers[0].Command = []string{"/x"}
		mustSucceed(t, objErr(c.client.CoreV1().Pods(testNamespace).Create(ctx, pod, metav1.CreateOptions{})))
		var term *corev1.ContainerStateTerminated
		waitForPod(t, c, "missing-program", 30*time.Second, "a StartError", func(p *corev1.Pod) bool {
			if len(p.Status.ContainerStatuses) == 0 {
				return false
			}
			s := p.Status.ContainerStatuses[0]
			for _, t := range []*corev1.ContainerStateTerminated{s.State.Terminated, s.LastTerminationState.Terminated} {
				if t != nil && t.Reason == "StartError" {
					term = t
				}
			}
			return term != nil
		})
		assert.Equal(t, `exec: "/x": stat /x: no such file or directory: image "`+operatorImage+`" holds only the programs /manager, /crd-apply and the files `+carried+
			` (a FROM scratch image holds nothing else), so a real node fails the same way`, term.Message)
		deletePodAndWait(t, c, "missing-program")
	})

	t.Run("an exec probe and a preStop hook naming a command the image lacks fail as on a real node", func(t *testing.T) {
		pod := simplePod("no-sleep", operatorImage)
		pod.Spec.TerminationGracePeriodSeconds = ptr.To(int64(30))
		pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "1"}}}}
		pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "20"}}}}
		mustSucceed(t, objErr(c.client.CoreV1().Pods(testNamespace).Create(ctx, pod, metav1.CreateOptions{})))
		lacks := `exec: "sleep": executable file not found in $PATH: image "` + operatorImage + `" holds only the programs /manager, /crd-apply`
		waitForEvent(t, c, "no-sleep", "Unhealthy", `Readiness probe failed: command "sleep 1": `+lacks)
		waitForEvent(t, c, "no-sleep", "Unhealthy", "so a real node fails the same way")
		p, err := c.client.CoreV1().Pods(testNamespace).Get(ctx, "no-sleep", metav1.GetOptions{})
		require.NoError(t, err)
		assert.False(t, isPodReady(p), "a pod whose readiness probe the image cannot run is Ready")

		start := time.Now()
		deletePodAndWait(t, c, "no-sleep")
		assert.Less(t, time.Since(start), 15*time.Second, "the preStop hook failed at once: SIGTERM follows without its 20 s")
		waitForEvent(t, c, "no-sleep", "FailedPreStopHook", `command "sleep 20": `+lacks)
		assert.Contains(t, podEvents(c, "no-sleep"), "Killing: Stopping container podserver", "the container is stopped after the failed hook")
	})
}
