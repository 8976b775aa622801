package testbed

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster/local"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/metrics"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/procnode"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// TestFloorOnALocalCluster installs the bench release and the floor on a
// local cluster and checks that a measured request (not a probe) in
// FloorNamespace passes both floor webhooks, neither of the operator's, and
// comes back without a warning.
func TestFloorOnALocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test creates a local cluster")
	}
	apiserver := filepath.Join(workspace.ControlPlaneDir(workspace.KubernetesVersion), "kube-apiserver")
	if _, err := os.Stat(apiserver); err != nil {
		t.Skipf("a local cluster needs the control plane, and %s is missing (build it with `make control-plane`): %v", apiserver, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	floor, err := BuildFloor(ctx)
	require.NoError(t, err)
	p := local.NewProvider()
	p.WithName("gauntlet-floor-test")
	p.WithOpts(local.WithProgress(testWriter{t}), local.WithImages(map[string]procnode.Image{FloorImage: {Binary: floor}}))
	t.Cleanup(func() {
		cfg, cfgErr := p.Config()
		assert.NoError(t, p.Destroy(context.WithoutCancel(ctx)), "deleting the local cluster")
		if cfgErr == nil {
			assert.Empty(t, local.Leftovers(cfg), "what deleting the local cluster left behind")
		}
	})
	kubeconfig, err := p.Create(ctx)
	require.NoError(t, err)

	inst, err := release.NewInstaller(kubeconfig, release.WithLogf(t.Logf))
	require.NoError(t, err)
	release := chart.Release{Mode: chart.Automatic, Values: benchValues(nil)}
	require.NoError(t, inst.Install(ctx, &release))
	require.NoError(t, inst.WaitReady(ctx, &release, 3*time.Minute))

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	require.NoError(t, InstallFloor(ctx, kube, dyn, cfg, t.Logf))

	floorV, floorM := "validate.floor.bench.gauntlet.dev", "mutate.floor.bench.gauntlet.dev"
	opV, opM := dynamo.GraphDeploymentValidatingWebhook, dynamo.GraphDeploymentMutatingWebhook
	before := webhookCalls(ctx, t, kube)
	warned := &warningRecorder{}
	recording := rest.CopyConfig(cfg)
	recording.WarningHandlerWithContext = warned
	recorded, err := dynamic.NewForConfig(recording)
	require.NoError(t, err)
	got, err := recorded.Resource(dynamo.GraphDeployments).Namespace(FloorNamespace).Create(ctx,
		dynamo.GraphDeployment(FloorNamespace, "bench-floor-1"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
	after := webhookCalls(ctx, t, kube)

	assert.NotContains(t, got.GetAnnotations(), dynamo.OriginVersionAnnotation, "the operator's mutating webhook stamped the object")
	assert.Empty(t, warned.take(), "warnings on a measured request")
	calls := map[string]float64{}
	for _, name := range []string{floorV, floorM, opV, opM} {
		calls[name] = after.Sum("apiserver_admission_webhook_request_total", map[string]string{"name": name}) -
			before.Sum("apiserver_admission_webhook_request_total", map[string]string{"name": name})
	}
	assert.Equal(t, map[string]float64{floorV: 1, floorM: 1, opV: 0, opM: 0}, calls,
		"calls of each webhook the API server counted for one dry-run create in %s", FloorNamespace)
}

// webhookCalls scrapes the API server's metrics, which count its calls of
// each webhook (apiserver_admission_webhook_request_total by name).
func webhookCalls(ctx context.Context, t *testing.T, kube kubernetes.Interface) metrics.Samples {
	t.Helper()
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	require.NoError(t, err, "scraping the API server's /metrics")
	samples, err := metrics.ParseSamples(raw)
	require.NoError(t, err)
	return samples
}

// testWriter sends the local provider's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
