package validation

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
)

// cause is what a test expects of one StatusCause.
type cause struct {
	field string
	typ   metav1.CauseType
}

const (
	required     = metav1.CauseTypeFieldValueRequired
	invalid      = metav1.CauseTypeFieldValueInvalid
	forbidden    = metav1.CauseType("FieldValueForbidden")
	duplicate    = metav1.CauseTypeFieldValueDuplicate
	notSupported = metav1.CauseTypeFieldValueNotSupported
	tooLong      = metav1.CauseType("FieldValueTooLong")
	immutableCT  = CauseTypeFieldValueImmutable
)

// requireOutcome asserts that err denies with exactly the wanted causes (in order), or admits
// when want is empty, and that the warnings contain each wanted substring.
func requireOutcome(t *testing.T, want []cause, wantWarnings []string, warnings admission.Warnings, err error) {
	t.Helper()
	if len(want) == 0 {
		require.NoError(t, err)
	} else {
		var status *apierrors.StatusError
		require.ErrorAs(t, err, &status)
		assert.Equal(t, metav1.StatusReasonInvalid, status.ErrStatus.Reason)
		assert.EqualValues(t, 422, status.ErrStatus.Code)
		require.NotNil(t, status.ErrStatus.Details)
		var got []cause
		for _, c := range status.ErrStatus.Details.Causes {
			got = append(got, cause{field: c.Field, typ: c.Type})
		}
		assert.Equal(t, want, got, "causes of: %v", err)
	}
	require.Len(t, warnings, len(wantWarnings), "warnings: %v", warnings)
	for i, w := range wantWarnings {
		assert.Contains(t, warnings[i], w)
	}
}

// createCase is one ValidateCreate case: obj is admitted, or denied with exactly the causes
// want and, when set, the message.
type createCase[T client.Object] struct {
	name    string
	obj     T
	want    []cause
	message string
}

// updateCase is one ValidateUpdate case: the change from old to new is admitted, or denied
// with exactly the causes want and, when set, the message.
type updateCase[T client.Object] struct {
	name     string
	old, new T
	want     []cause
	message  string
}

func runCreates[T client.Object](t *testing.T, v admission.Validator[T], cases []createCase[T]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			warnings, err := v.ValidateCreate(context.Background(), tc.obj)
			requireOutcome(t, tc.want, nil, warnings, err)
			if tc.message != "" {
				require.EqualError(t, err, tc.message)
			}
		})
	}
}

func runUpdates[T client.Object](t *testing.T, v admission.Validator[T], cases []updateCase[T]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			warnings, err := v.ValidateUpdate(context.Background(), tc.old, tc.new)
			requireOutcome(t, tc.want, nil, warnings, err)
			if tc.message != "" {
				require.EqualError(t, err, tc.message)
			}
		})
	}
}

// mutated applies each of mutate to obj, in order, and returns it: the fixtures' builders.
func mutated[T any](obj *T, mutate []func(*T)) *T {
	for _, m := range mutate {
		m(obj)
	}
	return obj
}

func sharedSpec(mutate ...func(*v1alpha1.DynamoComponentDeploymentSharedSpec)) v1alpha1.DynamoComponentDeploymentSharedSpec {
	return *mutated(&v1alpha1.DynamoComponentDeploymentSharedSpec{ComponentType: "worker", Replicas: ptr.To[int32](1)}, mutate)
}

func dcd(mutate ...func(*v1alpha1.DynamoComponentDeployment)) *v1alpha1.DynamoComponentDeployment {
	return mutated(&v1alpha1.DynamoComponentDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "decode"},
		Spec: v1alpha1.DynamoComponentDeploymentSpec{
			BackendFramework:                    "vllm",
			DynamoComponentDeploymentSharedSpec: sharedSpec(),
		},
	}, mutate)
}

// sharedRuleCases are A1: each mutation of a component's shared spec and the outcome at the
// given path prefix. They run against a DCD (prefix "spec") and a DGD service.
type sharedRuleCase struct {
	name         string
	mutate       func(*v1alpha1.DynamoComponentDeploymentSharedSpec)
	causes       func(prefix string) []cause
	wantWarnings []string
}

func sharedRuleCases() []sharedRuleCase {
	none := func(string) []cause { return nil }
	return []sharedRuleCase{
		{name: "A1/valid component", mutate: func(*v1alpha1.DynamoComponentDeploymentSharedSpec) {}, causes: none},
		{name: "A1/zero replicas allowed", mutate: func(s *v1alpha1.DynamoComponentDeploymentSharedSpec) { s.Replicas = ptr.To[int32](0) }, causes: none},
		{
			name:   "A1/negative replicas",
			mutate: func(s *v1alpha1.DynamoComponentDeploymentSharedSpec) { s.Replicas = ptr.To[int32](-1) },
			causes: func(p string) []cause { return []cause{{p + ".replicas", invalid}} },
		},
		{
			name: "A1/ingress enabled without host",
			mutate: func(s *v1alpha1.DynamoComponentDeploymentSharedSpec) {
				s.Ingress = &v1alpha1.IngressSpec{Enabled: true}
			},
			causes: func(p string) []cause { return []cause{{p + ".ingress.host", required}} },
		},
		{
			name:   "A1/ingress disabled without host",
			mutate: func(s *v1alpha1.DynamoComponentDeploymentSharedSpec) { s.Ingress = &v1alpha1.IngressSpec{} },
			causes: none,
		},
		{
			name: "A1/ingress enabled with host",
			mutate: func(s *v1alpha1.DynamoComponentDeploymentSharedSpec) {
				s.Ingress = &v1alpha1.IngressSpec{Enabled: true, Host: "llm.example.com"}
			},
			causes: none,
		},
		{
			name: "A1/volume mount without mountPoint",
			mutate: func(s *v1alpha1.DynamoComponentDeploymentSharedSpec) {
				s.VolumeMounts = []v1alpha1.VolumeMount{{Name: "models", MountPoint: "/models"}, {Name: "cache"}}
			},
			causes: func(p string) []cause { return []cause{{p + ".volumeMounts[1].mountPoint", required}} },
		},
		{
			name: "A1/compilation cache mount needs no mountPoint",
			mutate: func(s *v1alpha1.DynamoComponentDeploymentSharedSpec) {
				s.VolumeMounts = []v1alpha1.VolumeMount{{Name: "cache", UseAsCompilationCache: true}}
			},
			causes: none,
		},
		{
			name:   "A1/shared memory without size",
			mutate: func(s *v1alpha1.DynamoComponentDeploymentSharedSpec) { s.SharedMemory = &v1alpha1.SharedMemorySpec{} },
			causes: func(p string) []cause { return []cause{{p + ".sharedMemory.size", required}} },
		},
		{
			name: "A1/disabled shared memory needs no size",
			mutate: func(s *v1alpha1.DynamoComponentDeploymentSharedSpec) {
				s.SharedMemory = &v1alpha1.SharedMemorySpec{Disabled: true}
			},
			causes: none,
		},
		{
			name: "A1/shared memory with size",
			mutate: func(s *v1alpha1.DynamoComponentDeploymentSharedSpec) {
				s.SharedMemory = &v1alpha1.SharedMemorySpec{Size: ptr.To(resource.MustParse("8Gi"))}
			},
			causes: none,
		},
		{
			name: "A1/vllm executor backend ray",
			mutate: func(s *v1alpha1.DynamoComponentDeploymentSharedSpec) {
				s.Annotations = map[string]string{v1alpha1.VLLMDistributedExecutorBackendAnnotation: "ray"}
			},
			causes: none,
		},
		{
			name: "A1/vllm executor backend mp",
			mutate: func(s *v1alpha1.DynamoComponentDeploymentSharedSpec) {
				s.Annotations = map[string]string{v1alpha1.VLLMDistributedExecutorBackendAnnotation: "mp"}
			},
			causes: none,
		},
		{
			name: "A1/vllm executor backend unknown",
			mutate: func(s *v1alpha1.DynamoComponentDeploymentSharedSpec) {
				s.Annotations = map[string]string{v1alpha1.VLLMDistributedExecutorBackendAnnotation: "mpi"}
			},
			causes: func(p string) []cause {
				return []cause{{p + ".annotations[nvidia.com/vllm-distributed-executor-backend]", notSupported}}
			},
		},
		{
			name:         "A1/deprecated dynamoNamespace admitted with a warning",
			mutate:       func(s *v1alpha1.DynamoComponentDeploymentSharedSpec) { s.DynamoNamespace = ptr.To("legacy") },
			causes:       none,
			wantWarnings: []string{"dynamoNamespace is deprecated"},
		},
		{
			name: "A1/deprecated autoscaling admitted with a warning",
			mutate: func(s *v1alpha1.DynamoComponentDeploymentSharedSpec) {
				s.Autoscaling = &v1alpha1.Autoscaling{Enabled: true, MaxReplicas: 4}
			},
			causes:       none,
			wantWarnings: []string{"autoscaling is deprecated"},
		},
		{
			name: "A1/several violations are all reported",
			mutate: func(s *v1alpha1.DynamoComponentDeploymentSharedSpec) {
				s.Replicas = ptr.To[int32](-3)
				s.Ingress = &v1alpha1.IngressSpec{Enabled: true}
				s.SharedMemory = &v1alpha1.SharedMemorySpec{}
				s.DynamoNamespace = ptr.To("legacy")
			},
			causes: func(p string) []cause {
				return []cause{{p + ".replicas", invalid}, {p + ".ingress.host", required}, {p + ".sharedMemory.size", required}}
			},
			wantWarnings: []string{"dynamoNamespace is deprecated"},
		},
	}
}

// runSharedRuleCases runs sharedRuleCases through v, on create and on update from the
// unchanged object: withShared builds the object with mutate applied to the component spec at
// path prefix.
func runSharedRuleCases[T client.Object](t *testing.T, v admission.Validator[T], prefix string, withShared func(mutate func(*v1alpha1.DynamoComponentDeploymentSharedSpec)) T) {
	t.Helper()
	ctx := context.Background()
	unchanged := func(*v1alpha1.DynamoComponentDeploymentSharedSpec) {}
	for _, tc := range sharedRuleCases() {
		t.Run(tc.name+"/create", func(t *testing.T) {
			warnings, err := v.ValidateCreate(ctx, withShared(tc.mutate))
			requireOutcome(t, tc.causes(prefix), tc.wantWarnings, warnings, err)
		})
		t.Run(tc.name+"/update", func(t *testing.T) {
			warnings, err := v.ValidateUpdate(ctx, withShared(unchanged), withShared(tc.mutate))
			requireOutcome(t, tc.causes(prefix), tc.wantWarnings, warnings, err)
		})
	}
}

func TestComponentDeployment(t *testing.T) {
	v := ComponentDeployment()
	runSharedRuleCases(t, v, "spec", func(mutate func(*v1alpha1.DynamoComponentDeploymentSharedSpec)) *v1alpha1.DynamoComponentDeployment {
		return dcd(func(d *v1alpha1.DynamoComponentDeployment) { mutate(&d.Spec.DynamoComponentDeploymentSharedSpec) })
	})

	runUpdates(t, v, []updateCase[*v1alpha1.DynamoComponentDeployment]{
		{
			name: "A4/backendFramework change denied",
			old:  dcd(),
			new:  dcd(func(d *v1alpha1.DynamoComponentDeployment) { d.Spec.BackendFramework = "sglang" }),
			want: []cause{{"spec.backendFramework", immutableCT}},
		},
		{
			name: "A4/backendFramework cannot be cleared",
			old:  dcd(),
			new:  dcd(func(d *v1alpha1.DynamoComponentDeployment) { d.Spec.BackendFramework = "" }),
			want: []cause{{"spec.backendFramework", immutableCT}},
		},
		{
			name: "A4/other fields may change",
			old:  dcd(),
			new: dcd(func(d *v1alpha1.DynamoComponentDeployment) {
				d.Spec.Replicas = ptr.To[int32](5)
				d.Spec.Image = "nvcr.io/dynamo/vllm:1.2"
			}),
		},
	})
}
