package admission

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/dynamo"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/metrics"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// logTimeout is how long the operator may take to write a request's log line.
const logTimeout = 30 * time.Second

// statusCause is one cause of a denial as API clients read it from Status.details.causes.
type statusCause struct{ Type, Field string }

// explainedDenial is a request every kind denies, the Status a client decodes from it, and the
// reasons it counts under in dynamo_webhook_denials_total (once each, however many causes).
type explainedDenial struct {
	kind    kind
	obj     *unstructured.Unstructured
	causes  []statusCause
	reasons []string
}

func explainedDenials(ns string) []explainedDenial {
	return []explainedDenial{
		{componentDeployments, componentDeployments.object(ns, "negative", merged(componentSpec(), map[string]any{"replicas": int64(-1)})),
			[]statusCause{{"FieldValueInvalid", "spec.replicas"}}, []string{"invalid"}},
		{graphDeployments, graphDeployments.object(ns, "empty", map[string]any{"backendFramework": "vllm"}),
			[]statusCause{{"FieldValueRequired", "spec.services"}}, []string{"required"}},
		{models, models.object(ns, "unnamed", map[string]any{"modelType": "base"}),
			[]statusCause{{"FieldValueRequired", "spec.modelName"}, {"FieldValueRequired", "spec.baseModelName"}}, []string{"required"}},
		{requests, requests.object(ns, "thorough-auto", requestSpec("auto", "thorough")),
			[]statusCause{{"FieldValueInvalid", "spec.backend"}}, []string{"invalid"}},
	}
}

// denialsMetric counts denials by webhook ("validate-<kind, lower case>") and reason.
const denialsMetric = "dynamo_webhook_denials_total"

// denialCounts sums denialsMetric of d's webhook, per reason of d, over every ready operator
// pod, scraped as a user's Prometheus does (metrics.Reader).
func denialCounts(ctx context.Context, c *suite.Cluster, reader *metrics.Reader, d explainedDenial) (map[string]float64, error) {
	scrapes, err := reader.ScrapeReadyOperators(ctx, c.DialPod)
	if err != nil {
		return nil, err
	}
	counts := map[string]float64{}
	for _, s := range scrapes {
		if s.Err != nil {
			return nil, fmt.Errorf("scraping /metrics of pod %s: %w", s.Pod, s.Err)
		}
		for _, reason := range d.reasons {
			counts[reason] += s.Samples.Sum(denialsMetric, map[string]string{"webhook": d.kind.webhookLabel(), "reason": reason})
		}
	}
	return counts, nil
}

// expectDenialCounted checks that d's denial added one to denialsMetric for each of its
// reasons since before.
func expectDenialCounted(ctx context.Context, t *testing.T, c *suite.Cluster, reader *metrics.Reader, d explainedDenial, before map[string]float64) {
	t.Helper()
	what := fmt.Sprintf("the denial of %s %s to count once under each of its reasons %v in %s{webhook=%q}",
		d.kind.name, ref(d.obj.GetNamespace(), d.obj.GetName()), d.reasons, denialsMetric, d.kind.webhookLabel())
	expect.Eventually(ctx, t, what, logTimeout, func(ctx context.Context) (bool, string, error) {
		after, err := denialCounts(ctx, c, reader, d)
		if err != nil {
			return false, err.Error(), nil
		}
		ok := true
		var seen []string
		for _, reason := range d.reasons {
			ok = ok && after[reason]-before[reason] == 1
			seen = append(seen, fmt.Sprintf("reason=%q %g → %g", reason, before[reason], after[reason]))
		}
		return ok, strings.Join(seen, ", "), nil
	})
}

// denialsExplained is A9: a denial tells the user which webhook denied what — kind,
// namespace/name and each field path, in the message and in the Status details clients read —
// and the operator logs every validation with the object's name and namespace.
func denialsExplained() e2etypes.Feature {
	var ns string
	return features.New("denials name the webhook, kind, namespace/name and field path; the operator logs validate create/update").
		WithLabel(suite.LabelScenario, "A9").
		Setup(suite.NamespaceSetup(&ns, "a9")).
		Assess("every kind's denial is a 422 Invalid naming group, kind, name and each field, in the message and in the details, and counts once per reason in dynamo_webhook_denials_total", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			reader := metrics.NewReader(c.Kube(), r)
			for _, d := range explainedDenials(ns) {
				before, err := denialCounts(ctx, c, reader, d)
				if err != nil {
					expect.Errorf(t, "reading %s before denying %s %s: %v", denialsMetric, d.kind.name, ref(ns, d.obj.GetName()), err)
					continue
				}
				_, err = d.kind.tryCreate(ctx, c.Dynamic(), d.obj)
				expectExplained(t, d, err)
				expectDenialCounted(ctx, t, c, reader, d, before)
			}
			return ctx
		})).
		Assess("an object created with generateName is named by its generated name", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			dyn := suite.ClusterFrom(ctx, t).Dynamic()
			obj := graphDeployments.object(ns, "", map[string]any{"backendFramework": "vllm"})
			obj.SetGenerateName("graph-")
			_, err := graphDeployments.tryCreate(ctx, dyn, obj)
			// The API server names the object before validating admission runs.
			want := regexp.MustCompile("^" + regexp.QuoteMeta(dynamo.DeniedBy(graphDeployments.validating)+": DynamoGraphDeployment "+ns+"/graph-") +
				"[a-z0-9]{5}" + regexp.QuoteMeta(" is invalid: spec.services: Required value: at least one service is required") + "$")
			switch {
			case err == nil:
				expect.Errorf(t, "creating a DynamoGraphDeployment with generateName graph- in %s without services: expected a denial matching %s, saw it admitted", ns, want)
			case !want.MatchString(err.Error()):
				expect.Errorf(t, "creating a DynamoGraphDeployment with generateName graph- in %s without services: expected a denial matching %s, saw %q", ns, want, err.Error())
			}
			return ctx
		}).
		Assess("the operator logs validate create (denied, allowed) and validate update with name and namespace, at info level", suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			const name = "logged"
			_, err := graphDeployments.tryCreate(ctx, c.Dynamic(), graphDeployments.object(ns, name, map[string]any{"backendFramework": "vllm"}))
			expectDenied(t, "creating DynamoGraphDeployment "+ref(ns, name)+" without services", err,
				graphDeployments.denial(ns, name, "spec.services: Required value: at least one service is required"))
			graphDeployments.mustCreate(ctx, t, c.Dynamic(), graphDeployments.object(ns, name, graphSpec(twoServices())))
			_, err = graphDeployments.tryPatch(ctx, c.Dynamic(), ns, name, map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "a"}}})
			expect.NoError(t, err, "labelling DynamoGraphDeployment %s", ref(ns, name))

			want := []validationLog{
				// A denial is the webhook doing its job: info, like an admission.
				{Level: "info", Msg: "validate create", Kind: "DynamoGraphDeployment", Name: name, Namespace: ns, Result: "denied"},
				{Level: "info", Msg: "validate create", Kind: "DynamoGraphDeployment", Name: name, Namespace: ns, Result: "allowed"},
				{Level: "info", Msg: "validate update", Kind: "DynamoGraphDeployment", Name: name, Namespace: ns, Result: "allowed"},
			}
			expect.Eventually(ctx, t, fmt.Sprintf("the operator's log to show %s", describeLogs(want)), logTimeout, func(ctx context.Context) (bool, string, error) {
				lines, err := operatorValidationLogs(ctx, c, r)
				if err != nil {
					return false, err.Error(), nil
				}
				var missing []validationLog
				var seen []validationLog
				for _, l := range lines {
					if l.Name == name && l.Namespace == ns {
						seen = append(seen, l)
					}
				}
				for _, w := range want {
					if !containsLog(seen, w) {
						missing = append(missing, w)
					}
				}
				return len(missing) == 0, fmt.Sprintf("missing %s; lines for %s: %s (%d validate lines in all)", describeLogs(missing), ref(ns, name), describeLogs(seen), len(lines)), nil
			})
			return ctx
		})).
		Feature()
}

// expectExplained checks a denial of d: the message names the webhook, kind, namespace/name
// and every field; the Status is 422 Invalid with group, kind, name and the causes.
func expectExplained(t *testing.T, d explainedDenial, err error) {
	t.Helper()
	ns, name := d.obj.GetNamespace(), d.obj.GetName()
	doing := "creating " + d.kind.name + " " + ref(ns, name)
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		expect.Errorf(t, "%s: expected a denial by %s, saw %v", doing, d.kind.validating, err)
		return
	}
	prefix := dynamo.DeniedBy(d.kind.validating) + ": " + d.kind.name + " " + ref(ns, name) + " is invalid: "
	if msg := err.Error(); !strings.HasPrefix(msg, prefix) {
		expect.Errorf(t, "%s: expected the message to start with %q, saw %q", doing, prefix, msg)
	}
	for _, cause := range d.causes {
		if !strings.Contains(err.Error(), cause.Field+": ") {
			expect.Errorf(t, "%s: expected the message to name field %s, saw %q", doing, cause.Field, err.Error())
		}
	}
	s := status.Status()
	expect.Equal(t, doing+": HTTP status code", int32(http.StatusUnprocessableEntity), s.Code)
	expect.Equal(t, doing+": Status reason", metav1.StatusReasonInvalid, s.Reason)
	if s.Details == nil {
		expect.Errorf(t, "%s: expected Status details naming %s %s, saw none (status %+v)", doing, d.kind.name, name, s)
		return
	}
	expect.Equal(t, doing+": details group/kind/name", dynamo.Group+"/"+d.kind.name+"/"+name, s.Details.Group+"/"+s.Details.Kind+"/"+s.Details.Name)
	var causes []statusCause
	for _, c := range s.Details.Causes {
		causes = append(causes, statusCause{Type: string(c.Type), Field: c.Field})
	}
	expect.Equal(t, doing+": details causes (type, field)", d.causes, causes)
}

// validationLog is the part of an operator log line A9 looks at.
type validationLog struct {
	Level     string `json:"level"`
	Msg       string `json:"msg"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Result    string `json:"result"`
}

func (l validationLog) String() string {
	return fmt.Sprintf("%s %q %s %s %s", l.Level, l.Msg, l.Kind, ref(l.Namespace, l.Name), l.Result)
}

func describeLogs(logs []validationLog) string {
	if len(logs) == 0 {
		return "none"
	}
	parts := make([]string, len(logs))
	for i, l := range logs {
		parts[i] = l.String()
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

func containsLog(logs []validationLog, want validationLog) bool {
	for _, l := range logs {
		if l == want {
			return true
		}
	}
	return false
}

// operatorValidationLogs reads the logs of every operator pod (requests may reach any replica)
// and returns the "validate …" lines. The operator logs JSON, one object per line.
func operatorValidationLogs(ctx context.Context, c *suite.Cluster, r *chart.Release) ([]validationLog, error) {
	pods, err := release.OperatorPods(ctx, c.Kube(), r)
	if err != nil {
		return nil, err
	}
	var out []validationLog
	for _, p := range pods {
		raw, err := c.Kube().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the log of pod %s: %w", ref(p.Namespace, p.Name), err)
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
		for sc.Scan() {
			var l validationLog
			if json.Unmarshal(sc.Bytes(), &l) != nil || !strings.HasPrefix(l.Msg, "validate ") {
				continue
			}
			out = append(out, l)
		}
	}
	return out, nil
}
