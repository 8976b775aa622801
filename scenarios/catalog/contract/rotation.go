package contract

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/certmanager"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// How many rotations W8 sees: with rotation values, the operator's own after the first
// certificate made under them; with a procedure, each one triggered.
const (
	valueRotations     = 2
	procedureRotations = 2
)

// restoreTimeout bounds the wait, after W8 restores the mode's values, for the target to serve a
// certificate of the mode's lifetime again and for its webhooks to judge their probes.
const restoreTimeout = 3 * time.Minute

// rotationUnderLoad is W8: in a mode whose description says how to rotate the serving
// certificate, the certificate rotates under a constant load of judged admissions and none of
// them fails. Rotation values: the target is upgraded with them and its Secret deleted once, so
// that its first certificate is made under them; then the operator rotates on its own. A
// procedure (deleteSecret, renewCertificate) is carried out, each time. Every rotation must be
// served through the Service within the time the description documents. The mode's values are
// restored afterwards, even when the check failed, for the checks after it.
func rotationUnderLoad() e2etypes.Feature {
	var ns string
	var upgraded bool
	var before *x509.Certificate
	return features.New(fmt.Sprintf("the serving certificate rotates under %d admissions per second and no admission fails", loadRate)).
		WithLabel(suite.LabelScenario, "W8").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			it := suite.TargetFrom(ctx, t)
			if it.Target.CertModes.Mode(it.Mode).Rotation == nil {
				expect.Skipf(t, "target %s declares no rotation in mode %s (certModes.%s.rotation)", it.Target.Name, it.Mode, it.Mode)
			}
			ns = suite.Namespace(ctx, t, "w8")
			return ctx
		}).
		Assess(fmt.Sprintf("every rotation is served within the documented time, under %d judged admissions per second", loadRate), func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			rot := it.Target.CertModes.Mode(it.Mode).Rotation
			f := rotationFollower{c: c, it: it, within: rot.WithinDuration(), seen: map[string]bool{}}
			before = f.current(ctx, t)
			l := startProbeLoad(ctx, t, c, it, ns)
			defer func() {
				finishLoad(ctx, t, l, fmt.Sprintf("through %d rotations (%s)", len(f.took), describeRotation(rot)))
				suite.Note(ctx, t, "rotations", len(f.took))
				suite.Note(ctx, t, "rotationSeconds", f.took)
			}()
			switch {
			case rot.Values != nil:
				upgraded = true
				expect.NoError(t, suite.UpgradeTarget(ctx, t, rot.Values), "upgrading target %s with its %s", it.Target.Name, describeRotation(rot))
				deleteServingSecret(ctx, t, it, "so that the operator makes its first certificate under the rotation values")
				f.next(ctx, t, "the first certificate made under the rotation values, after the Secret was deleted")
				f.took = nil // the deletion started the rotations; the operator's own are counted
				for i := range valueRotations {
					f.next(ctx, t, fmt.Sprintf("rotation %d/%d, the operator's own under %s", i+1, valueRotations, describeRotation(rot)))
				}
			case rot.Procedure == target.DeleteSecret:
				for i := range procedureRotations {
					deleteServingSecret(ctx, t, it, fmt.Sprintf("(rotation %d/%d)", i+1, procedureRotations))
					f.next(ctx, t, fmt.Sprintf("rotation %d/%d, Secret %s deleted", i+1, procedureRotations, it.Served.Secret))
				}
			case rot.Procedure == target.RenewCertificate:
				cfg := c.RESTConfig()
				name, err := certmanager.CertificateFor(ctx, cfg, it.Namespace, it.Served.Secret)
				expect.NoError(t, err, "finding the Certificate that issues Secret %s/%s", it.Namespace, it.Served.Secret)
				revision, err := certmanager.WaitIssued(ctx, cfg, it.Namespace, name, 0, f.within)
				expect.NoError(t, err, "before the renewals")
				for i := range procedureRotations {
					expect.NoError(t, certmanager.Renew(ctx, cfg, it.Namespace, name, "gauntlet W8"), "renewal %d/%d", i+1, procedureRotations)
					f.next(ctx, t, fmt.Sprintf("renewal %d/%d of Certificate %s/%s (its Issuing condition set, as `cmctl renew` does)", i+1, procedureRotations, it.Namespace, name))
					revision, err = certmanager.WaitIssued(ctx, cfg, it.Namespace, name, revision, f.within)
					expect.NoError(t, err, "after renewal %d/%d", i+1, procedureRotations)
				}
			default:
				expect.Fatalf(t, "certModes.%s.rotation of target %s: unknown procedure %q", it.Mode, it.Target.Name, rot.Procedure)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if !upgraded {
				return ctx
			}
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			expect.NoError(t, suite.UpgradeTarget(ctx, t, nil), "restoring target %s with the values of mode %s", it.Target.Name, it.Mode)
			lifetime := before.NotAfter.Sub(before.NotBefore)
			what := fmt.Sprintf("Service %s/%s to serve a certificate of the mode's lifetime again (at least half of the %s of the one served before W8) after restoring the values of mode %s",
				it.Namespace, it.Served.Service, lifetime, it.Mode)
			expect.Eventually(ctx, t, what, restoreTimeout, func(ctx context.Context) (bool, string, error) {
				leaf, err := servedLeaf(ctx, c, it)
				if err != nil {
					return false, err.Error(), nil
				}
				return leaf.NotAfter.Sub(leaf.NotBefore) >= lifetime/2, pki.Describe(leaf).String(), nil
			})
			expectJudged(ctx, t, c, judgedProbes(t, it), ns, restoreTimeout, "after the restore")
			return ctx
		}).
		Feature()
}

// rotationFollower sees the certificate the webhook Service serves change: a rotation is a
// certificate not served before. With several replicas the Service may answer from a pod that
// has not loaded the newest one yet; a certificate seen once is never a rotation again.
type rotationFollower struct {
	c      *suite.Cluster
	it     *target.Installed
	within time.Duration
	seen   map[string]bool // serials served so far
	last   *x509.Certificate
	took   []float64 // seconds from each trigger until the new certificate was served
}

// current records the certificate served now and returns it.
func (f *rotationFollower) current(ctx context.Context, t *testing.T) *x509.Certificate {
	t.Helper()
	leaf, err := servedLeaf(ctx, f.c, f.it)
	expect.NoError(t, err, "reading the certificate Service %s/%s serves", f.it.Namespace, f.it.Served.Service)
	f.seen[pki.SerialHex(leaf)] = true
	f.last = leaf
	return leaf
}

// next waits, within the documented time, until the Service serves a certificate it has not
// served before; which says which rotation that is.
func (f *rotationFollower) next(ctx context.Context, t *testing.T, which string) {
	t.Helper()
	start := time.Now()
	what := fmt.Sprintf("Service %s/%s to serve a new certificate for %s within %s, the rotation time target %s documents in mode %s (serving before: %s)",
		f.it.Namespace, f.it.Served.Service, which, f.within, f.it.Target.Name, f.it.Mode, pki.Describe(f.last))
	expect.Eventually(ctx, t, what, f.within, func(ctx context.Context) (bool, string, error) {
		leaf, err := servedLeaf(ctx, f.c, f.it)
		if err != nil {
			return false, err.Error(), nil
		}
		if f.seen[pki.SerialHex(leaf)] {
			return false, "served " + pki.Describe(leaf).String(), nil
		}
		f.seen[pki.SerialHex(leaf)] = true
		f.last = leaf
		return true, "", nil
	})
	f.took = append(f.took, math.Round(time.Since(start).Seconds()*1000)/1000)
	t.Logf("%s: served %s after %.1fs", which, pki.Describe(f.last), time.Since(start).Seconds())
}

// servedLeaf is the certificate the target's webhook Service serves.
func servedLeaf(ctx context.Context, c *suite.Cluster, it *target.Installed) (*x509.Certificate, error) {
	chain, err := c.ServedCertificates(ctx, it.Namespace, it.Served.Service, it.Served.ServicePort)
	if err != nil {
		return nil, err
	}
	return chain[0], nil
}

// deleteServingSecret deletes the target's serving Secret; why says what for.
func deleteServingSecret(ctx context.Context, t *testing.T, it *target.Installed, why string) {
	t.Helper()
	err := suite.ClusterFrom(ctx, t).Kube().CoreV1().Secrets(it.Namespace).Delete(ctx, it.Served.Secret, metav1.DeleteOptions{})
	expect.NoError(t, err, "deleting Secret %s/%s %s", it.Namespace, it.Served.Secret, why)
}

// describeRotation says how a rotation is caused, for messages.
func describeRotation(r *target.Rotation) string {
	if r.Values != nil {
		values, _ := json.Marshal(r.Values) // it came from YAML: it marshals
		return "rotation values " + string(values)
	}
	return "procedure " + r.Procedure
}
