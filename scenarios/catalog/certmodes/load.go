package certmodes

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/load"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// startAdmissionLoad starts perSecond server-side dry-run creates per second of a valid
// DynamoGraphDeployment in namespace ns (load.Start, open loop) until Stop. Each passes both
// webhooks; one fails when the API server refuses it or admits it without the annotation the
// mutating webhook adds.
func startAdmissionLoad(ctx context.Context, c *suite.Cluster, ns string, perSecond int) *load.Load {
	graphs := c.Dynamic().Resource(dynamo.GraphDeployments).Namespace(ns)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	return load.Start(ctx, perSecond, func(ctx context.Context, n int) error {
		got, err := graphs.Create(ctx, dynamo.GraphDeployment(ns, fmt.Sprintf("load-%d", n)), dry)
		if err != nil {
			return err
		}
		if _, ok := got.GetAnnotations()[dynamo.OriginVersionAnnotation]; !ok {
			return fmt.Errorf("admitted without annotation %s (mutating webhook not called)", dynamo.OriginVersionAnnotation)
		}
		return nil
	})
}
