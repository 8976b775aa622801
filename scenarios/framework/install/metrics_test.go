package install

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkMetricsAccess runs against the two releases TestChartOnAPIServer installed ("dynamo" in
// platform, cluster-wide, and in teamA, restricted): each operator may create the TokenReviews
// and SubjectAccessReviews that authenticate and authorize a scraper, and MetricsReader's token
// is a ServiceAccount the API server authenticates and lets get /metrics.
func checkMetricsAccess(t *testing.T, s *apiServer, platform, teamA, operator string) {
	ctx := context.Background()
	for _, ns := range []string{platform, teamA} {
		s.assertCan(t, ns, operator, authorizationv1.ResourceAttributes{Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create"}, true,
			"the operator in %s authenticates scrapers", ns)
		s.assertCan(t, ns, operator, authorizationv1.ResourceAttributes{Group: "authorization.k8s.io", Resource: "subjectaccessreviews", Verb: "create"}, true,
			"the operator in %s authorizes scrapers", ns)
	}

	for _, rel := range []*Release{
		{Name: "dynamo", Namespace: platform},
		{Name: "dynamo", Namespace: teamA, Values: map[string]any{"namespaceRestriction": map[string]any{"enabled": true}}},
	} {
		r := NewMetricsReader(s.kube, rel)
		token, err := r.Token(ctx)
		require.NoError(t, err, "%s", rel)
		again, err := r.Token(ctx)
		require.NoError(t, err)
		assert.Equal(t, token, again, "the token is reused until half its lifetime is gone")

		review, err := s.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.True(t, review.Status.Authenticated, "%s: token not authenticated: %s", rel, review.Status.Error)
		user := review.Status.User
		assert.Equal(t, "system:serviceaccount:"+rel.Namespace+":"+MetricsScraper, user.Username)

		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user.Username, Groups: user.Groups,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		}}
		allowed := false
		for deadline := time.Now().Add(10 * time.Second); !allowed && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			answer, err := s.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			require.NoError(t, err)
			allowed = answer.Status.Allowed
		}
		assert.True(t, allowed, "%s: the scraper may not get /metrics", rel)
		binding, err := s.kube.RbacV1().ClusterRoleBindings().Get(ctx, rel.MetricsReaderName()+"-"+MetricsScraper, metav1.GetOptions{})
		require.NoError(t, err)
		require.Len(t, binding.OwnerReferences, 1)
		assert.Equal(t, rel.MetricsReaderName(), binding.OwnerReferences[0].Name, "uninstalling the release removes the binding")
	}
}

func TestSamplesOfAPrometheusExposition(t *testing.T) {
	samples, err := ParseSamples([]byte(`# HELP dynamo_webhook_requests_total Admission requests.
# TYPE dynamo_webhook_requests_total counter
dynamo_webhook_requests_total{webhook="validate",operation="CREATE",result="allowed"} 3
dynamo_webhook_requests_total{webhook="validate",operation="CREATE",result="denied"} 2
dynamo_webhook_requests_total{webhook="mutate",operation="CREATE",result="allowed"} 5
# TYPE dynamo_webhook_certificate_not_after_seconds gauge
dynamo_webhook_certificate_not_after_seconds 1.7e+09
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0.5"} 0.001
go_gc_duration_seconds_sum 0.1
go_gc_duration_seconds_count 7
`))
	require.NoError(t, err)
	assert.InDelta(t, 5.0, samples.Sum("dynamo_webhook_requests_total", map[string]string{"webhook": "validate"}), 0)
	assert.InDelta(t, 10.0, samples.Sum("dynamo_webhook_requests_total", nil), 0)
	assert.InDelta(t, 0.0, samples.Sum("dynamo_webhook_requests_total", map[string]string{"webhook": "convert"}), 0)
	v, ok := samples.Value("dynamo_webhook_certificate_not_after_seconds")
	assert.True(t, ok)
	assert.InDelta(t, 1.7e9, v, 0)
	_, ok = samples.Value("go_gc_duration_seconds")
	assert.False(t, ok, "summaries are not read")

	_, err = ParseSamples([]byte("not a metric line {"))
	require.ErrorContains(t, err, "parsing the metrics")
}
