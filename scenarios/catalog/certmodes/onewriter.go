package certmodes

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// C12's shape: the leader hand-overs it drives (one `kubectl rollout restart` each: every old
// pod goes, so the Lease moves to a new pod at least once), the rotations it waits for under
// each new leader, and so the rotations that must have happened while it watched — fewer, and
// it would have judged too few writes to prove anything.
const (
	oneWriterHandOvers    = 3
	oneWriterTermRotation = 2
	oneWriterMinRotations = oneWriterHandOvers * oneWriterTermRotation
)

// replicaFieldManager prefixes the pod name in the field manager every replica writes as
// (dynamo-operator's certs.Options.FieldOwner): managedFields name the replica that wrote.
const replicaFieldManager = "dynamo-operator/"

// arrivalSkew is how far apart, in arrival time, a write and a Lease change may be and still be
// in either order, when resourceVersions cannot be compared (see writeLog.ordered).
const arrivalSkew = time.Second

// oneWriter is C12: with two replicas rotating certificates every few seconds (P3's timings),
// across three leader hand-overs, exactly one replica writes the Secret and the caBundles at any
// time — the one holding the leader-election Lease. Judged from the API server alone: the
// Secret, both webhook configurations, the DGDR CRD and the Lease are watched for the whole
// observation, every change is ordered by resourceVersion, and each write's author is the field
// manager that owns the changed field afterwards (an update moves the fields it changes to its
// manager). The one documented exception: a starting pod that only adds trust in the Secret's
// CA to a caBundle lacking it (the restart repair, docs/operator.md, "The operator").
func oneWriter() types.Feature {
	return features.New(fmt.Sprintf("%d replicas rotating certificates through %d leader hand-overs: only the Lease holder writes the Secret and the caBundles", rolloutReplicas, oneWriterHandOvers)).
		WithLabel(suite.LabelScenario, "C12").
		WithLabel(suite.LabelCertMode, string(chart.Automatic)).
		Setup(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			two := *r
			two.Values = chart.MergeValues(r.Values, map[string]any{"replicas": rolloutReplicas})
			startShortRotations(ctx, t, c, &two)
			if n := len(operatorPodUIDs(ctx, t, c, r)); n != rolloutReplicas {
				expect.Fatalf(t, "%s upgraded with replicas: %d: expected %d operator pods, saw %d", r, rolloutReplicas, rolloutReplicas, n)
			}
			return ctx
		})).
		Assess(fmt.Sprintf("%d × kubectl rollout restart while certificates rotate: every write by the Lease holder at its revision", oneWriterHandOvers),
			suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
				log, err := watchWrites(ctx, c.Dynamic(), r)
				expect.NoError(t, err, "starting the watches of C12")
				defer log.stop()
				propagation, err := r.CAPropagation()
				expect.NoError(t, err, "reading the release's CA propagation")
				for i := range oneWriterHandOvers {
					start := time.Now()
					restartOperator(ctx, t, c, r, operatorPodUIDs(ctx, t, c, r))
					// Rotations under each new leader, so every term is judged on real writes.
					for j := range oneWriterTermRotation {
						waitSecretChanged(ctx, t, c, r, mustReadSecret(ctx, t, c, r), shortRotationPeriod+propagation+2*shortCheckInterval+convergeTimeout/4,
							fmt.Sprintf("rotation %d/%d after rollout restart %d/%d", j+1, oneWriterTermRotation, i+1, oneWriterHandOvers))
					}
					t.Logf("rollout restart %d/%d and %d rotations after it: %.1fs", i+1, oneWriterHandOvers, oneWriterTermRotation, time.Since(start).Seconds())
				}
				// The last write reached the Secret already; its watch event (and the caBundle
				// writes after it) arrive a moment later.
				_ = poll.Sleep(ctx, "the watch events of the last writes to arrive before the watches stop", reliabilityLoadMargin)
				log.stop()
				log.judge(ctx, t, r)
				return ctx
			})).
		Teardown(suite.ReleaseStep(func(ctx context.Context, t *testing.T, c *suite.Cluster, r *chart.Release) context.Context {
			restoreLongValidity(ctx, t, c, r)
			return ctx
		})).
		Feature()
}

// watched is one object C12 watches: its kind, where it is, and what in it counts as a write.
type watched struct {
	kind            string
	gvr             schema.GroupVersionResource
	namespace, name string
	// changes lists what changed from prev to cur (prev nil: created), with the field paths
	// whose owners wrote it.
	changes func(prev, cur *unstructured.Unstructured) []change
}

func (w watched) String() string {
	if w.namespace != "" {
		return w.kind + " " + w.namespace + "/" + w.name
	}
	return w.kind + " " + w.name
}

// change is one field a write changed: where, the values before and after (a caBundle's PEM,
// a Secret key's bytes), and the path to its owner in managedFields.
type change struct {
	place     string
	old, new  []byte
	ownerPath []string
	caBundle  bool
}

// write is one event that changed the Secret or a caBundle.
type write struct {
	object  string
	changes []change
	authors []string
	deleted bool
}

// event is one watch event C12 keeps: a write, or the Lease's holder at that revision.
type event struct {
	rv      string
	arrived time.Time
	write   *write
	lease   bool
	holder  string
}

// writeLog is the observation: every event of the watched objects from the start, and the
// Lease's holder when it began.
type writeLog struct {
	mu         sync.Mutex
	events     []event
	errs       []error
	initHolder string
	initRV     string

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

var (
	secretsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	leasesGVR     = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	validatingGVR = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
	mutatingGVR   = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}
	crdsGVR       = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// watchWrites lists each object C12 judges by name and watches it from the list's
// resourceVersion until stop; a dropped watch resumes where it left off (RetryWatcher), so no
// event between is lost.
func watchWrites(ctx context.Context, dyn dynamic.Interface, r *chart.Release) (*writeLog, error) {
	objects := []watched{
		{kind: "Secret", gvr: secretsGVR, namespace: r.Namespace, name: r.SecretName(), changes: secretChanges},
		{kind: "ValidatingWebhookConfiguration", gvr: validatingGVR, name: r.ValidatingName(), changes: webhookCABundleChanges},
		{kind: "MutatingWebhookConfiguration", gvr: mutatingGVR, name: r.MutatingName(), changes: webhookCABundleChanges},
	}
	if r.InstallsCRDs() {
		objects = append(objects, watched{kind: "CustomResourceDefinition", gvr: crdsGVR, name: chart.ConversionCRD, changes: conversionCABundleChanges})
	}
	lease := watched{kind: "Lease", gvr: leasesGVR, namespace: r.Namespace, name: r.LeaderElectionID()}

	ctx, cancel := context.WithCancel(ctx)
	l := &writeLog{cancel: cancel}
	for _, w := range append(objects, lease) {
		res := dyn.Resource(w.gvr).Namespace(w.namespace)
		selector := "metadata.name=" + w.name
		list, err := res.List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			l.stop()
			return nil, fmt.Errorf("listing %s: %w", w, err)
		}
		var prev *unstructured.Unstructured
		if len(list.Items) > 0 {
			prev = &list.Items[0]
		}
		if w.kind == "Lease" {
			l.initHolder, l.initRV = holderOf(prev), list.GetResourceVersion()
		}
		rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), &cache.ListWatch{
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.FieldSelector = selector
				return res.Watch(ctx, o)
			},
		})
		if err != nil {
			l.stop()
			return nil, fmt.Errorf("watching %s: %w", w, err)
		}
		l.wg.Go(func() { l.follow(ctx, w, rw, prev) })
	}
	return l, nil
}

// follow records w's events until ctx is done.
func (l *writeLog) follow(ctx context.Context, w watched, rw *watchtools.RetryWatcher, prev *unstructured.Unstructured) {
	defer rw.Stop()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return
		case ev, ok = <-rw.ResultChan():
		}
		if !ok {
			if ctx.Err() == nil {
				l.fail(fmt.Errorf("the watch of %s ended before the observation did", w))
			}
			return
		}
		if ev.Type == watch.Bookmark {
			continue
		}
		u, isObj := ev.Object.(*unstructured.Unstructured)
		if ev.Type == watch.Error || !isObj {
			l.fail(fmt.Errorf("watching %s: %v", w, ev.Object))
			return
		}
		e := event{rv: u.GetResourceVersion(), arrived: time.Now()}
		switch {
		case w.kind == "Lease":
			e.lease, e.holder = true, holderOf(u)
			if ev.Type == watch.Deleted {
				e.holder = ""
			}
		case ev.Type == watch.Deleted:
			e.write = &write{object: w.String(), deleted: true}
		default:
			if changes := w.changes(prev, u); len(changes) > 0 {
				e.write = &write{object: w.String(), changes: changes}
				for _, c := range changes {
					for _, a := range fieldOwners(u, c.ownerPath) {
						if !slices.Contains(e.write.authors, a) {
							e.write.authors = append(e.write.authors, a)
						}
					}
				}
			}
		}
		prev = u
		if ev.Type == watch.Deleted {
			prev = nil
		}
		if e.lease || e.write != nil {
			l.mu.Lock()
			l.events = append(l.events, e)
			l.mu.Unlock()
		}
	}
}

func (l *writeLog) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

// stop ends the watches and waits for them; more calls do nothing.
func (l *writeLog) stop() {
	l.once.Do(func() {
		l.cancel()
		l.wg.Wait()
	})
}

func holderOf(lease *unstructured.Unstructured) string {
	if lease == nil {
		return ""
	}
	h, _, _ := unstructured.NestedString(lease.Object, "spec", "holderIdentity")
	return h
}

// podOf is the pod behind a Lease holder: controller-runtime's leader-election identity is
// "<hostname>_<uuid>", and a pod's hostname is its name (which has no "_").
func podOf(holder string) string {
	pod, _, _ := strings.Cut(holder, "_")
	return pod
}

// secretChanges: every data key whose bytes changed; data.<key> is owned by its writer.
func secretChanges(prev, cur *unstructured.Unstructured) []change {
	before, after := secretData(prev), secretData(cur)
	keys := slices.Concat(slices.Collect(maps.Keys(after)), slices.Collect(maps.Keys(before)))
	slices.Sort(keys)
	var out []change
	for _, k := range slices.Compact(keys) {
		if !bytes.Equal(before[k], after[k]) {
			out = append(out, change{place: "data." + k, old: before[k], new: after[k], ownerPath: []string{"f:data", "f:" + k}})
		}
	}
	return out
}

func secretData(u *unstructured.Unstructured) map[string][]byte {
	out := map[string][]byte{}
	if u == nil {
		return out
	}
	data, _, _ := unstructured.NestedStringMap(u.Object, "data")
	for k, v := range data {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			b = []byte(v) // compared only, so the encoded form serves
		}
		out[k] = b
	}
	return out
}

// webhookCABundleChanges: every webhook whose caBundle changed; the webhooks list is keyed by
// name, so the owner path is webhooks[name=<n>].clientConfig.caBundle.
func webhookCABundleChanges(prev, cur *unstructured.Unstructured) []change {
	before, after := webhookBundles(prev), webhookBundles(cur)
	var out []change
	for _, wh := range slices.Sorted(maps.Keys(after)) {
		if old := before[wh]; !bytes.Equal(old, after[wh]) {
			out = append(out, change{place: "webhook " + wh, old: old, new: after[wh], caBundle: true,
				ownerPath: []string{"f:webhooks", "name=" + wh, "f:clientConfig", "f:caBundle"}})
		}
	}
	return out
}

func webhookBundles(u *unstructured.Unstructured) map[string][]byte {
	out := map[string][]byte{}
	if u == nil {
		return out
	}
	hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
	for _, h := range hooks {
		m, ok := h.(map[string]any)
		if !ok {
			continue
		}
		name, _, _ := unstructured.NestedString(m, "name")
		out[name] = decodedString(m, "clientConfig", "caBundle")
	}
	return out
}

// conversionCABundleChanges: the DGDR CRD's conversion webhook caBundle.
func conversionCABundleChanges(prev, cur *unstructured.Unstructured) []change {
	path := []string{"spec", "conversion", "webhook", "clientConfig", "caBundle"}
	var old []byte
	if prev != nil {
		old = decodedString(prev.Object, path...)
	}
	after := decodedString(cur.Object, path...)
	if bytes.Equal(old, after) {
		return nil
	}
	var owner []string
	for _, p := range path {
		owner = append(owner, "f:"+p)
	}
	return []change{{place: "conversion webhook", old: old, new: after, caBundle: true, ownerPath: owner}}
}

func decodedString(obj map[string]any, path ...string) []byte {
	s, _, _ := unstructured.NestedString(obj, path...)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return []byte(s)
	}
	return b
}

// fieldOwners lists the field managers of obj whose fieldsV1 hold path; a step "name=<n>"
// matches the keyed list entry `k:{"name":"<n>"}`.
func fieldOwners(obj *unstructured.Unstructured, path []string) []string {
	var out []string
	for _, m := range obj.GetManagedFields() {
		var fields map[string]any
		if m.FieldsV1 == nil || json.Unmarshal(m.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		if holdsPath(fields, path) {
			out = append(out, m.Manager)
		}
	}
	return out
}

func holdsPath(fields map[string]any, path []string) bool {
	if len(path) == 0 {
		return true
	}
	for key, sub := range fields {
		if !stepMatches(key, path[0]) {
			continue
		}
		next, _ := sub.(map[string]any)
		if holdsPath(next, path[1:]) {
			return true
		}
	}
	return false
}

func stepMatches(key, step string) bool {
	name, keyed := strings.CutPrefix(step, "name=")
	if !keyed {
		return key == step
	}
	enc, ok := strings.CutPrefix(key, "k:")
	if !ok {
		return false
	}
	var k map[string]any
	return json.Unmarshal([]byte(enc), &k) == nil && k["name"] == name
}

// onlyAdded reports whether every CA of old is still in new: a write that added trust.
func onlyAdded(old, new []byte) bool {
	if len(bytes.TrimSpace(old)) == 0 {
		return true
	}
	before, err := certutil.ParseCertsPEM(old)
	if err != nil {
		return false
	}
	after, err := certutil.ParseCertsPEM(new)
	if err != nil {
		return false
	}
	for _, b := range before {
		if !slices.ContainsFunc(after, b.Equal) {
			return false
		}
	}
	return true
}

// ordered returns the events in the order the API server made them. One etcd stores the
// Secret, the webhook configurations, the CRD and the Lease, and a resourceVersion is its
// revision: integers, comparable across objects (an API server with --etcd-servers-overrides
// for one of these resources would break that; the providers C12 runs on have one etcd). If any
// resourceVersion is not an integer (a provider whose storage is not etcd), the arrival order
// is all there is: numeric is false, and the judgement allows for arrivalSkew.
func (l *writeLog) ordered() (events []event, numeric bool) {
	l.mu.Lock()
	events = slices.Clone(l.events)
	l.mu.Unlock()
	revs := map[string]uint64{}
	numeric = true
	for _, e := range events {
		rev, err := strconv.ParseUint(e.rv, 10, 64)
		numeric = numeric && err == nil
		revs[e.rv] = rev
	}
	slices.SortStableFunc(events, func(a, b event) int {
		if numeric {
			return cmp.Compare(revs[a.rv], revs[b.rv])
		}
		return a.arrived.Compare(b.arrived)
	})
	return events, numeric
}

// tenure is one holder of the Lease from a revision on.
type tenure struct {
	holder, since string
	arrived       time.Time
}

// judge checks the observation: every Secret write by the Lease holder at its revision, every
// caBundle write by the holder or adding trust only (a starting replica), and enough rotations
// and hand-overs to mean something.
func (l *writeLog) judge(ctx context.Context, t *testing.T, r *chart.Release) {
	t.Helper()
	l.mu.Lock()
	errs := slices.Clone(l.errs)
	l.mu.Unlock()
	if len(errs) > 0 {
		expect.Fatalf(t, "C12 must see every write from the API server, but the observation is incomplete: %v", errors.Join(errs...))
	}
	events, numeric := l.ordered()
	if !numeric {
		t.Logf("resourceVersions are not integers here: writes and Lease changes are ordered by arrival, each write judged against the holders within %s of it", arrivalSkew)
	}
	leaseRef := r.Namespace + "/" + r.LeaderElectionID()
	cur := tenure{holder: l.initHolder, since: l.initRV}
	// Every holder change, for the arrival-order judgement: a write may be judged against a
	// tenure that began (in arrival order) just after it.
	tenures := []tenure{cur}
	for _, e := range events {
		if last := tenures[len(tenures)-1]; e.lease && e.holder != last.holder {
			tenures = append(tenures, tenure{holder: e.holder, since: e.rv, arrived: e.arrived})
		}
	}
	var lastPod string
	if cur.holder != "" {
		lastPod = podOf(cur.holder)
	}
	handOvers, rotations, secretWrites, bundleWrites, repairs := 0, 0, 0, 0, 0
	// A Secret written by another writer is the bug itself; caBundle writes follow from it.
	var secretViolations, bundleViolations []string
	for _, e := range events {
		if e.lease {
			if e.holder != cur.holder {
				cur = tenure{holder: e.holder, since: e.rv, arrived: e.arrived}
				if pod := podOf(e.holder); pod != "" && pod != lastPod {
					if lastPod != "" {
						handOvers++
					}
					lastPod = pod
				}
			}
			continue
		}
		w := e.write
		holders := []tenure{cur}
		if !numeric {
			holders = append(holders, tenuresNear(tenures, e.arrived)...)
		}
		byHolder := w.authoredBy(holders)
		isSecret := strings.HasPrefix(w.object, "Secret ")
		switch {
		case isSecret:
			secretWrites++
			if w.changed("data.tls.crt") {
				rotations++
			}
		default:
			bundleWrites++
		}
		switch {
		case byHolder:
		case !isSecret && !w.deleted && w.onlyAddedTrust():
			repairs++
			t.Logf("startup repair: %s at resourceVersion %s: trust added by %s while %s held the Lease — %s", w.object, e.rv, w.authorsString(), describeHolder(cur), w.describe())
		default:
			v := fmt.Sprintf("%s at resourceVersion %s: %s by %s while %s held the Lease (since resourceVersion %s) — %s",
				w.object, e.rv, w.verb(), w.authorsString(), describeHolder(cur), cur.since, w.describe())
			if isSecret {
				secretViolations = append(secretViolations, v)
			} else {
				bundleViolations = append(bundleViolations, v)
			}
		}
	}
	suite.Note(ctx, t, "handOvers", handOvers)
	suite.Note(ctx, t, "rotations", rotations)
	suite.Note(ctx, t, "secretWrites", secretWrites)
	suite.Note(ctx, t, "caBundleWrites", bundleWrites)
	suite.Note(ctx, t, "startupRepairs", repairs)
	suite.Note(ctx, t, "orderedByResourceVersion", numeric)
	t.Logf("observed %d events: %d hand-overs, %d rotations, %d Secret writes, %d caBundle writes (%d startup repairs)", len(events), handOvers, rotations, secretWrites, bundleWrites, repairs)
	if n := len(secretViolations) + len(bundleViolations); n > 0 {
		const show = 8
		shown := slices.Concat(secretViolations, bundleViolations)[:min(n, show)]
		expect.Errorf(t, "expected only the holder of Lease %s to write Secret %s/%s and the caBundles (a pod that does not hold it may only add a CA a caBundle lacks), saw %d such writes by another writer (%d of the Secret, %d of caBundles); the first %d, Secret writes first:\n  %s",
			leaseRef, r.Namespace, r.SecretName(), n, len(secretViolations), len(bundleViolations), len(shown), strings.Join(shown, "\n  "))
	}
	if handOvers < oneWriterHandOvers {
		expect.Errorf(t, "expected at least %d leader hand-overs of Lease %s during the observation (%d rollout restarts), saw %d: C12 judged too few leaders to prove anything", oneWriterHandOvers, leaseRef, oneWriterHandOvers, handOvers)
	}
	if rotations < oneWriterMinRotations {
		expect.Errorf(t, "expected at least %d certificate rotations (Secret %s/%s data.tls.crt changed) during the observation, saw %d: C12 judged too few writes to prove anything", oneWriterMinRotations, r.Namespace, r.SecretName(), rotations)
	}
}

// tenuresNear are the tenures that began or ended within arrivalSkew of at (arrival-order
// judgement); tenures[0] is the one the observation began in.
func tenuresNear(tenures []tenure, at time.Time) []tenure {
	var out []tenure
	for i := 1; i < len(tenures); i++ {
		if d := tenures[i].arrived.Sub(at); d > -arrivalSkew && d < arrivalSkew {
			out = append(out, tenures[i-1], tenures[i])
		}
	}
	return out
}

func describeHolder(tn tenure) string {
	if tn.holder == "" {
		return "nobody"
	}
	return fmt.Sprintf("%q (field manager %s%s)", tn.holder, replicaFieldManager, podOf(tn.holder))
}

// authoredBy reports whether the write's only author is the field manager of one of holders.
func (w *write) authoredBy(holders []tenure) bool {
	if w.deleted || len(w.authors) != 1 {
		return false
	}
	for _, h := range holders {
		if h.holder != "" && w.authors[0] == replicaFieldManager+podOf(h.holder) {
			return true
		}
	}
	return false
}

// onlyAddedTrust: a replica's caBundle write after which every bundle still holds each CA it
// held before.
func (w *write) onlyAddedTrust() bool {
	for _, a := range w.authors {
		if !strings.HasPrefix(a, replicaFieldManager) {
			return false
		}
	}
	for _, c := range w.changes {
		if !c.caBundle || !onlyAdded(c.old, c.new) {
			return false
		}
	}
	return len(w.authors) > 0
}

func (w *write) changed(place string) bool {
	return slices.ContainsFunc(w.changes, func(c change) bool { return c.place == place })
}

func (w *write) authorsString() string {
	if len(w.authors) == 0 {
		return "an unknown writer (no field manager owns the changed fields)"
	}
	return strings.Join(w.authors, " and ")
}

// verb says what the write did.
func (w *write) verb() string {
	if w.deleted {
		return "deleted"
	}
	return "written"
}

// describe lists the changed fields; caBundles with the serials of their CAs before and
// after, the places that changed alike named together.
func (w *write) describe() string {
	if w.deleted {
		return "the object is gone"
	}
	type edit struct{ old, new string }
	places := map[edit][]string{}
	var edits []edit
	var parts []string
	for _, c := range w.changes {
		if !c.caBundle {
			parts = append(parts, c.place)
			continue
		}
		e := edit{string(c.old), string(c.new)}
		if places[e] == nil {
			edits = append(edits, e)
		}
		places[e] = append(places[e], c.place)
	}
	for _, e := range edits {
		parts = append(parts, fmt.Sprintf("caBundle of %s: CAs [%s] → [%s]", strings.Join(places[e], ", "), caSerials([]byte(e.old)), caSerials([]byte(e.new))))
	}
	return "changed " + strings.Join(parts, "; ")
}

// caSerials names a bundle's CAs by serial (they share their subject).
func caSerials(bundle []byte) string {
	certs, err := certutil.ParseCertsPEM(bundle)
	if err != nil {
		return "none"
	}
	var out []string
	for _, c := range certs {
		out = append(out, pki.SerialHex(c))
	}
	return strings.Join(out, " + ")
}
