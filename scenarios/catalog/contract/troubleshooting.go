package contract

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/doctor"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// W16 walks the troubleshooting symptoms of CATALOG.md §T that are not about one operator
// (T1, T2, T3, T6/T7, T8, T9) against any target, as a user meets them: the fault injected
// into what the target's chart rendered, each webhook's judging probe sent through the API
// server and its answer quoted verbatim in the report, the generic doctor (kubectl
// webhook-doctor) required to name the fault as its one root cause, then the fix — exactly
// what was changed put back, or the target's own repair timed — until every webhook judges
// its probe again. Each symptom restores what it changed before the next one starts, failed
// or not.

// The doctor's checks that name the symptoms (certificate-secret and ca-bundle: repair.go).
const (
	doctorCheckConfigurations = "webhook-configurations" // T1
	doctorCheckSelector       = "namespace-selector"     // T2
	doctorCheckService        = "webhook-service"        // T8
	doctorCheckEndpoints      = "service-endpoints"      // T6, T7
)

// symptomTimeout bounds how long the API server takes to act on a fault (its informers learn
// of a changed configuration, a deleted Service, endpoints gone within moments).
const symptomTimeout = time.Minute

// wrongBundlePropagation bounds one observation of a foreign caBundle: a target that repairs
// it (re-injects its CA) ends the observation early, and it is injected again.
const wrongBundlePropagation = 10 * time.Second

// maxWrongBundleAttempts bounds how often a foreign caBundle the target repairs is injected
// again because the repair came before one round of probes and one doctor run.
const maxWrongBundleAttempts = 5

// The label T2's namespaceSelector requires, which no namespace carries.
const (
	unmatchedLabel = "gauntlet.dev/w16-unmatched"
	unmatchedValue = "only-this"
)

// The stable parts of the API server's failed-call messages, as CATALOG.md §T quotes them.
var (
	unknownAuthority = regexp.MustCompile(regexp.QuoteMeta("x509: certificate signed by unknown authority"))
	// With no pod behind the Service the API server dials its ClusterIP, which refuses
	// (kube-proxy rejects a Service without endpoints); a resolver that picks endpoints says
	// there are none.
	operatorDown = regexp.MustCompile(`connect: connection refused|no endpoints available for service "[^"]+"`)
)

// serviceNotFound is T8's symptom for the target's Service.
func serviceNotFound(service string) *regexp.Regexp {
	return regexp.MustCompile(regexp.QuoteMeta(fmt.Sprintf("service %q not found", service)))
}

// symptomReport is what W16 notes of one symptom in the report, under its T-ID.
type symptomReport struct {
	Fault string `json:"fault"`
	// Seen is, by webhook, what the API server answered its judging probe under the fault,
	// its message verbatim.
	Seen map[string]string `json:"seen,omitempty"`
	// Doctor is the doctor's verdict under the fault.
	Doctor string `json:"doctor,omitempty"`
	Fix    string `json:"fix,omitempty"`
	// RecoveredAfter is the time from the fix until every webhook judged its probe again;
	// RepairedAfter, for a fault the target repairs itself, from the fault.
	RecoveredAfter string `json:"recoveredAfter,omitempty"`
	RepairedAfter  string `json:"repairedAfter,omitempty"`
	NotApplicable  string `json:"notApplicable,omitempty"`
}

// troubleshootingSymptoms is W16.
func troubleshootingSymptoms() e2etypes.Feature {
	var ns string
	d := &doctorRuns{ns: &ns}
	// symptom causes one fault and records what it showed in the report, under its T-ID.
	symptom := func(id string, fault func(context.Context, *testing.T, string, *symptomReport, *doctorRuns)) features.Func {
		return func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			r := &symptomReport{}
			defer func() { suite.Note(ctx, t, id, *r) }()
			fault(ctx, t, ns, r, d)
			return ctx
		}
	}
	return features.New("troubleshooting symptoms T1, T2, T3, T6/T7, T8, T9 made generic: the API server's answer, the doctor's diagnosis, the fix").
		WithLabel(suite.LabelScenario, "W16").
		Setup(suite.NamespaceSetup(&ns, "w16")).
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			it := suite.TargetFrom(ctx, t)
			rep := d.run(ctx, t)
			if rep.ExitCode != doctor.ExitHealthy {
				expect.Fatalf(t, "before any fault: expected the doctor to find target %s healthy (exit %d), so that what it names after one is that fault; saw %s",
					it.Target.Name, doctor.ExitHealthy, rep)
			}
			return ctx
		}).
		Assess("T1: a ValidatingWebhookConfiguration deleted: its webhooks' probes admitted unjudged; the doctor names webhook-configurations; re-created as it was", symptom("T1", deletedConfiguration)).
		Assess("T2: every namespaceSelector made to require a label the namespace lacks: probes admitted unjudged; the doctor names namespace-selector; the selectors put back", symptom("T2", unmatchedSelector)).
		Assess("T3: every caBundle from another CA: x509 unknown authority (Fail) or admitted unjudged (Ignore); the doctor names ca-bundle; repaired by the target or put back", symptom("T3", foreignBundle)).
		Assess("T6/T7: the Deployment scaled to 0: the API server's message quoted; the doctor names service-endpoints; scaled back", symptom("T6/T7", operatorScaledDown)).
		Assess(`T8: the webhook Service deleted: service "<name>" not found (Fail) or admitted unjudged (Ignore); the doctor names webhook-service; re-created as it was`, symptom("T8", deletedService)).
		Assess("T9: the webhook Service pointed at a proxy that delivers every byte sent to the webhook later than timeoutSeconds: context deadline exceeded (Fail) or admitted unjudged (Ignore); the doctor names T9; the selector put back, the proxy deleted", symptom("T9", slowWebhook)).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			expectAnswers(ctx, t, c, it, ns, time.Now().Add(answerTimeout))
			return ctx
		}).Feature()
}

// applyFix applies the symptom's documented fix (restore, doing what fix says; doing names it in
// a failure) and records how long the target's webhooks took to judge their probes again.
func (r *symptomReport) applyFix(ctx context.Context, t *testing.T, ns, fix string, restore func(context.Context) error, doing string) {
	t.Helper()
	c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
	r.Fix = fix
	fixed := time.Now()
	expect.NoError(t, restore(ctx), "%s", doing)
	expectAnswers(ctx, t, c, it, ns, time.Now().Add(answerTimeout))
	r.RecoveredAfter = since(fixed)
}

// doctorRuns runs the generic doctor against the target, with the symptoms' namespace as its
// test namespace, and keeps its diagnoses of the faults.
type doctorRuns struct {
	ns        *string
	diagnoses []doctor.Diagnosis
}

func (d *doctorRuns) run(ctx context.Context, t *testing.T) doctor.Report {
	t.Helper()
	c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
	rep, err := doctor.Webhook.Run(ctx, t.Logf, doctorArgs(c, it, *d.ns)...)
	expect.NoError(t, err, "running the doctor against target %s", it.Target.Name)
	t.Logf("doctor: %s", rep)
	return rep
}

// diagnose runs the doctor under fault and requires it to name check.
func (d *doctorRuns) diagnose(ctx context.Context, t *testing.T, r *symptomReport, fault, check string) {
	t.Helper()
	d.expectNames(ctx, t, r, fault, check, d.run(ctx, t))
}

// expectNames notes rep, a doctor run under fault, as its diagnosis (every diagnosis so far, in
// one note: a later note replaces an earlier one) and requires it to name check as its one
// root cause.
func (d *doctorRuns) expectNames(ctx context.Context, t *testing.T, r *symptomReport, fault, check string, rep doctor.Report) {
	t.Helper()
	d.expectNamesAs(ctx, t, r, fault, check, "", rep)
}

// expectNamesAs is expectNames requiring the root cause to be documented as troubleshooting
// scenario id too ("": any), for a check that can name several.
func (d *doctorRuns) expectNamesAs(ctx context.Context, t *testing.T, r *symptomReport, fault, check, id string, rep doctor.Report) {
	t.Helper()
	r.Doctor = rep.String()
	d.diagnoses = append(d.diagnoses, doctor.Webhook.Diagnose(rep, check))
	suite.Note(ctx, t, doctor.DiagnosisNote, d.diagnoses)
	if seen := judgeDiagnosis(rep, check, id); seen != "" {
		expected := check
		if id != "" {
			expected = fmt.Sprintf("%s (%s)", check, id)
		}
		expect.Errorf(t, "%s: expected the doctor (kubectl webhook-doctor) to exit %d naming one root cause, %s; saw %s",
			fault, doctor.ExitUnhealthy, expected, seen)
	}
}

// judgeDiagnosis says how rep falls short of naming check as its one root cause, documented as
// scenario id unless id is "", or "".
func judgeDiagnosis(rep doctor.Report, check, id string) string {
	roots := rep.Roots()
	if rep.ExitCode == doctor.ExitUnhealthy && len(roots) == 1 && roots[0].ID == check && (id == "" || roots[0].Scenario == id) {
		return ""
	}
	return fmt.Sprintf("exit %d, root causes [%s] (%s)", rep.ExitCode, strings.Join(rep.RootNames(), ", "), rep)
}

// deletedConfiguration is T1: the target's first ValidatingWebhookConfiguration holding a probed
// webhook deleted.
func deletedConfiguration(ctx context.Context, t *testing.T, ns string, r *symptomReport, d *doctorRuns) {
	c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
	judged, _ := probedWebhooks(it)
	name := probedValidatingConfiguration(judged)
	if name == "" {
		r.NotApplicable = fmt.Sprintf("target %s registers no validating webhook with a probe, so no deleted configuration could show its symptom", it.Target.Name)
		expect.Skipf(t, "T1: %s", r.NotApplicable)
	}
	r.Fault = "kubectl delete validatingwebhookconfiguration " + name
	expectAnswers(ctx, t, c, it, ns, time.Now().Add(answerTimeout))
	api := c.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations()
	saved, err := api.Get(ctx, name, metav1.GetOptions{})
	expect.NoError(t, err, "getting ValidatingWebhookConfiguration %s", name)
	restore := once(func(ctx context.Context) error {
		if _, err := api.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return err // there (the target made it again), or unreadable
		}
		cfg := saved.DeepCopy()
		cfg.ObjectMeta = asCreated(saved.ObjectMeta)
		_, err := api.Create(ctx, cfg, metav1.CreateOptions{})
		return err
	})
	defer restoreOrFail(ctx, t, r.Fault, restore)
	err = api.Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(saved.UID))})
	expect.NoError(t, err, "deleting ValidatingWebhookConfiguration %s", name)

	var lost []probed
	for _, w := range judged {
		if w.Configuration == name {
			lost = append(lost, w)
		}
	}
	r.Seen = expectSymptom(ctx, t, c, it, ns, r.Fault, lost, judgeUnjudged, expectedUnjudged)
	d.diagnose(ctx, t, r, r.Fault, doctorCheckConfigurations)

	r.applyFix(ctx, t, ns, fmt.Sprintf("ValidatingWebhookConfiguration %s created again as it was read before the deletion", name), restore, fmt.Sprintf("creating ValidatingWebhookConfiguration %s again", name))
}

// probedValidatingConfiguration is the first ValidatingWebhookConfiguration, by name, that holds
// a webhook of judged: deleted, its probes show the symptom ("" when there is none). A target
// may register configurations whose webhooks the description does not probe (Kyverno's CEL
// exception webhooks); deleting one of those would show nothing.
func probedValidatingConfiguration(judged []probed) string {
	var names []string
	for _, w := range judged {
		if !w.Mutating {
			names = append(names, w.Configuration)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return slices.Min(names)
}

// unmatchedSelector is T2: every webhook's namespaceSelector made to require a label no
// namespace has, as a selector edited for another namespace would.
func unmatchedSelector(ctx context.Context, t *testing.T, ns string, r *symptomReport, d *doctorRuns) {
	c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
	r.Fault = fmt.Sprintf("every webhook's namespaceSelector set to matchLabels %s=%s, which namespace %s lacks", unmatchedLabel, unmatchedValue, ns)
	expectAnswers(ctx, t, c, it, ns, time.Now().Add(answerTimeout))
	unmatched := &metav1.LabelSelector{MatchLabels: map[string]string{unmatchedLabel: unmatchedValue}}
	saved := map[webhookRef]*metav1.LabelSelector{}
	restore := once(func(ctx context.Context) error {
		return editSelectors(ctx, c, it, func(w webhookRef, _ *metav1.LabelSelector) (*metav1.LabelSelector, bool) {
			s, ok := saved[w]
			return s, ok
		})
	})
	defer restoreOrFail(ctx, t, r.Fault, restore)
	err := editSelectors(ctx, c, it, func(w webhookRef, current *metav1.LabelSelector) (*metav1.LabelSelector, bool) {
		saved[w] = current
		return unmatched, true
	})
	expect.NoError(t, err, "setting the namespaceSelectors of target %s", it.Target.Name)

	judged, _ := probedWebhooks(it)
	r.Seen = expectSymptom(ctx, t, c, it, ns, r.Fault, judged, judgeUnjudged, expectedUnjudged)
	d.diagnose(ctx, t, r, r.Fault, doctorCheckSelector)

	r.applyFix(ctx, t, ns, "every namespaceSelector put back as it was", restore, fmt.Sprintf("putting back the namespaceSelectors of target %s", it.Target.Name))
}

// foreignBundle is T3: the caBundle of every webhook of the target's configurations replaced by
// another CA's. A target that repairs caBundles may put its own back before one round of probes
// and one doctor run is over: the fault is injected again, and after maxWrongBundleAttempts the
// repair is what the check reports.
func foreignBundle(ctx context.Context, t *testing.T, ns string, r *symptomReport, d *doctorRuns) {
	c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
	within, repairs := it.Target.CertModes.Mode(it.Mode).Repair.CABundleEmptied()
	other, err := pki.NewCertificateAuthority("gauntlet W16 unrelated CA", 24*time.Hour)
	expect.NoError(t, err, "creating an unrelated CA")
	r.Fault = "the caBundle of every webhook replaced by an unrelated CA's"
	expectAnswers(ctx, t, c, it, ns, time.Now().Add(answerTimeout))
	saved := savedBundles{}
	restore := once(func(ctx context.Context) error {
		return editCABundles(ctx, c, it, func(w webhookRef, current []byte) []byte {
			if bytes.Equal(current, other.PEM) {
				return saved[w]
			}
			return current // the target repaired it
		})
	})
	defer restoreOrFail(ctx, t, r.Fault, restore)

	judged, _ := probedWebhooks(it)
	judge := func(w probed, s sent) (string, bool) {
		return judgeFailedCall(w, s, it.Served.Webhooks, unknownAuthority)
	}
	holds := func(ctx context.Context) (bool, error) { return bundlesAre(ctx, c, it, other.PEM) }
	var injected time.Time
	var repairedDuring []string
	observed := false
	for attempt := 1; attempt <= maxWrongBundleAttempts && !observed; attempt++ {
		err := editCABundles(ctx, c, it, func(w webhookRef, current []byte) []byte {
			if !bytes.Equal(current, other.PEM) {
				saved[w] = current
			}
			return other.PEM
		})
		expect.NoError(t, err, "setting an unrelated CA as the caBundles of target %s", it.Target.Name)
		injected = time.Now()
		seen, short, raw := observe(ctx, c, it, ns, judged, judge, wrongBundlePropagation, holds)
		var rep *doctor.Report
		still, err := holds(ctx)
		expect.NoError(t, err, "reading the caBundles of target %s", it.Target.Name)
		if still {
			rr := d.run(ctx, t)
			rep = &rr
			still, err = holds(ctx)
			expect.NoError(t, err, "reading the caBundles of target %s", it.Target.Name)
		}
		if still {
			observed = true
			r.Seen = seen
			if len(short) > 0 {
				expect.Errorf(t, "%s, for %s: %s", r.Fault, wrongBundlePropagation, shortfall(judged, short, seen, func(w probed) string { return expectedFailedCall(w, unknownAuthority) }))
			}
			d.expectNames(ctx, t, r, r.Fault, doctorCheckCABundle, *rep)
			break
		}
		if !repairs {
			expect.Fatalf(t, "%s: target %s declares no repair.caBundle in %s mode, so expected the unrelated CA to stay in the caBundles; saw it replaced within %s",
				r.Fault, it.Target.Name, it.Mode, since(injected))
		}
		doctorSaw := "not run: repaired first"
		if rep != nil {
			doctorSaw = rep.String()
		}
		// Answers given once the target's CA was back are no symptom: quoted as answered.
		r.Seen = map[string]string{}
		for name, answer := range raw {
			r.Seen[name] = "answered as the repair left it: " + answer
		}
		repairedDuring = append(repairedDuring, fmt.Sprintf("attempt %d: repaired within %s (doctor: %s)", attempt, since(injected), doctorSaw))
		t.Logf("target %s repaired the caBundles during observation %d; injecting the fault again", it.Target.Name, attempt)
	}
	if !observed {
		// The target repaired every injection before one round of probes and one doctor run
		// were over: what it declares (repair.caBundle) is what it did, and the repair is
		// what a user sees.
		r.Seen = mergeSeen(r.Seen, "repairedBeforeObserved", strings.Join(repairedDuring, "; "))
	}

	if repairs {
		r.Fix = fmt.Sprintf("none: target %s declares it repairs caBundles within %s in %s mode", it.Target.Name, within, it.Mode)
		expectRepaired(ctx, t, c, it, ns, injected.Add(within), within)
		r.RepairedAfter = since(injected)
		return
	}
	r.applyFix(ctx, t, ns, "every caBundle put back as it was", restore, fmt.Sprintf("putting back the caBundles of target %s", it.Target.Name))
}

// operatorDownScenario is the troubleshooting scenario a user meets while no pod serves: T6
// when any validating webhook fails closed (its calls are refused, the first thing seen), T7
// when every one has failurePolicy Ignore (objects pass unjudged).
func operatorDownScenario(webhooks []target.Webhook) string {
	var failing, ignoring int
	for _, w := range webhooks {
		switch {
		case w.Mutating:
		case w.FailurePolicy == admissionregistrationv1.Ignore:
			ignoring++
		default:
			failing++
		}
	}
	if ignoring > 0 && failing == 0 {
		return "T7"
	}
	return "T6"
}

// operatorScaledDown is T6/T7. W12 judges each probe against its failurePolicy while no pod
// serves; this adds what a user troubleshooting it sees: the API server's message for a
// webhook documented Fail (T6), quoted, with its stable part required; what one documented
// Ignore answered (T7), quoted only; the doctor's diagnosis; the scale back and the recovery.
func operatorScaledDown(ctx context.Context, t *testing.T, ns string, r *symptomReport, d *doctorRuns) {
	c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
	r.Fault = fmt.Sprintf("kubectl -n %s scale deployment %s --replicas=0", it.Namespace, it.Served.Deployment)
	expectAnswers(ctx, t, c, it, ns, time.Now().Add(answerTimeout))
	restore := once(func(ctx context.Context) error {
		return release.ScaleDeployment(ctx, c.Kube(), it.Namespace, it.Served.Deployment, it.Served.Replicas, restartTimeout)
	})
	defer restoreOrFail(ctx, t, r.Fault, restore)
	expect.NoError(t, release.ScaleDeployment(ctx, c.Kube(), it.Namespace, it.Served.Deployment, 0, restartTimeout), "stopping the webhooks' pods")

	judged, _ := probedWebhooks(it)
	var fail, ignore []probed
	for _, w := range judged {
		if w.FailurePolicy == admissionregistrationv1.Fail {
			fail = append(fail, w)
		} else {
			ignore = append(ignore, w)
		}
	}
	r.Seen = expectSymptom(ctx, t, c, it, ns, r.Fault, fail, func(w probed, s sent) (string, bool) {
		return judgeFailedCall(w, s, it.Served.Webhooks, operatorDown)
	}, func(w probed) string { return expectedDown(w) + " … " + operatorDown.String() })
	for _, w := range ignore {
		obj, err := it.Target.Object(w.judging())
		expect.NoError(t, err, "reading the probe of webhook %s", w.Name)
		seen, _ := judgeDown(w, dryRun(ctx, c, obj, ns), it.Served.Webhooks)
		r.Seen = mergeSeen(r.Seen, w.Name, fmt.Sprintf("failurePolicy %s (T7, judged by W12): %s", w.FailurePolicy, seen))
	}
	d.expectNamesAs(ctx, t, r, r.Fault, doctorCheckEndpoints, operatorDownScenario(it.Served.Webhooks), d.run(ctx, t))

	r.applyFix(ctx, t, ns, fmt.Sprintf("kubectl -n %s scale deployment %s --replicas=%d (the chart's)", it.Namespace, it.Served.Deployment, it.Served.Replicas), restore, fmt.Sprintf("restoring the chart's %d replicas", it.Served.Replicas))
}

// deletedService is T8: the webhook Service deleted.
func deletedService(ctx context.Context, t *testing.T, ns string, r *symptomReport, d *doctorRuns) {
	c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
	ref := it.Namespace + "/" + it.Served.Service
	r.Fault = fmt.Sprintf("kubectl -n %s delete service %s", it.Namespace, it.Served.Service)
	expectAnswers(ctx, t, c, it, ns, time.Now().Add(answerTimeout))
	services := c.Kube().CoreV1().Services(it.Namespace)
	saved, err := services.Get(ctx, it.Served.Service, metav1.GetOptions{})
	expect.NoError(t, err, "getting Service %s", ref)
	restore := once(func(ctx context.Context) error { return recreateService(ctx, c, saved) })
	defer restoreOrFail(ctx, t, r.Fault, restore)
	err = services.Delete(ctx, saved.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(saved.UID))})
	expect.NoError(t, err, "deleting Service %s", ref)
	if !suite.ResolvesWebhookServicePerRequest(c.KubernetesVersion()) {
		// Before v1.37 the API server resolves the Service only when it dials: the connections
		// it keeps to the Service's address go on carrying calls. The symptom shows once it
		// dials again, after the pods that held those connections are replaced (as T8).
		old := restart(ctx, t, c, it, fmt.Sprintf("rollout restart (Kubernetes %s calls a deleted Service over open connections)", c.KubernetesVersion()))
		restartSettled(ctx, t, c, it, old, "rollout restart")
	}

	judged, _ := probedWebhooks(it)
	notFound := serviceNotFound(it.Served.Service)
	r.Seen = expectSymptom(ctx, t, c, it, ns, r.Fault, judged, func(w probed, s sent) (string, bool) {
		return judgeFailedCall(w, s, it.Served.Webhooks, notFound)
	}, func(w probed) string { return expectedFailedCall(w, notFound) })
	d.diagnose(ctx, t, r, r.Fault, doctorCheckService)

	r.applyFix(ctx, t, ns, fmt.Sprintf("Service %s created again as it was read before the deletion", ref), restore, fmt.Sprintf("creating Service %s again", ref))
}

// judgeUnjudged says what s, webhook w's judging probe sent while the API server does not call
// w, shows, and whether it is admitted without w's judgement.
func judgeUnjudged(w probed, s sent) (string, bool) {
	if s.err != nil {
		return fmt.Sprintf("refused: %v", s.err), false
	}
	return admittedUnjudged(w, s)
}

func expectedUnjudged(w probed) string {
	if w.Mutating {
		return fmt.Sprintf("%s admitted without its patch %s", w.judging(), w.Probe.Patch)
	}
	return fmt.Sprintf("%s, which it denies when called, admitted", w.judging())
}

// judgeFailedCall is judgeDown for a fault that makes every call to the target's webhooks fail:
// what the failurePolicy promises, and a refusal carrying symptom, the stable part of the API
// server's message for that fault.
func judgeFailedCall(w probed, s sent, webhooks []target.Webhook, symptom *regexp.Regexp) (string, bool) {
	seen, ok := judgeDown(w, s, webhooks)
	if ok && s.err != nil && !symptom.MatchString(s.err.Error()) {
		return fmt.Sprintf("refused, but without `%s`: %v", symptom, s.err), false
	}
	return seen, ok
}

func expectedFailedCall(w probed, symptom *regexp.Regexp) string {
	if w.FailurePolicy == admissionregistrationv1.Fail {
		return fmt.Sprintf("%s … `%s`", expectedDown(w), symptom)
	}
	return expectedDown(w)
}

// expectSymptom waits until every webhook of ws answers its judging probe as judge expects
// under fault, and returns the answers by webhook; when they do not within symptomTimeout,
// the test fails listing, per webhook, what was expected and what was last seen.
func expectSymptom(ctx context.Context, t *testing.T, c *suite.Cluster, it *target.Installed, ns, fault string, ws []probed,
	judge func(probed, sent) (string, bool), expected func(probed) string) map[string]string {
	t.Helper()
	seen, short, _ := observe(ctx, c, it, ns, ws, judge, symptomTimeout, nil)
	for _, w := range ws {
		t.Logf("%s: webhook %s (failurePolicy %s), %s: %s", fault, w.Name, w.FailurePolicy, w.judging(), seen[w.Name])
	}
	if len(short) > 0 {
		expect.Errorf(t, "%s, for %s: %s", fault, symptomTimeout, shortfall(ws, short, seen, expected))
	}
	return seen
}

// shortfall says, for each webhook of ws named in short, what was expected and what was seen.
func shortfall(ws []probed, short []string, seen map[string]string, expected func(probed) string) string {
	var lines []string
	for _, w := range ws {
		if slices.Contains(short, w.Name) {
			lines = append(lines, fmt.Sprintf("webhook %s (%s, failurePolicy %s): expected %s; saw %s", w.Name, kindOf(w.Mutating), w.FailurePolicy, expected(w), seen[w.Name]))
		}
	}
	return strings.Join(lines, "; ")
}

// observe sends each webhook of ws its judging probe until judge finds every answer the
// symptom, for at most timeout, or until holds (when given) says the fault is gone. It returns
// the last answer by webhook as judged, the webhooks whose answer was not the symptom (nil: all
// were) and the last answers as the API server gave them ("admitted" or its message).
func observe(ctx context.Context, c *suite.Cluster, it *target.Installed, ns string, ws []probed, judge func(probed, sent) (string, bool),
	timeout time.Duration, holds func(context.Context) (bool, error)) (seen map[string]string, short []string, raw map[string]string) {
	seen, raw = map[string]string{}, map[string]string{}
	_ = poll.Until(ctx, "every webhook's probe to show the symptom", timeout, func(ctx context.Context) (bool, string, error) {
		short = nil
		for _, w := range ws {
			obj, err := it.Target.Object(w.judging())
			if err != nil {
				return false, "", err
			}
			answer := dryRun(ctx, c, obj, ns)
			s, ok := judge(w, answer)
			seen[w.Name], raw[w.Name] = s, "admitted"
			if answer.err != nil {
				raw[w.Name] = answer.err.Error()
			}
			if !ok {
				short = append(short, w.Name)
			}
		}
		if len(short) > 0 && holds != nil {
			if still, err := holds(ctx); err == nil && !still {
				return true, "", nil // the fault is gone: observing longer shows nothing
			}
		}
		return len(short) == 0, strings.Join(short, ", "), nil
	})
	return seen, short, raw
}

// editSelectors sets the namespaceSelector of every webhook of the target's configurations to
// what edit returns for it given the current one (unchanged when edit says so).
func editSelectors(ctx context.Context, c *suite.Cluster, it *target.Installed, edit func(w webhookRef, current *metav1.LabelSelector) (*metav1.LabelSelector, bool)) error {
	validating, mutating := it.Served.Configurations()
	api := c.Kube().AdmissionregistrationV1()
	for _, name := range validating {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cfg, err := api.ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for i := range cfg.Webhooks {
				if s, ok := edit(webhookRef{configuration: name, webhook: cfg.Webhooks[i].Name}, cfg.Webhooks[i].NamespaceSelector); ok {
					cfg.Webhooks[i].NamespaceSelector = s
				}
			}
			_, err = api.ValidatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("updating the namespaceSelectors of ValidatingWebhookConfiguration %s: %w", name, err)
		}
	}
	for _, name := range mutating {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cfg, err := api.MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for i := range cfg.Webhooks {
				if s, ok := edit(webhookRef{mutating: true, configuration: name, webhook: cfg.Webhooks[i].Name}, cfg.Webhooks[i].NamespaceSelector); ok {
					cfg.Webhooks[i].NamespaceSelector = s
				}
			}
			_, err = api.MutatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("updating the namespaceSelectors of MutatingWebhookConfiguration %s: %w", name, err)
		}
	}
	return nil
}

// bundlesAre reports whether every webhook of the target's configurations carries bundle.
func bundlesAre(ctx context.Context, c *suite.Cluster, it *target.Installed, bundle []byte) (bool, error) {
	all := true
	err := editCABundles(ctx, c, it, func(_ webhookRef, current []byte) []byte {
		all = all && bytes.Equal(current, bundle)
		return current
	})
	return all, err
}

// recreateService creates saved again unless a Service of its name exists, with the ClusterIP
// it had while the API server has not released it yet, then with a new one.
func recreateService(ctx context.Context, c *suite.Cluster, saved *corev1.Service) error {
	services := c.Kube().CoreV1().Services(saved.Namespace)
	if _, err := services.Get(ctx, saved.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return err
	}
	svc := saved.DeepCopy()
	svc.ObjectMeta = asCreated(saved.ObjectMeta)
	svc.Status = corev1.ServiceStatus{}
	var last error
	err := poll.Until(ctx, fmt.Sprintf("Service %s/%s created again with ClusterIP %s", saved.Namespace, saved.Name, saved.Spec.ClusterIP), 30*time.Second,
		func(ctx context.Context) (bool, string, error) {
			_, last = services.Create(ctx, svc, metav1.CreateOptions{})
			return last == nil || apierrors.IsAlreadyExists(last), fmt.Sprint(last), nil
		})
	if err == nil {
		return nil
	}
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
	if _, err := services.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Service %s/%s again (with its ClusterIP: %v): %w", saved.Namespace, saved.Name, last, err)
	}
	return nil
}

// asCreated is m as a client creates the object again: without what the API server fills in.
func asCreated(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: m.Labels, Annotations: m.Annotations,
		OwnerReferences: m.OwnerReferences, Finalizers: m.Finalizers}
}

// once makes restore do its work at most once successfully: the fix step calls it, and the
// deferred safety net only when the fix did not run or failed.
func once(restore func(context.Context) error) func(context.Context) error {
	done := false
	return func(ctx context.Context) error {
		if done {
			return nil
		}
		err := restore(ctx)
		done = err == nil
		return err
	}
}

// restoreOrFail is the deferred safety net of a symptom: what the fault changed is put back
// even when the symptom stopped the test.
func restoreOrFail(ctx context.Context, t *testing.T, fault string, restore func(context.Context) error) {
	if err := restore(ctx); err != nil {
		expect.Errorf(t, "undoing %q: %v", fault, err)
	}
}

func mergeSeen(seen map[string]string, key, value string) map[string]string {
	if seen == nil {
		seen = map[string]string{}
	}
	seen[key] = value
	return seen
}

func since(at time.Time) string { return time.Since(at).Round(100 * time.Millisecond).String() }
