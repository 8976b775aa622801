package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// dynamoGroup is the API group of the objects the ledger keeps: what users write and the
// webhooks admit.
const dynamoGroup = "nvidia.com"

// ledger records every Dynamo object the suite's clients write (not dry runs): the version it
// was written at, its UID and the spec the API server stored. After a scenario the suite checks
// that nothing was lost: every object the scenario created and did not delete is still there —
// the same object (UID), with the spec last written — and passes validation now, so no invalid
// object slipped in unvalidated. A fault (a killed operator, a rotation, a hostile request) must
// never cost a user an object or a change, nor leave behind an object no webhook checked.
type ledger struct {
	mu sync.Mutex
	// scopes are the scenarios running now; entries are kept per scenario, and a write made
	// while several run at once (LabelAtOnce) is each one's, as no request says whose it is.
	scopes  map[string]bool
	entries map[ledgerKey]*ledgerEntry
}

type ledgerKey struct {
	scope, resource, namespace, name string
}

type ledgerEntry struct {
	gvr     schema.GroupVersionResource
	uid     string
	spec    string // canonical JSON (encoding/json sorts keys)
	deleted bool
	// invalid marks an object the scenario got admitted on purpose although invalid (the
	// symptom of a fault): once the fault is fixed, validating it again must deny it.
	invalid bool
}

func newLedger() *ledger {
	return &ledger{scopes: map[string]bool{}, entries: map[ledgerKey]*ledgerEntry{}}
}

// begin starts recording for scenario id.
func (l *ledger) begin(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.scopes[id] = true
}

// end stops recording for scenario id; what it recorded stays for lost.
func (l *ledger) end(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.scopes, id)
}

// wrap is a rest.Config WrapTransport: it records the writes that succeed.
func (l *ledger) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err != nil || resp.StatusCode/100 != 2 || req.Method == http.MethodGet || req.URL.Query().Has("dryRun") {
			return resp, err
		}
		w, ok := parseWrite(req.Method, req.URL.Path)
		if !ok {
			return resp, err
		}
		body, readErr := io.ReadAll(resp.Body)
		_ = resp.Body.Close() // read to its end (or to readErr); the copy below replaces it
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if readErr == nil {
			l.record(w, body)
		}
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// write is a request that changes objects: one Dynamo object (name set), every Dynamo object of
// a resource in a namespace (a collection delete), or a whole namespace (resource "").
type write struct {
	method                       string
	gvr                          schema.GroupVersionResource
	namespace, resource, name    string
	namespaceDeleted, collection bool
}

// parseWrite reads /apis/nvidia.com/<version>/namespaces/<ns>/<resource>[/<name>] and
// /api/v1/namespaces/<ns> (a namespace deletion takes its objects with it). Subresources
// (status) do not change what the ledger keeps.
func parseWrite(method, path string) (write, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if method == http.MethodDelete && len(parts) == 4 && parts[0] == "api" && parts[2] == "namespaces" {
		return write{method: method, namespace: parts[3], namespaceDeleted: true}, true
	}
	if len(parts) < 6 || len(parts) > 7 || parts[0] != "apis" || parts[1] != dynamoGroup || parts[3] != "namespaces" {
		return write{}, false
	}
	w := write{method: method, namespace: parts[4], resource: parts[5],
		gvr: schema.GroupVersionResource{Group: dynamoGroup, Version: parts[2], Resource: parts[5]}}
	if len(parts) == 7 {
		w.name = parts[6]
	} else {
		w.collection = true
	}
	if w.collection && method != http.MethodPost && method != http.MethodDelete {
		return write{}, false
	}
	return w, true
}

func (l *ledger) record(w write, body []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.method == http.MethodDelete {
		for k, e := range l.entries {
			if l.scopes[k.scope] && k.namespace == w.namespace &&
				(w.namespaceDeleted || (k.resource == w.resource && (w.collection || k.name == w.name))) {
				e.deleted = true
			}
		}
		return
	}
	var obj struct {
		Metadata struct {
			Name              string `json:"name"`
			UID               string `json:"uid"`
			DeletionTimestamp string `json:"deletionTimestamp"`
		} `json:"metadata"`
		Spec any `json:"spec"`
	}
	if err := json.Unmarshal(body, &obj); err != nil || obj.Metadata.Name == "" {
		return
	}
	for scope := range l.scopes {
		// A write to an object being deleted (a finalizer coming off) does not bring it back.
		l.entries[ledgerKey{scope: scope, resource: w.resource, namespace: w.namespace, name: obj.Metadata.Name}] =
			&ledgerEntry{gvr: w.gvr, uid: obj.Metadata.UID, spec: canonicalJSON(obj.Spec), deleted: obj.Metadata.DeletionTimestamp != ""}
	}
}

// admittedInvalid marks the running scenarios' object as invalid on purpose.
func (l *ledger) admittedInvalid(resource, namespace, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for scope := range l.scopes {
		if e := l.entries[ledgerKey{scope: scope, resource: resource, namespace: namespace, name: name}]; e != nil {
			e.invalid = true
		}
	}
}

// lost checks scenario id's objects against the cluster and describes each one lost: gone,
// replaced by another object of the same name, or holding a spec other than the last written.
func (l *ledger) lost(ctx context.Context, dyn dynamic.Interface, id string) ([]string, int, error) {
	l.mu.Lock()
	type kept struct {
		key ledgerKey
		e   ledgerEntry
	}
	var objects []kept
	for k, e := range l.entries {
		if k.scope == id && !e.deleted {
			objects = append(objects, kept{k, *e})
		}
	}
	l.mu.Unlock()
	slices.SortFunc(objects, func(a, b kept) int {
		return strings.Compare(a.key.resource+"/"+a.key.namespace+"/"+a.key.name, b.key.resource+"/"+b.key.namespace+"/"+b.key.name)
	})
	var lost []string
	for _, o := range objects {
		what := fmt.Sprintf("%s %s/%s", o.key.resource, o.key.namespace, o.key.name)
		got, err := dyn.Resource(o.e.gvr).Namespace(o.key.namespace).Get(ctx, o.key.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			lost = append(lost, what+": gone (the scenario created it and never deleted it)")
			continue
		case err != nil:
			return nil, 0, fmt.Errorf("reading %s: %w", what, err)
		}
		if string(got.GetUID()) != o.e.uid {
			lost = append(lost, fmt.Sprintf("%s: replaced (uid %s, created as %s)", what, got.GetUID(), o.e.uid))
			continue
		}
		if spec := canonicalJSON(got.Object["spec"]); spec != o.e.spec {
			lost = append(lost, fmt.Sprintf("%s: spec is %s, last written %s", what, spec, o.e.spec))
			continue
		}
		denial, err := revalidate(ctx, dyn, o.e.gvr, got)
		switch {
		case err != nil:
			return nil, 0, fmt.Errorf("validating %s again: %w", what, err)
		case o.e.invalid && denial == "":
			lost = append(lost, what+": admitted on purpose although invalid, but validating it again now admits it too: validation is not back")
		case !o.e.invalid && denial != "":
			lost = append(lost, what+": admitted although invalid (a dry-run create of it now is denied: "+denial+")")
		}
	}
	return lost, len(objects), nil
}

// revalidate asks the webhooks whether obj would be admitted now, and returns the denial: a
// server-side dry-run create of the same object. Admission runs before storage, so a valid
// object meets AlreadyExists and an invalid one the webhook's denial — an object that is there
// although invalid was admitted without validation (a fault let it through).
func revalidate(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) (string, error) {
	again := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": obj.GetAPIVersion(), "kind": obj.GetKind(), "spec": obj.Object["spec"],
		"metadata": map[string]any{"name": obj.GetName(), "namespace": obj.GetNamespace(), "annotations": obj.GetAnnotations(), "labels": obj.GetLabels()},
	}}
	_, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, again, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case apierrors.IsAlreadyExists(err):
		return "", nil
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		return err.Error(), nil
	case err == nil:
		return "", fmt.Errorf("a dry-run create of an existing object succeeded")
	default:
		return "", err
	}
}

// canonicalJSON writes v with sorted keys and numbers as written, so a spec decoded by
// encoding/json (float64) and one decoded by the dynamic client (int64) compare equal.
func canonicalJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
