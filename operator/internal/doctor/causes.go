package doctor

import (
	"fmt"
	"strings"
)

// scenario is a row of CATALOG.md §T: the documented fault, the symptom a user sees and
// the documented fix, worded as there.
type scenario struct {
	id, fault, symptom, fix string
}

// The troubleshooting scenarios the doctor can name. T12 (a resource stuck Terminating) has no
// check: the webhook never blocks finalizer removal, so there is nothing to diagnose.
var (
	t1  = scenario{"T1", "ValidatingWebhookConfiguration deleted", "invalid object accepted, no validation log", "helm upgrade restores it"}
	t2  = scenario{"T2", "namespaceSelector does not match the namespace", "invalid object accepted", "fix selector/labels"}
	t3  = scenario{"T3", "caBundle empty or from another CA", "x509: certificate signed by unknown authority", "auto: operator re-injects; restart"}
	t4  = scenario{"T4", "serving cert SAN lacks <svc>.<ns>.svc", "x509: certificate is valid for …, not <svc>.<ns>.svc", "re-issue cert with the right SAN"}
	t5  = scenario{"T5", "serving cert expired", "x509: certificate has expired or is not yet valid", "re-issue"}
	t6  = scenario{"T6", "operator scaled to 0 / crashed, failurePolicy: Fail", "failed calling webhook … dial tcp …: connect: connection refused", "restore operator"}
	t7  = scenario{"T7", "as T6 with failurePolicy: Ignore", "object admitted without validation", "restore operator"}
	t8  = scenario{"T8", "webhook Service deleted", `service "<name>" not found in the failed-call error`, "restore Service"}
	t9  = scenario{"T9", "webhook slower than timeoutSeconds", "context deadline exceeded in the failed-call error", "make the webhook answer within timeoutSeconds"}
	t10 = scenario{"T10", "cert-controller RBAC missing (cannot create Secrets / patch webhook configurations)", "Secret not created / caBundle not injected; operator logs the cert-controller error", "restore RBAC"}
	t11 = scenario{"T11", "Secret deleted while running", "documented regeneration: delete + restart regenerates", "kubectl delete secret + rollout restart"}
)

// cause is the one cause a failing check names: text, the scenario it is documented as (if
// any), and the fix command.
type cause struct {
	scenario string
	text     string
	fix      string
}

// documented is a cause that is a troubleshooting scenario: "T8 webhook Service deleted:
// <what was found>. Symptom: <symptom>."
func documented(sc scenario, found string, fix ...string) cause {
	text := fmt.Sprintf("%s %s: %s (symptom: %s)", sc.id, sc.fault, found, sc.symptom)
	return cause{scenario: sc.id, text: text, fix: joinFix(sc.fix, fix)}
}

// undocumented is a cause outside the troubleshooting table.
func undocumented(found string, fix ...string) cause {
	return cause{text: found, fix: strings.Join(fix, "\n")}
}

func joinFix(summary string, commands []string) string {
	if len(commands) == 0 {
		return summary
	}
	return summary + ":\n" + strings.Join(commands, "\n")
}

// fixes builds the commands fixes print: for a release of gauntlet's operator (release set),
// or for any operator's webhook (release empty), whose chart and values the doctor does not know.
type fixes struct {
	release, namespace, chart, deployment string
	// podSelector selects the webhook's Pods when there is no release (the Service's selector).
	podSelector string
}

// reinstall restores what the installation renders: `helm upgrade` of the release with extra
// flags, or, for any operator, a pointer to whatever installed it.
func (f fixes) reinstall(extra ...string) string {
	if f.release == "" {
		return "# re-apply what installed the operator (helm upgrade --reuse-values of its release, or kubectl apply -f of its manifests)"
	}
	cmd := fmt.Sprintf("helm upgrade %s %s --namespace %s --reuse-values", f.release, f.chart, f.namespace)
	for _, e := range extra {
		cmd += " " + e
	}
	return cmd
}

// deploymentRef is deployment/<name>, or a placeholder when the webhook's Deployment is not
// known.
func (f fixes) deploymentRef() string {
	if f.deployment == "" {
		return "deployment/<the webhook's Deployment>"
	}
	return "deployment/" + f.deployment
}

func (f fixes) rolloutRestart() string {
	return fmt.Sprintf("kubectl -n %s rollout restart %s && kubectl -n %s rollout status %s",
		f.namespace, f.deploymentRef(), f.namespace, f.deploymentRef())
}

func (f fixes) logs() string {
	return fmt.Sprintf("kubectl -n %s logs %s", f.namespace, f.deploymentRef())
}

func (f fixes) describePods() string {
	switch {
	case f.release != "":
		return fmt.Sprintf("kubectl -n %s describe pods -l app.kubernetes.io/instance=%s", f.namespace, f.release)
	case f.podSelector != "":
		return fmt.Sprintf("kubectl -n %s describe pods -l %s", f.namespace, f.podSelector)
	}
	return fmt.Sprintf("kubectl -n %s describe pods", f.namespace)
}
