package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
	"github.com/gauntlet-dev/gauntlet/operator/internal/metrics"
)

const (
	vDCD   = "vdynamocomponentdeployment.nvidia.com"
	vDGD   = "vdynamographdeployment.nvidia.com"
	vModel = "vdynamomodel.nvidia.com"
	vDGDR  = "vdynamographdeploymentrequest.nvidia.com"
)

func TestA1SharedComponentRules(t *testing.T) {
	ns := namespace(t, "a1")
	ctx := reqCtx(t)

	t.Run("A1/valid DynamoComponentDeployment admitted", func(t *testing.T) {
		require.NoError(t, k8s.Create(ctx, dcd(ns, "ok")))
	})
	t.Run("A1/negative replicas denied", func(t *testing.T) {
		obj := dcd(ns, "negative")
		obj.Spec.Replicas = ptr.To[int32](-1)
		requireWebhookDenied(t, k8s.Create(ctx, obj), vDCD,
			"DynamoComponentDeployment a1/negative is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0")
	})
	t.Run("A1/ingress host required when enabled", func(t *testing.T) {
		obj := dcd(ns, "ingress")
		obj.Spec.Ingress = &v1alpha1.IngressSpec{Enabled: true}
		requireWebhookDenied(t, k8s.Create(ctx, obj), vDCD,
			"DynamoComponentDeployment a1/ingress is invalid: spec.ingress.host: Required value: required when ingress is enabled")
	})
	t.Run("A1/mountPoint required unless compilation cache", func(t *testing.T) {
		obj := dcd(ns, "mounts")
		obj.Spec.VolumeMounts = []v1alpha1.VolumeMount{{Name: "cache", UseAsCompilationCache: true}, {Name: "models"}}
		requireWebhookDenied(t, k8s.Create(ctx, obj), vDCD, "DynamoComponentDeployment a1/mounts is invalid: "+
			"spec.volumeMounts[1].mountPoint: Required value: required unless useAsCompilationCache is true")
	})
	t.Run("A1/shared memory size required unless disabled", func(t *testing.T) {
		obj := dcd(ns, "shm")
		obj.Spec.SharedMemory = &v1alpha1.SharedMemorySpec{}
		requireWebhookDenied(t, k8s.Create(ctx, obj), vDCD, "DynamoComponentDeployment a1/shm is invalid: "+
			"spec.sharedMemory.size: Required value: required unless sharedMemory.disabled is true")
		obj.Spec.SharedMemory = &v1alpha1.SharedMemorySpec{Size: ptr.To(resource.MustParse("1Gi"))}
		require.NoError(t, k8s.Create(ctx, obj))
	})
	t.Run("A1/vllm executor backend must be mp or ray (graph service)", func(t *testing.T) {
		obj := dgd(ns, "backend")
		obj.Spec.Services["decode"].Annotations = map[string]string{v1alpha1.VLLMDistributedExecutorBackendAnnotation: "mpi"}
		requireWebhookDenied(t, k8s.Create(ctx, obj), vDGD, "DynamoGraphDeployment a1/backend is invalid: "+
			`spec.services[decode].annotations[nvidia.com/vllm-distributed-executor-backend]: Unsupported value: "mpi": supported values: "mp", "ray"`)
		obj.Spec.Services["decode"].Annotations[v1alpha1.VLLMDistributedExecutorBackendAnnotation] = "ray"
		require.NoError(t, k8s.Create(ctx, obj))
	})
	t.Run("A1/deprecated fields admitted with warnings", func(t *testing.T) {
		obj := dcd(ns, "deprecated")
		obj.Spec.DynamoNamespace = ptr.To("legacy")
		obj.Spec.Autoscaling = &v1alpha1.Autoscaling{Enabled: true, MaxReplicas: 3}
		before := len(warnings.all())
		require.NoError(t, k8s.Create(ctx, obj))
		got := warnings.all()[before:]
		assert.Contains(t, got, "spec.dynamoNamespace is deprecated and ignored: the Dynamo namespace is derived from the graph")
		assert.Contains(t, got, "spec.autoscaling is deprecated: scale the component with an external autoscaler instead")
	})
}

func TestA2GraphCreate(t *testing.T) {
	ns := namespace(t, "a2")
	ctx := reqCtx(t)

	t.Run("A2/valid graph admitted", func(t *testing.T) {
		obj := dgd(ns, "ok")
		obj.Spec.PVCs = []v1alpha1.PVC{{Name: ptr.To("models"), Create: ptr.To(true), StorageClass: "fast",
			Size: ptr.To(resource.MustParse("10Gi")), VolumeAccessMode: "ReadWriteMany"}}
		obj.Spec.Restart = &v1alpha1.Restart{ID: "r1", Strategy: &v1alpha1.RestartStrategy{
			Type: v1alpha1.RestartStrategySequential, Order: []string{"frontend", "decode"}}}
		require.NoError(t, k8s.Create(ctx, obj))
	})
	t.Run("A2/at least one service", func(t *testing.T) {
		obj := dgd(ns, "empty")
		obj.Spec.Services = nil
		requireWebhookDenied(t, k8s.Create(ctx, obj), vDGD,
			"DynamoGraphDeployment a2/empty is invalid: spec.services: Required value: at least one service is required")
	})
	t.Run("A2/pvc fields required when create is true", func(t *testing.T) {
		obj := dgd(ns, "pvc")
		obj.Spec.PVCs = []v1alpha1.PVC{{Create: ptr.To(true)}}
		requireWebhookDenied(t, k8s.Create(ctx, obj), vDGD, "DynamoGraphDeployment a2/pvc is invalid: "+
			"spec.pvcs[0].name: Required value; "+
			"spec.pvcs[0].storageClass: Required value: required when create is true; "+
			"spec.pvcs[0].size: Required value: required when create is true; "+
			"spec.pvcs[0].volumeAccessMode: Required value: required when create is true")
	})
	t.Run("A2/restart order forbidden with Parallel", func(t *testing.T) {
		obj := dgd(ns, "parallel")
		obj.Spec.Restart = &v1alpha1.Restart{ID: "r1", Strategy: &v1alpha1.RestartStrategy{
			Type: v1alpha1.RestartStrategyParallel, Order: []string{"frontend", "decode"}}}
		requireWebhookDenied(t, k8s.Create(ctx, obj), vDGD, "DynamoGraphDeployment a2/parallel is invalid: "+
			"spec.restart.strategy.order: Forbidden: may not be set when the restart strategy type is Parallel")
	})
	t.Run("A2/restart id required and order unique and complete", func(t *testing.T) {
		obj := dgd(ns, "order")
		obj.Spec.Restart = &v1alpha1.Restart{Strategy: &v1alpha1.RestartStrategy{
			Type: v1alpha1.RestartStrategySequential, Order: []string{"decode", "decode"}}}
		requireWebhookDenied(t, k8s.Create(ctx, obj), vDGD, "DynamoGraphDeployment a2/order is invalid: "+
			"spec.restart.id: Required value; "+
			`spec.restart.strategy.order[1]: Duplicate value: "decode"; `+
			"spec.restart.strategy.order: Required value: must list every service exactly once; missing: frontend")
	})
	t.Run("A2/graph and service name at most 45 characters", func(t *testing.T) {
		name := strings.Repeat("g", 20)
		obj := dgd(ns, name)
		long := strings.Repeat("s", 26)
		obj.Spec.Services = map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{long: {}}
		err := k8s.Create(ctx, obj)
		requireWebhookDenied(t, err, vDGD, fmt.Sprintf("DynamoGraphDeployment a2/%s is invalid: spec.services[%s]: Too long: "+
			`graph name and service name together may not be more than 45 characters (%q + %q = 46): `+
			"resources derived from them must stay valid DNS labels", name, long, name, long))
	})

	t.Run("A9/denials carry causes and are logged and counted", func(t *testing.T) {
		denied := counterValue(metrics.WebhookRequests.WithLabelValues("validate-dynamographdeployment", "CREATE", metrics.ResultDenied))
		required := counterValue(metrics.WebhookDenials.WithLabelValues("validate-dynamographdeployment", "required"))
		obj := dgd(ns, "logged")
		obj.Spec.Services = nil
		err := k8s.Create(ctx, obj)
		require.Error(t, err)
		status, ok := err.(apierrors.APIStatus)
		require.True(t, ok, "%T", err)
		assert.EqualValues(t, http.StatusUnprocessableEntity, status.Status().Code)
		assert.Equal(t, metav1.StatusReasonInvalid, status.Status().Reason)
		require.NotNil(t, status.Status().Details)
		assert.Equal(t, []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueRequired,
			Message: "Required value: at least one service is required", Field: "spec.services"}}, status.Status().Details.Causes)

		assert.Equal(t, denied+1, counterValue(metrics.WebhookRequests.WithLabelValues("validate-dynamographdeployment", "CREATE", metrics.ResultDenied)))
		assert.Equal(t, required+1, counterValue(metrics.WebhookDenials.WithLabelValues("validate-dynamographdeployment", "required")))

		var found bool
		for _, line := range logLines(t, "validate create") {
			if line["name"] == "logged" && line["namespace"] == ns {
				found = true
				assert.Equal(t, "DynamoGraphDeployment", line["kind"])
				assert.Equal(t, metrics.ResultDenied, line["result"])
			}
		}
		assert.True(t, found, "no `validate create` log line for a2/logged")
		assert.NotEmpty(t, logLines(t, "Registering validation webhooks"))
		assert.NotEmpty(t, logLines(t, "Registering mutating webhooks"))
		assert.NotEmpty(t, logLines(t, "Registering conversion webhook"))
	})
}

func TestA3GraphUpdate(t *testing.T) {
	ns := namespace(t, "a3")
	ctx := reqCtx(t)
	created := dgd(ns, "graph")
	created.Spec.Services["prefill"] = &v1alpha1.DynamoComponentDeploymentSharedSpec{Multinode: &v1alpha1.MultinodeSpec{NodeCount: 2}}
	require.NoError(t, k8s.Create(ctx, created))
	fresh := func(t *testing.T) *v1alpha1.DynamoGraphDeployment {
		obj := &v1alpha1.DynamoGraphDeployment{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(created), obj))
		return obj
	}

	t.Run("A3/replicas may change", func(t *testing.T) {
		obj := fresh(t)
		obj.Spec.Services["decode"].Replicas = ptr.To[int32](4)
		require.NoError(t, k8s.Update(ctx, obj))
	})
	t.Run("A3/services cannot be added or removed", func(t *testing.T) {
		obj := fresh(t)
		obj.Spec.Services["encode"] = &v1alpha1.DynamoComponentDeploymentSharedSpec{}
		obj.Spec.Services["aux"] = &v1alpha1.DynamoComponentDeploymentSharedSpec{}
		delete(obj.Spec.Services, "frontend")
		requireWebhookDenied(t, k8s.Update(ctx, obj), vDGD, "DynamoGraphDeployment a3/graph is invalid: "+
			"spec.services: Forbidden: services cannot be added after creation; added: aux, encode; "+
			"spec.services: Forbidden: services cannot be removed after creation; removed: frontend")
	})
	t.Run("A3/single-node and multinode are fixed per service", func(t *testing.T) {
		obj := fresh(t)
		obj.Spec.Services["decode"].Multinode = &v1alpha1.MultinodeSpec{NodeCount: 2}
		obj.Spec.Services["prefill"].Multinode = nil
		requireWebhookDenied(t, k8s.Update(ctx, obj), vDGD, "DynamoGraphDeployment a3/graph is invalid: "+
			`spec.services[decode].multinode: Invalid value: "multinode": field is immutable: a service cannot switch between single-node and multinode (was single-node); `+
			`spec.services[prefill].multinode: Invalid value: "single-node": field is immutable: a service cannot switch between single-node and multinode (was multinode)`)
	})
	t.Run("A3/backendFramework immutable", func(t *testing.T) {
		obj := fresh(t)
		obj.Spec.BackendFramework = "sglang"
		// The CRD's CEL rule answers before validating webhooks run (A11) ...
		requireCELDenied(t, k8s.Update(ctx, obj), "backendFramework is immutable")
		// ... so ask the served webhook directly to show it enforces the rule too.
		resp := postReview(t, "/validate-nvidia-com-v1alpha1-dynamographdeployment", admissionv1.Update,
			metav1.GroupVersionKind{Group: "nvidia.com", Version: "v1alpha1", Kind: "DynamoGraphDeployment"}, obj, fresh(t))
		require.False(t, resp.Allowed)
		assert.Equal(t, `DynamoGraphDeployment a3/graph is invalid: spec.backendFramework: Invalid value: "sglang": field is immutable (was "vllm")`,
			resp.Result.Message)
	})
}

func TestA4ComponentUpdate(t *testing.T) {
	ns := namespace(t, "a4")
	ctx := reqCtx(t)
	created := dcd(ns, "decode")
	require.NoError(t, k8s.Create(ctx, created))
	current := &v1alpha1.DynamoComponentDeployment{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(created), current))

	t.Run("A4/other fields may change", func(t *testing.T) {
		obj := current.DeepCopy()
		obj.Spec.Image = "nvcr.io/dynamo/vllm:2"
		require.NoError(t, k8s.Update(ctx, obj))
		current = obj
	})
	t.Run("A4/backendFramework immutable", func(t *testing.T) {
		obj := current.DeepCopy()
		obj.Spec.BackendFramework = "trtllm"
		requireCELDenied(t, k8s.Update(ctx, obj), "backendFramework is immutable")
		resp := postReview(t, "/validate-nvidia-com-v1alpha1-dynamocomponentdeployment", admissionv1.Update,
			metav1.GroupVersionKind{Group: "nvidia.com", Version: "v1alpha1", Kind: "DynamoComponentDeployment"}, obj, current)
		require.False(t, resp.Allowed)
		assert.EqualValues(t, http.StatusUnprocessableEntity, resp.Result.Code)
		assert.Equal(t, `DynamoComponentDeployment a4/decode is invalid: spec.backendFramework: Invalid value: "trtllm": field is immutable (was "vllm")`,
			resp.Result.Message)
	})
}

func TestA5Model(t *testing.T) {
	ns := namespace(t, "a5")
	ctx := reqCtx(t)

	t.Run("A5/valid models admitted", func(t *testing.T) {
		require.NoError(t, k8s.Create(ctx, model(ns, "base")))
		lora := model(ns, "lora")
		lora.Spec.ModelType = v1alpha1.ModelTypeLoRA
		lora.Spec.Source = &v1alpha1.ModelSource{URI: "hf://org/adapter"}
		require.NoError(t, k8s.Create(ctx, lora))
	})
	t.Run("A5/modelName and baseModelName required", func(t *testing.T) {
		obj := model(ns, "empty")
		obj.Spec.ModelName, obj.Spec.BaseModelName = "", ""
		requireWebhookDenied(t, k8s.Create(ctx, obj), vModel,
			"DynamoModel a5/empty is invalid: spec.modelName: Required value; spec.baseModelName: Required value")
	})
	t.Run("A5/lora source must be s3 or hf", func(t *testing.T) {
		obj := model(ns, "badlora")
		obj.Spec.ModelType = v1alpha1.ModelTypeLoRA
		obj.Spec.Source = &v1alpha1.ModelSource{URI: "gs://bucket/adapter"}
		requireWebhookDenied(t, k8s.Create(ctx, obj), vModel,
			`DynamoModel a5/badlora is invalid: spec.source.uri: Invalid value: "gs://bucket/adapter": a lora model's source must start with s3:// or hf://`)
	})
	t.Run("A5/modelType and baseModelName immutable", func(t *testing.T) {
		current := &v1alpha1.DynamoModel{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "base"}, current))
		obj := current.DeepCopy()
		obj.Spec.BaseModelName = "meta-llama/Llama-3-70B"
		requireCELDenied(t, k8s.Update(ctx, obj), "baseModelName is immutable")
		obj.Spec.ModelType = v1alpha1.ModelTypeLoRA
		obj.Spec.Source = &v1alpha1.ModelSource{URI: "s3://bucket/adapter"}
		resp := postReview(t, "/validate-nvidia-com-v1alpha1-dynamomodel", admissionv1.Update,
			metav1.GroupVersionKind{Group: "nvidia.com", Version: "v1alpha1", Kind: "DynamoModel"}, obj, current)
		require.False(t, resp.Allowed)
		assert.Equal(t, "DynamoModel a5/base is invalid: "+
			`spec.modelType: Invalid value: "lora": field is immutable (was "base"); `+
			`spec.baseModelName: Invalid value: "meta-llama/Llama-3-70B": field is immutable (was "meta-llama/Llama-3-8B")`,
			resp.Result.Message)
	})
}

func TestA6Request(t *testing.T) {
	ns := namespace(t, "a6")
	ctx := reqCtx(t)

	t.Run("A6/thorough search with backend auto denied (v1beta1)", func(t *testing.T) {
		obj := dgdr(ns, "auto")
		obj.Spec.Backend = v1beta1.BackendAuto
		requireWebhookDenied(t, k8s.Create(ctx, obj), vDGDR, `DynamoGraphDeploymentRequest a6/auto is invalid: spec.backend: Invalid value: "auto": `+
			"a thorough search measures one backend on real hardware: name sglang, trtllm or vllm, or use searchStrategy rapid")
	})
	t.Run("A6/the same request written as v1alpha1 is denied after conversion", func(t *testing.T) {
		obj := &v1alpha1.DynamoGraphDeploymentRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "auto-alpha"},
			Spec: v1alpha1.DynamoGraphDeploymentRequestSpec{Backend: "auto",
				ProfilingConfig: &v1alpha1.ProfilingConfig{UseAIConfigurator: ptr.To(false)}},
		}
		err := k8s.Create(ctx, obj)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `admission webhook "`+vDGDR+`" denied the request: DynamoGraphDeploymentRequest a6/auto-alpha is invalid: spec.backend`)
	})
	t.Run("A6/spec frozen while Profiling", func(t *testing.T) {
		obj := dgdr(ns, "locked")
		require.NoError(t, k8s.Create(ctx, obj))
		obj.Status.Phase = v1beta1.PhasePending
		require.NoError(t, k8s.Status().Update(ctx, obj))
		obj.Spec.SLA.TTFTMilliseconds = 150
		require.NoError(t, k8s.Update(ctx, obj), "spec may change while Pending")

		obj.Status.Phase = v1beta1.PhaseProfiling
		require.NoError(t, k8s.Status().Update(ctx, obj))
		old := obj.DeepCopy()
		obj.Spec.SLA.TTFTMilliseconds = 100
		requireCELDenied(t, k8s.Update(ctx, obj), "spec is immutable while the request is Profiling, Deploying or Deployed")
		resp := postReview(t, "/validate-nvidia-com-v1beta1-dynamographdeploymentrequest", admissionv1.Update,
			metav1.GroupVersionKind{Group: "nvidia.com", Version: "v1beta1", Kind: "DynamoGraphDeploymentRequest"}, obj, old)
		require.False(t, resp.Allowed)
		assert.Equal(t, "DynamoGraphDeploymentRequest a6/locked is invalid: spec: Invalid value: field is immutable while the request is Profiling "+
			"(the spec is locked while Profiling, Deploying or Deployed)", resp.Result.Message)

		labelled := old.DeepCopy()
		labelled.Labels = map[string]string{"team": "a"}
		require.NoError(t, k8s.Update(ctx, labelled), "metadata may change while Profiling")
	})
}

func TestA7Mutation(t *testing.T) {
	ns := namespace(t, "a7")
	ctx := reqCtx(t)

	t.Run("A7/graph stamped with the operator version once", func(t *testing.T) {
		obj := dgd(ns, "stamped")
		require.NoError(t, k8s.Create(ctx, obj))
		assert.Equal(t, operatorVersion, obj.Annotations[v1alpha1.OperatorOriginVersionAnnotation])

		// Updating (mutating webhook called again) leaves the stamp as it was.
		obj.Annotations[v1alpha1.OperatorOriginVersionAnnotation] = "v0.1.0"
		obj.Labels = map[string]string{"again": "yes"}
		require.NoError(t, k8s.Update(ctx, obj))
		got := &v1alpha1.DynamoGraphDeployment{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(obj), got))
		assert.Equal(t, "v0.1.0", got.Annotations[v1alpha1.OperatorOriginVersionAnnotation])
	})
	t.Run("A7/existing origin version kept on create", func(t *testing.T) {
		obj := dgd(ns, "preset")
		obj.Annotations = map[string]string{v1alpha1.OperatorOriginVersionAnnotation: "v0.0.1"}
		require.NoError(t, k8s.Create(ctx, obj))
		assert.Equal(t, map[string]string{v1alpha1.OperatorOriginVersionAnnotation: "v0.0.1"}, obj.Annotations)
	})
	t.Run("A7/only the annotation is patched: the schema judges the graph as it was sent", func(t *testing.T) {
		// A patch found by re-encoding the graph from the operator's Go types filled in a
		// volume mount's missing name with "" and a multinode's missing nodeCount with 0.
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment",
			"metadata": map[string]any{"namespace": ns, "name": "as-sent"},
			"spec": map[string]any{"backendFramework": "vllm", "services": map[string]any{"frontend": map[string]any{
				"replicas": int64(1), "volumeMounts": []any{map[string]any{"mountPoint": "/models"}}, "multinode": map[string]any{},
			}}},
		}}
		err := k8s.Create(ctx, obj)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "spec.services.frontend.volumeMounts[0].name: Required value")
		assert.Contains(t, err.Error(), "spec.services.frontend.multinode.nodeCount: Required value")
		assert.NotContains(t, err.Error(), "admission webhook")
	})
	t.Run("A7/request gets the default image (v1beta1)", func(t *testing.T) {
		obj := dgdr(ns, "image")
		obj.Spec.Image = ""
		require.NoError(t, k8s.Create(ctx, obj))
		assert.Equal(t, defaultImage, obj.Spec.Image)
		obj.Labels = map[string]string{"again": "yes"}
		require.NoError(t, k8s.Update(ctx, obj))
		assert.Equal(t, defaultImage, obj.Spec.Image)
	})
	t.Run("A7/request written as v1alpha1 gets the default image", func(t *testing.T) {
		obj := &v1alpha1.DynamoGraphDeploymentRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "image-alpha"},
			Spec:       v1alpha1.DynamoGraphDeploymentRequestSpec{Model: "m", Backend: "vllm"},
		}
		require.NoError(t, k8s.Create(ctx, obj))
		require.NotNil(t, obj.Spec.ProfilingConfig)
		assert.Equal(t, defaultImage, obj.Spec.ProfilingConfig.ProfilerImage)
		assert.Nil(t, obj.Spec.ProfilingConfig.UseAIConfigurator)
	})
	t.Run("A7/chosen image kept", func(t *testing.T) {
		obj := dgdr(ns, "chosen")
		require.NoError(t, k8s.Create(ctx, obj))
		assert.Equal(t, "nvcr.io/dynamo/profiler:1.0", obj.Spec.Image)
	})
}

func TestA8Conversion(t *testing.T) {
	ns := namespace(t, "a8")
	ctx := reqCtx(t)

	t.Run("A8/created as v1alpha1, read back as v1beta1 and v1alpha1", func(t *testing.T) {
		alpha := &v1alpha1.DynamoGraphDeploymentRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha", Labels: map[string]string{"team": "a"}},
			Spec: v1alpha1.DynamoGraphDeploymentRequestSpec{
				Model: "meta-llama/Llama-3-8B", Backend: "sglang", AutoApply: true,
				ProfilingConfig: &v1alpha1.ProfilingConfig{ProfilerImage: "img:2", UseAIConfigurator: ptr.To(true)},
				SLA:             &v1alpha1.SLA{TTFT: 300, ITL: 30},
			},
		}
		wantSpec := *alpha.Spec.DeepCopy()
		require.NoError(t, k8s.Create(ctx, alpha))
		alpha.Status.State = string(v1beta1.PhaseDeploying)
		require.NoError(t, k8s.Status().Update(ctx, alpha))

		beta := &v1beta1.DynamoGraphDeploymentRequest{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(alpha), beta))
		assert.Equal(t, v1beta1.DynamoGraphDeploymentRequestSpec{
			Model: "meta-llama/Llama-3-8B", Backend: v1beta1.BackendSGLang, Image: "img:2",
			SearchStrategy: v1beta1.SearchStrategyRapid, AutoApply: true,
			SLA: &v1beta1.SLA{TTFTMilliseconds: 300, ITLMilliseconds: 30},
		}, beta.Spec)
		assert.Equal(t, v1beta1.PhaseDeploying, beta.Status.Phase)
		assert.Equal(t, map[string]string{"team": "a"}, beta.Labels)
		assert.NotContains(t, beta.Annotations, v1alpha1.DGDRConversionAnnotation)

		again := &v1alpha1.DynamoGraphDeploymentRequest{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(alpha), again))
		assert.Equal(t, wantSpec, again.Spec)
		assert.Equal(t, string(v1beta1.PhaseDeploying), again.Status.State)
		assert.Equal(t, alpha.ObjectMeta, again.ObjectMeta)
	})

	t.Run("A8/created as v1beta1, written back through v1alpha1 unchanged", func(t *testing.T) {
		beta := dgdr(ns, "beta")
		beta.Spec.SearchStrategy = ""
		require.NoError(t, k8s.Create(ctx, beta))
		alpha := &v1alpha1.DynamoGraphDeploymentRequest{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(beta), alpha))
		assert.Nil(t, alpha.Spec.ProfilingConfig.UseAIConfigurator)
		alpha.Labels = map[string]string{"touched": "via-v1alpha1"}
		require.NoError(t, k8s.Update(ctx, alpha))

		got := &v1beta1.DynamoGraphDeploymentRequest{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(beta), got))
		assert.Equal(t, beta.Spec, got.Spec)
		assert.Equal(t, map[string]string{"touched": "via-v1alpha1"}, got.Labels)
	})
}

// TestA10BeingDeleted: an object admitted while another operator owned its namespace (so
// never validated by this one) is invalid by this operator's rules; once it is being deleted
// its finalizer can still be removed.
func TestA10BeingDeleted(t *testing.T) {
	ns := namespace(t, "a10")
	ctx := reqCtx(t)

	excluded.put(ns, true)
	obj := dgd(ns, "stuck")
	obj.Finalizers = []string{v1alpha1.DynamoGraphDeploymentFinalizer}
	obj.Spec.Restart = &v1alpha1.Restart{} // no id: invalid (A2)
	t.Run("M2/skipped while a namespace-restricted operator owns the namespace", func(t *testing.T) {
		skipped := counterValue(metrics.WebhookRequests.WithLabelValues("validate-dynamographdeployment", "CREATE", metrics.ResultSkipped))
		require.NoError(t, k8s.Create(ctx, obj))
		assert.Equal(t, skipped+1, counterValue(metrics.WebhookRequests.WithLabelValues("validate-dynamographdeployment", "CREATE", metrics.ResultSkipped)))
	})
	t.Run("M7/mutation skipped too", func(t *testing.T) {
		assert.NotContains(t, obj.Annotations, v1alpha1.OperatorOriginVersionAnnotation)
	})
	excluded.put(ns, false)

	t.Run("A10/an ordinary update is denied", func(t *testing.T) {
		labelled := obj.DeepCopy()
		labelled.Labels = map[string]string{"x": "y"}
		requireWebhookDenied(t, k8s.Update(ctx, labelled), vDGD,
			"DynamoGraphDeployment a10/stuck is invalid: spec.restart.id: Required value")
	})
	t.Run("A10/finalizer removal succeeds once deleting", func(t *testing.T) {
		require.NoError(t, k8s.Delete(ctx, obj))
		deleting := &v1alpha1.DynamoGraphDeployment{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(obj), deleting))
		require.NotNil(t, deleting.DeletionTimestamp)

		deleting.Finalizers = nil
		require.NoError(t, k8s.Update(ctx, deleting))
		err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), &v1alpha1.DynamoGraphDeployment{})
		assert.True(t, apierrors.IsNotFound(err), "object should be gone, got %v", err)
	})
}

// counterValue reads a counter. Its value is a whole number, so it is compared as an int, exactly.
func counterValue(c prometheus.Collector) int { return int(testutil.ToFloat64(c)) }
