package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
)

func service(mutate ...func(*v1alpha1.DynamoComponentDeploymentSharedSpec)) *v1alpha1.DynamoComponentDeploymentSharedSpec {
	s := sharedSpec(mutate...)
	return &s
}

func dgd(mutate ...func(*v1alpha1.DynamoGraphDeployment)) *v1alpha1.DynamoGraphDeployment {
	return mutated(&v1alpha1.DynamoGraphDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "my-graph"},
		Spec: v1alpha1.DynamoGraphDeploymentSpec{
			BackendFramework: "vllm",
			Services: map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
				"frontend": service(),
				"decode":   service(),
			},
		},
	}, mutate)
}

func pvc(mutate func(*v1alpha1.PVC)) v1alpha1.PVC {
	p := v1alpha1.PVC{
		Name:             ptr.To("models"),
		Create:           ptr.To(true),
		StorageClass:     "fast",
		Size:             ptr.To(resource.MustParse("100Gi")),
		VolumeAccessMode: "ReadWriteMany",
	}
	mutate(&p)
	return p
}

func restart(typ v1alpha1.RestartStrategyType, order ...string) func(*v1alpha1.DynamoGraphDeployment) {
	return func(d *v1alpha1.DynamoGraphDeployment) {
		d.Spec.Restart = &v1alpha1.Restart{ID: "r1", Strategy: &v1alpha1.RestartStrategy{Type: typ, Order: order}}
	}
}

func TestGraphDeploymentSharedRules(t *testing.T) {
	runSharedRuleCases(t, GraphDeployment(), "spec.services[decode]", func(mutate func(*v1alpha1.DynamoComponentDeploymentSharedSpec)) *v1alpha1.DynamoGraphDeployment {
		return dgd(func(d *v1alpha1.DynamoGraphDeployment) { mutate(d.Spec.Services["decode"]) })
	})
}

func TestGraphDeploymentCreate(t *testing.T) {
	runCreates(t, GraphDeployment(), []createCase[*v1alpha1.DynamoGraphDeployment]{
		{name: "A2/valid graph", obj: dgd()},
		{
			name: "A2/at least one service",
			obj:  dgd(func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.Services = nil }),
			want: []cause{{"spec.services", required}},
		},
		{
			name: "A2/pvc name required",
			obj: dgd(func(d *v1alpha1.DynamoGraphDeployment) {
				d.Spec.PVCs = []v1alpha1.PVC{pvc(func(p *v1alpha1.PVC) { p.Name = nil })}
			}),
			want: []cause{{"spec.pvcs[0].name", required}},
		},
		{
			name: "A2/pvc empty name",
			obj: dgd(func(d *v1alpha1.DynamoGraphDeployment) {
				d.Spec.PVCs = []v1alpha1.PVC{pvc(func(*v1alpha1.PVC) {}), pvc(func(p *v1alpha1.PVC) { p.Name = ptr.To("") })}
			}),
			want: []cause{{"spec.pvcs[1].name", required}},
		},
		{
			name: "A2/pvc to create needs storageClass size and volumeAccessMode",
			obj: dgd(func(d *v1alpha1.DynamoGraphDeployment) {
				d.Spec.PVCs = []v1alpha1.PVC{{Name: ptr.To("models"), Create: ptr.To(true)}}
			}),
			want: []cause{
				{"spec.pvcs[0].storageClass", required},
				{"spec.pvcs[0].size", required},
				{"spec.pvcs[0].volumeAccessMode", required},
			},
		},
		{
			name: "A2/existing pvc needs only a name",
			obj: dgd(func(d *v1alpha1.DynamoGraphDeployment) {
				d.Spec.PVCs = []v1alpha1.PVC{{Name: ptr.To("models")}, {Name: ptr.To("cache"), Create: ptr.To(false)}}
			}),
		},
		{
			name: "A2/restart id required",
			obj: dgd(func(d *v1alpha1.DynamoGraphDeployment) {
				d.Spec.Restart = &v1alpha1.Restart{}
			}),
			want: []cause{{"spec.restart.id", required}},
		},
		{
			name: "A2/restart order forbidden with Parallel",
			obj:  dgd(restart(v1alpha1.RestartStrategyParallel, "frontend", "decode")),
			want: []cause{{"spec.restart.strategy.order", forbidden}},
		},
		{name: "A2/restart Parallel without order", obj: dgd(restart(v1alpha1.RestartStrategyParallel))},
		{name: "A2/restart Sequential without order", obj: dgd(restart(v1alpha1.RestartStrategySequential))},
		{name: "A2/restart order covering every service", obj: dgd(restart(v1alpha1.RestartStrategySequential, "decode", "frontend"))},
		{
			name: "A2/restart order entries unique",
			obj:  dgd(restart(v1alpha1.RestartStrategySequential, "decode", "frontend", "decode")),
			want: []cause{{"spec.restart.strategy.order[2]", duplicate}},
		},
		{
			name: "A2/restart order names only services",
			obj:  dgd(restart(v1alpha1.RestartStrategySequential, "decode", "frontend", "prefill")),
			want: []cause{{"spec.restart.strategy.order[2]", notSupported}},
		},
		{
			name: "A2/restart order covers every service",
			obj:  dgd(restart(v1alpha1.RestartStrategySequential, "decode")),
			want: []cause{{"spec.restart.strategy.order", required}},
		},
		{
			name: "A2/graph and service name at the limit",
			obj: dgd(func(d *v1alpha1.DynamoGraphDeployment) {
				d.Name = strings.Repeat("g", 20)
				d.Spec.Services = map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{strings.Repeat("s", 25): service()}
			}),
		},
		{
			name: "A2/graph and service name too long",
			obj: dgd(func(d *v1alpha1.DynamoGraphDeployment) {
				d.Name = strings.Repeat("g", 20)
				d.Spec.Services = map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{
					strings.Repeat("s", 26): service(),
					"ok":                    service(),
				}
			}),
			want: []cause{{"spec.services[" + strings.Repeat("s", 26) + "]", tooLong}},
		},
		{
			name: "A2/generateName counts the generated suffix",
			obj: dgd(func(d *v1alpha1.DynamoGraphDeployment) {
				d.Name, d.GenerateName = "", strings.Repeat("g", 20)
				d.Spec.Services = map[string]*v1alpha1.DynamoComponentDeploymentSharedSpec{strings.Repeat("s", 21): service()}
			}),
			want: []cause{{"spec.services[" + strings.Repeat("s", 21) + "]", tooLong}},
		},
	})
}

func TestGraphDeploymentUpdate(t *testing.T) {
	multinode := func(name string) func(*v1alpha1.DynamoGraphDeployment) {
		return func(d *v1alpha1.DynamoGraphDeployment) {
			d.Spec.Services[name].Multinode = &v1alpha1.MultinodeSpec{NodeCount: 2}
		}
	}
	runUpdates(t, GraphDeployment(), []updateCase[*v1alpha1.DynamoGraphDeployment]{
		{
			name: "A3/unchanged services with new replicas and a restart",
			old:  dgd(),
			new: dgd(restart(v1alpha1.RestartStrategySequential, "frontend", "decode"), func(d *v1alpha1.DynamoGraphDeployment) {
				d.Spec.Services["decode"].Replicas = ptr.To[int32](4)
			}),
		},
		{
			name: "A3/backendFramework immutable",
			old:  dgd(),
			new:  dgd(func(d *v1alpha1.DynamoGraphDeployment) { d.Spec.BackendFramework = "trtllm" }),
			want: []cause{{"spec.backendFramework", immutableCT}},
			message: `DynamoGraphDeployment team-a/my-graph is invalid: ` +
				`spec.backendFramework: Invalid value: "trtllm": field is immutable (was "vllm")`,
		},
		{
			name: "A3/services cannot be added",
			old:  dgd(),
			new: dgd(func(d *v1alpha1.DynamoGraphDeployment) {
				d.Spec.Services["prefill"] = service()
				d.Spec.Services["encode"] = service()
			}),
			want: []cause{{"spec.services", forbidden}},
			message: `DynamoGraphDeployment team-a/my-graph is invalid: ` +
				`spec.services: Forbidden: services cannot be added after creation; added: encode, prefill`,
		},
		{
			name: "A3/services cannot be removed",
			old: dgd(func(d *v1alpha1.DynamoGraphDeployment) {
				d.Spec.Services["prefill"] = service()
				d.Spec.Services["encode"] = service()
			}),
			new:  dgd(),
			want: []cause{{"spec.services", forbidden}},
			message: `DynamoGraphDeployment team-a/my-graph is invalid: ` +
				`spec.services: Forbidden: services cannot be removed after creation; removed: encode, prefill`,
		},
		{
			name: "A3/services renamed lists both sides",
			old:  dgd(),
			new: dgd(func(d *v1alpha1.DynamoGraphDeployment) {
				d.Spec.Services["worker"] = d.Spec.Services["decode"]
				delete(d.Spec.Services, "decode")
			}),
			want: []cause{{"spec.services", forbidden}, {"spec.services", forbidden}},
		},
		{
			name: "A3/single-node service cannot become multinode",
			old:  dgd(),
			new:  dgd(multinode("decode")),
			want: []cause{{"spec.services[decode].multinode", immutableCT}},
			message: `DynamoGraphDeployment team-a/my-graph is invalid: spec.services[decode].multinode: Invalid value: "multinode": ` +
				`field is immutable: a service cannot switch between single-node and multinode (was single-node)`,
		},
		{
			name: "A3/multinode service cannot become single-node",
			old:  dgd(multinode("decode")),
			new:  dgd(),
			want: []cause{{"spec.services[decode].multinode", immutableCT}},
		},
		{
			name: "A3/multinode node count may change",
			old:  dgd(multinode("decode")),
			new: dgd(func(d *v1alpha1.DynamoGraphDeployment) {
				d.Spec.Services["decode"].Multinode = &v1alpha1.MultinodeSpec{NodeCount: 4}
			}),
		},
		{
			name: "A2/graph rules still apply on update",
			old:  dgd(),
			new:  dgd(restart(v1alpha1.RestartStrategyParallel, "frontend", "decode")),
			want: []cause{{"spec.restart.strategy.order", forbidden}},
		},
	})
}
