package validation

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

func dgdr(mutate ...func(*v1beta1.DynamoGraphDeploymentRequest)) *v1beta1.DynamoGraphDeploymentRequest {
	return mutated(&v1beta1.DynamoGraphDeploymentRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "profile-llama"},
		Spec: v1beta1.DynamoGraphDeploymentRequestSpec{
			Model:          "meta-llama/Llama-3-8B",
			Backend:        v1beta1.BackendVLLM,
			Image:          "nvcr.io/dynamo/profiler:1.0",
			SearchStrategy: v1beta1.SearchStrategyThorough,
			SLA:            &v1beta1.SLA{TTFTMilliseconds: 200, ITLMilliseconds: 20},
		},
	}, mutate)
}

func inPhase(p v1beta1.Phase) func(*v1beta1.DynamoGraphDeploymentRequest) {
	return func(r *v1beta1.DynamoGraphDeploymentRequest) { r.Status.Phase = p }
}

func TestGraphDeploymentRequest(t *testing.T) {
	v := GraphDeploymentRequest()
	ctx := context.Background()
	autoThorough := func(r *v1beta1.DynamoGraphDeploymentRequest) {
		r.Spec.Backend, r.Spec.SearchStrategy = v1beta1.BackendAuto, v1beta1.SearchStrategyThorough
	}
	runCreates(t, v, []createCase[*v1beta1.DynamoGraphDeploymentRequest]{
		{name: "A6/thorough with a concrete backend", obj: dgdr()},
		{
			name: "A6/rapid with backend auto",
			obj: dgdr(func(r *v1beta1.DynamoGraphDeploymentRequest) {
				r.Spec.Backend, r.Spec.SearchStrategy = v1beta1.BackendAuto, v1beta1.SearchStrategyRapid
			}),
		},
		{name: "A6/thorough with backend auto rejected", obj: dgdr(autoThorough), want: []cause{{"spec.backend", invalid}}},
	})

	newSLA := func(r *v1beta1.DynamoGraphDeploymentRequest) { r.Spec.SLA.TTFTMilliseconds = 100 }
	runUpdates(t, v, []updateCase[*v1beta1.DynamoGraphDeploymentRequest]{
		{name: "A6/spec may change while Pending", old: dgdr(inPhase(v1beta1.PhasePending)), new: dgdr(newSLA)},
		{name: "A6/spec may change while Failed", old: dgdr(inPhase(v1beta1.PhaseFailed)), new: dgdr(newSLA)},
		{name: "A6/spec may change without a phase", old: dgdr(), new: dgdr(newSLA)},
		{
			name: "A6/spec immutable while Profiling",
			old:  dgdr(inPhase(v1beta1.PhaseProfiling)),
			new:  dgdr(newSLA),
			want: []cause{{"spec", immutableCT}},
		},
		{
			name: "A6/spec immutable while Deploying",
			old:  dgdr(inPhase(v1beta1.PhaseDeploying)),
			new:  dgdr(func(r *v1beta1.DynamoGraphDeploymentRequest) { r.Spec.AutoApply = true }),
			want: []cause{{"spec", immutableCT}},
		},
		{
			name: "A6/spec immutable while Deployed",
			old:  dgdr(inPhase(v1beta1.PhaseDeployed)),
			new:  dgdr(func(r *v1beta1.DynamoGraphDeploymentRequest) { r.Spec.Image = "nvcr.io/dynamo/profiler:2.0" }),
			want: []cause{{"spec", immutableCT}},
		},
		{
			name: "A6/metadata may change while Deployed",
			old:  dgdr(inPhase(v1beta1.PhaseDeployed)),
			new: dgdr(inPhase(v1beta1.PhaseDeployed), func(r *v1beta1.DynamoGraphDeploymentRequest) {
				r.Labels = map[string]string{"team": "a"}
			}),
		},
		{
			name: "A6/thorough with backend auto rejected on update",
			old:  dgdr(),
			new:  dgdr(autoThorough),
			want: []cause{{"spec.backend", invalid}},
		},
	})

	t.Run("A6/locked-phase message names the phase", func(t *testing.T) {
		_, err := v.ValidateUpdate(ctx, dgdr(inPhase(v1beta1.PhaseProfiling)), dgdr(newSLA))
		require.EqualError(t, err, "DynamoGraphDeploymentRequest team-a/profile-llama is invalid: spec: Invalid value: "+
			"field is immutable while the request is Profiling (the spec is locked while Profiling, Deploying or Deployed)")
	})
}
