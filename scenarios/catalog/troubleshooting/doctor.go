package troubleshooting

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/doctor"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// The doctor is the operator module's kubectl plugin `kubectl dynamo doctor`, which knows the
// suite's release layout; the framework (doctor.Dynamo) builds and runs it as users do and
// reads its JSON report.

// doctorRepollPause is the pause between doctor runs while waiting for a healthy verdict.
const doctorRepollPause = time.Second

// doctorTarget is the release a doctor run examines and where it dry-runs objects.
type doctorTarget struct {
	release, namespace string
	// testNamespace is passed as --test-namespace; empty lets the doctor choose (the
	// restricted namespace, else "default").
	testNamespace string
}

func targetOf(r *chart.Release, testNamespace string) doctorTarget {
	return doctorTarget{release: r.Name, namespace: r.Namespace, testNamespace: testNamespace}
}

// args are the doctor's command line for the cluster at kubeconfig (doctor.ConnectArgs says how
// it reaches the webhook from this machine).
func (d doctorTarget) args(kubeconfig string, serviceNetworkFromHost bool) []string {
	args := []string{"doctor", "--kubeconfig", kubeconfig, "--release", d.release, "--namespace", d.namespace,
		"-o", "json", "--timeout", (doctor.RunTimeout - 10*time.Second).String()}
	if d.testNamespace != "" {
		args = append(args, "--test-namespace", d.testNamespace)
	}
	return append(args, doctor.ConnectArgs(serviceNetworkFromHost)...)
}

// runDoctor runs `kubectl dynamo doctor -o json` against the cluster.
func runDoctor(ctx context.Context, t testing.TB, c *suite.Cluster, target doctorTarget) (doctor.Report, error) {
	t.Helper()
	return doctor.Dynamo.Run(ctx, t.Logf, target.args(c.KubeconfigPath(), c.ServiceNetworkFromHost())...)
}

// expectDoctorNames runs the doctor and checks that it exits unhealthy naming exactly one root
// cause: the troubleshooting scenario id, found by check. Consequential failures (checks
// that fail because of that cause) are expected and reported as such by the doctor.
func expectDoctorNames(ctx context.Context, t *testing.T, c *suite.Cluster, target doctorTarget, id, check string) doctor.Report {
	t.Helper()
	rep, err := runDoctor(ctx, t, c, target)
	expect.NoError(t, err, "running the doctor for release %s/%s", target.namespace, target.release)
	t.Logf("doctor: %s", rep)
	checkDoctorNames(t, rep, target, id, check)
	suite.Note(ctx, t, doctor.DiagnosisNote, []doctor.Diagnosis{doctor.Dynamo.Diagnose(rep, check)})
	return rep
}

// checkDoctorNames is expectDoctorNames' verdict on a report already taken.
func checkDoctorNames(t *testing.T, rep doctor.Report, target doctorTarget, id, check string) {
	t.Helper()
	want := check + " (" + id + ")"
	if rep.ExitCode != doctor.ExitUnhealthy {
		expect.Errorf(t, "doctor for release %s/%s: expected exit status %d (unhealthy), saw %d: %s",
			target.namespace, target.release, doctor.ExitUnhealthy, rep.ExitCode, rep)
	}
	if names := rep.RootNames(); !slices.Equal(names, []string{want}) {
		expect.Errorf(t, "doctor for release %s/%s: expected exactly one root cause, %s, saw %d: [%s] (%s)",
			target.namespace, target.release, want, len(names), strings.Join(names, ", "), rep)
	}
}

// expectDoctorHealthy waits until the doctor exits 0 with every check passed: the cluster is
// healthy again after a fix or a teardown.
func expectDoctorHealthy(ctx context.Context, t *testing.T, c *suite.Cluster, target doctorTarget, timeout time.Duration) {
	t.Helper()
	_, err := doctor.Dynamo.Build(ctx, t.Logf)
	expect.NoError(t, err, "preparing the doctor")
	what := fmt.Sprintf("the doctor to find release %s/%s healthy (exit 0, every check ✓)", target.namespace, target.release)
	expect.Eventually(ctx, t, what, timeout, func(ctx context.Context) (bool, string, error) {
		rep, err := runDoctor(ctx, t, c, target)
		if err == nil && rep.Healthy() {
			return true, "", nil
		}
		seen := rep.String()
		if err != nil {
			seen = err.Error()
		}
		// A doctor run is dozens of API calls and two dry-runs: look again after a pause
		// rather than at the poll rate meant for single reads.
		select {
		case <-ctx.Done():
		case <-time.After(doctorRepollPause):
		}
		return false, seen, nil
	})
}

// doctorNames is the assessment every scenario makes after injecting its fault: the doctor,
// run against the suite's release with *ns as its test namespace, names exactly check (the
// documented cause id) as the one root cause. ns is read when the step runs, after Setup set it.
func doctorNames(ns *string, id, check string) (string, features.Func) {
	return fmt.Sprintf("the doctor names %s (%s) as the one root cause", id, check),
		suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			expectDoctorNames(ctx, t, c, targetOf(r, *ns), id, check)
			return ctx
		})
}
