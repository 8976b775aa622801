package contract

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/rawhttp"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// hostileInput is W10: what anyone who reaches a webhook server can send it, to every path the
// API server posts to — each webhook's, each conversion CRD's — through the Service and
// directly at every Ready serving pod (tlsRoutes), over TLS as the API server speaks it. These
// are other people's operators, so the judgement is what any webhook owes the cluster, not a
// status code of ours: every input gets an answer or a close within a stated bound, and none
// is ever admitted — a malformed request answered 2xx with an AdmissionReview allowing it is a
// webhook failing open (a ConversionReview converted, on a conversion path). What each answers
// is noted per input, path and route. Afterwards no pod of the Deployment was replaced or
// restarted, the serving container's memory (the kubelet's working set) rose no more than
// memoryHeadroom, and every webhook still judges its probe (as W1).
func hostileInput() e2etypes.Feature {
	var ns string
	var before map[types.UID]podRun
	return features.New("hostile input to every webhook path, through the Service and at every serving pod, is answered or closed in time and never admitted; no pod restarts, memory stays bounded").
		WithLabel(suite.LabelScenario, "W10").
		Setup(suite.NamespaceSetup(&ns, "w10")).
		Assess("every hostile input to every webhook path, on every route, gets an answer or a close within its bound and is never admitted", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			before = podRuns(ctx, t, c, it)
			paths := hostilePaths(ctx, t, c, it, ns)
			routes := tlsRoutes(ctx, t, c, it)
			pods := readyPods(ctx, t, c, it, 1)
			memory, err := watchMemory(ctx, c, pods, it.Served.Container)
			expect.NoError(t, err, "reading the working set of container %s of every Ready pod from the kubelet (W10's memory bound)", it.Served.Container)
			start := time.Now()
			seen := sendHostile(ctx, paths, routes)
			suite.Note(ctx, t, "seconds", time.Since(start).Round(100*time.Millisecond).Seconds())
			memory.finish(ctx, c, pods)
			suite.Note(ctx, t, "memory", memory.report())
			if over := memory.overBound(); len(over) > 0 {
				expect.Errorf(t, "expected the serving container's working set to stay within %d MiB of its level before the hostile input; saw:\n  %s", memoryHeadroom>>20, strings.Join(over, "\n  "))
			}
			if len(memory.failures) > 0 {
				expect.Errorf(t, "expected the kubelet to report the serving container's memory throughout the hostile input; reading it failed: %s", strings.Join(memory.failures, "; "))
			}
			suite.Note(ctx, t, "paths", pathNames(paths))
			var wrong []string
			for _, in := range hostileInputs() {
				suite.Note(ctx, t, in.name, outcomes(seen, in.name, paths, len(routes)))
			}
			for _, s := range seen {
				if w := s.judge(); w != "" {
					wrong = append(wrong, w)
				}
			}
			if len(wrong) > 0 {
				expect.Errorf(t, "%d of %d hostile inputs were not answered or closed within their bound, or were admitted:\n  %s",
					len(wrong), len(seen), strings.Join(firstOf(wrong, 30), "\n  "))
			}
			return ctx
		}).
		Assess("no pod of the Deployment was replaced or restarted, and every webhook still judges its probe, through the API server and at every Ready pod", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			if before == nil {
				expect.Skipf(t, "no hostile input was sent: the step before failed before sending it (its message says why)")
			}
			if changed := replacedOrRestarted(before, podRuns(ctx, t, c, it)); len(changed) > 0 {
				expect.Errorf(t, "expected every pod of Deployment %s/%s to run on through the hostile input, the same pod (UID) with the same restartCount; saw:\n  %s",
					it.Namespace, it.Served.Deployment, strings.Join(changed, "\n  "))
			}
			deadline := time.Now().Add(heldTimeout)
			expectAnswers(ctx, t, c, it, ns, deadline)
			expectEveryPodJudges(ctx, t, c, it, readyPods(ctx, t, c, it, 1), ns, deadline, " after the hostile input")
			return ctx
		}).Feature()
}

// The bounds of W10. Each holds a server that refuses at once with room to spare — on a shared
// 2-core machine, through kind's extra hop — and is what a server must keep to whatever its
// limits are.
const (
	// answerBound bounds the answer to a request that arrives whole and at once: the API
	// server's default timeoutSeconds (10 s). An answer later than that would have failed the
	// API server's own call, whatever it said.
	answerBound = 10 * time.Second
	// hugeBound bounds the answer to a 100 MB body: the longest timeoutSeconds the API server
	// allows (30 s). A server with a body limit answers as soon as the limit is read; one that
	// reads all 100 MB still must not keep the sender longer than any call of the API server.
	hugeBound = 30 * time.Second
	// stallBound bounds how long a server keeps a connection that never completes a request:
	// headers that never end, nothing sent after the handshake. Go's http.Server waits for ever
	// unless given a ReadHeaderTimeout or ReadTimeout (controller-runtime's webhook server sets
	// 32 s); a server that keeps such connections without end holds a file descriptor and a
	// goroutine for each — the slowloris attack.
	stallBound = time.Minute
	// slowHeaderEvery is the slowloris trickle: a header line every 2 s keeps a server that only
	// times out idle reads waiting.
	slowHeaderEvery = 2 * time.Second
	// hugeBody is the size of the huge bodies: streamed, never held here. Far over any limit
	// a webhook needs (controller-runtime's is 7 MiB; the API server's own requests are ≤ 3 MB).
	hugeBody = 100 << 20
	// hugeAtOnce is how many huge bodies go to one route at once.
	hugeAtOnce = 4
	// quickAtOnce is how many of the other inputs go to one route at once.
	quickAtOnce = 4
	// nestingDepth is ten times the depth Go's JSON decoders accept (10,000).
	nestingDepth = 100_000
	// heldTimeout bounds the wait, after the input, for every webhook to judge its probe: a
	// server that held answers at once; this leaves room for a busy machine.
	heldTimeout = 30 * time.Second
)

// hostilePath is one path the API server posts to, and what W10 sends there.
type hostilePath struct {
	path       string
	conversion bool
	callers    []string // the webhooks, or the CRDs, that name it
	// tls is what the API server checks on a call to it: the first caller's caBundle, the
	// Service's name, HTTP/1.1 (the API server offers h2 too; these inputs are HTTP/1.1).
	tls *tls.Config
	// review is a well-formed review its callers send: the judging probe of one of its
	// webhooks (validating first: its denied object), or, when none has one, a review of no
	// object; on a conversion path a ConversionReview of no object.
	review []byte
	// judged is the webhook whose probe review is (nil: none); apiVersion is a version of
	// the conversion CRD, to convert to.
	judged     *probed
	apiVersion string
}

// reviewStart is the start of the review path's callers send, for bodies built around it.
func (p hostilePath) reviewStart() string {
	if p.conversion {
		return `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"`
	}
	return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"`
}

// hostilePaths are the paths of every webhook the target serves (each once) and of every
// conversion CRD's webhook, read from the cluster.
func hostilePaths(ctx context.Context, t *testing.T, c *suite.Cluster, it *target.Installed, ns string) []hostilePath {
	t.Helper()
	judged, _ := probedWebhooks(it)
	var paths []hostilePath
	index := map[string]int{}
	for _, w := range it.Served.Webhooks {
		caller := kindOf(w.Mutating) + " webhook " + w.Name
		if i, ok := index[w.Path]; ok {
			paths[i].callers = append(paths[i].callers, caller)
			continue
		}
		index[w.Path] = len(paths)
		paths = append(paths, hostilePath{path: w.Path, callers: []string{caller}, tls: serviceTLS(it, webhookRoots(ctx, t, c, w))})
	}
	for i := range paths {
		paths[i].judged, paths[i].review = judgingReview(t, c, it, judged, paths[i].path, ns)
	}
	for _, name := range it.Served.ConversionCRDs {
		crd, err := c.CRDs().ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		expect.NoError(t, err, "reading CustomResourceDefinition %s", name)
		conv := crd.Spec.Conversion
		if conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil || conv.Webhook.ClientConfig.Service == nil {
			expect.Fatalf(t, "expected CustomResourceDefinition %s, a conversion CRD of Service %s/%s, to name the Service as its conversion webhook; saw %+v", name, it.Namespace, it.Served.Service, conv)
		}
		path := "/" // the API server's default
		if p := conv.Webhook.ClientConfig.Service.Path; p != nil {
			path = *p
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(conv.Webhook.ClientConfig.CABundle) {
			expect.Fatalf(t, "expected a PEM caBundle in the conversion webhook of CustomResourceDefinition %s; saw %d bytes", name, len(conv.Webhook.ClientConfig.CABundle))
		}
		p := hostilePath{path: path, conversion: true, callers: []string{"conversion webhook of CustomResourceDefinition " + name}, tls: serviceTLS(it, roots),
			apiVersion: crd.Spec.Group + "/" + crd.Spec.Versions[0].Name}
		p.review = []byte(p.reviewStart() + `gauntlet-w10","desiredAPIVersion":"` + p.apiVersion + `","objects":[]}}`)
		paths = append(paths, p)
	}
	if len(paths) == 0 {
		expect.Fatalf(t, "expected target %s to serve at least one webhook path; its chart registers none", it.Target.Name)
	}
	return paths
}

// serviceTLS is the TLS the API server speaks to the Service: roots (a caBundle), the
// Service's name, HTTP/1.1.
func serviceTLS(it *target.Installed, roots *x509.CertPool) *tls.Config {
	return &tls.Config{RootCAs: roots, ServerName: it.Served.ServiceHost(), MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
}

// judgingReview is the review the API server sends path for the judging probe of one of its
// webhooks — a validating one's denied object first, so that admitting it is failing open —
// or, when none of its webhooks has a probe, an AdmissionReview of no object.
func judgingReview(t *testing.T, c *suite.Cluster, it *target.Installed, judged []probed, path, ns string) (*probed, []byte) {
	t.Helper()
	var pick *probed
	for i := range judged {
		if judged[i].Path == path && (pick == nil || pick.Mutating && !judged[i].Mutating) {
			pick = &judged[i]
		}
	}
	if pick == nil {
		return nil, []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"gauntlet-w10","operation":"CREATE"}}`)
	}
	review, err := reviewOf(c, object(t, it, pick.judging()), ns)
	expect.NoError(t, err, "building the AdmissionReview of %s, webhook %s's probe", pick.judging(), pick.Name)
	b, err := json.Marshal(review)
	expect.NoError(t, err, "encoding the AdmissionReview of %s", pick.judging())
	return pick, b
}

func pathNames(paths []hostilePath) []string {
	var out []string
	for _, p := range paths {
		out = append(out, fmt.Sprintf("%s (%s)", p.path, strings.Join(p.callers, ", ")))
	}
	return out
}

// hostileKind says how an input is sent: as a request, or as a connection silent after its
// handshake.
type hostileKind int

const (
	quick  hostileKind = iota // a request sent whole and at once
	huge                      // a 100 MB body: hugeAtOnce at a time per route
	stall                     // never completes: all at once, each waits out the server
	silent                    // a TLS handshake, then nothing (one per route)
)

// hostileInputDef is one kind of hostile input: its name in the report and messages, its bound,
// and the request it makes of a path.
type hostileInputDef struct {
	name  string
	kind  hostileKind
	bound time.Duration
	// request is the input for path p (nil for silent).
	request func(p hostilePath) rawhttp.Request
	// wellFormed says the body is a review the API server could send (only its header is
	// wrong): admitting it is failing open only when the webhook did not judge it.
	wellFormed bool
}

// hostileInputs are W10's inputs, in the report's order.
func hostileInputs() []hostileInputDef {
	post := func(p hostilePath, contentType string, body []byte, what string) rawhttp.Request {
		return rawhttp.Send(http.MethodPost, p.path, contentType, body, what)
	}
	return []hostileInputDef{
		{name: "an empty body", kind: quick, bound: answerBound, request: func(p hostilePath) rawhttp.Request {
			return post(p, "application/json", nil, "an empty body")
		}},
		{name: "a truncated review", kind: quick, bound: answerBound, request: func(p hostilePath) rawhttp.Request {
			return post(p, "application/json", p.review[:len(p.review)/2], "a truncated review")
		}},
		{name: "binary garbage", kind: quick, bound: answerBound, request: func(p hostilePath) rawhttp.Request {
			return post(p, "application/json", []byte("\x00\xff\xfe\x1f\x8b\x08{\x80\x81\"\xc3("), "binary garbage")
		}},
		{name: "JSON nested 100,000 deep", kind: quick, bound: answerBound, request: func(p hostilePath) rawhttp.Request {
			nested := strings.Repeat(`{"a":`, nestingDepth) + "1" + strings.Repeat("}", nestingDepth)
			body := p.reviewStart() + `gauntlet-w10","object":` + nested + "}}"
			if p.conversion {
				body = p.reviewStart() + `gauntlet-w10","desiredAPIVersion":"` + p.apiVersion + `","objects":[` + nested + "]}}"
			}
			return post(p, "application/json", []byte(body), "a review nested 100,000 deep")
		}},
		{name: "GET instead of POST", kind: quick, bound: answerBound, request: func(p hostilePath) rawhttp.Request {
			return rawhttp.Request{Method: http.MethodGet, Path: p.path, Length: -1, What: "GET instead of POST"}
		}},
		{name: "Content-Type text/plain", kind: quick, bound: answerBound, wellFormed: true, request: func(p hostilePath) rawhttp.Request {
			return post(p, "text/plain", p.review, "a review as text/plain")
		}},
		{name: "2 MiB of headers", kind: quick, bound: answerBound, request: func(p hostilePath) rawhttp.Request {
			line := "X-Padding: " + strings.Repeat("h", 64<<10) + "\r\n"
			return rawhttp.Request{Method: http.MethodPost, Path: p.path, ContentType: "application/json", Length: 0,
				Headers: strings.Repeat(line, 32), What: "2 MiB of headers"}
		}},
		{name: "a 100 MB body (Content-Length)", kind: huge, bound: hugeBound, request: func(p hostilePath) rawhttp.Request {
			return rawhttp.Request{Method: http.MethodPost, Path: p.path, ContentType: "application/json", Length: hugeBody,
				Body: rawhttp.Streamed(hugeBody, p.reviewStart(), `"}}`), What: "a " + rawhttp.SizeName(hugeBody) + " body (Content-Length)"}
		}},
		{name: "a 100 MB body (chunked)", kind: huge, bound: hugeBound, request: func(p hostilePath) rawhttp.Request {
			return rawhttp.Request{Method: http.MethodPost, Path: p.path, ContentType: "application/json", Length: -1, Chunked: true,
				Body: rawhttp.Streamed(hugeBody, p.reviewStart(), `"}}`), What: "a " + rawhttp.SizeName(hugeBody) + " body (chunked)"}
		}},
		{name: "slowloris headers", kind: stall, bound: stallBound, request: func(p hostilePath) rawhttp.Request {
			return rawhttp.Request{Method: http.MethodPost, Path: p.path, Length: -1, SlowHeaders: slowHeaderEvery,
				What: fmt.Sprintf("headers that never end (a line every %s)", slowHeaderEvery)}
		}},
		{name: "a silent TLS connection", kind: silent, bound: stallBound},
	}
}

// hostileSeen is what one input to one path on one route got.
type hostileSeen struct {
	input hostileInputDef
	path  *hostilePath // nil for a silent connection, which is per route
	route string
	a     rawhttp.Answer
	// connect is why no input could be sent: the route refused a connection or a handshake.
	connect error
}

// sendHostile sends every input to every path on every route: the stalls at once (each waits
// out the server), the others quickAtOnce and the huge bodies hugeAtOnce at a time per route.
func sendHostile(ctx context.Context, paths []hostilePath, routes []tlsRoute) []hostileSeen {
	var seen []hostileSeen
	for _, in := range hostileInputs() {
		for _, r := range routes {
			if in.kind == silent {
				seen = append(seen, hostileSeen{input: in, route: r.name})
				continue
			}
			for i := range paths {
				seen = append(seen, hostileSeen{input: in, path: &paths[i], route: r.name})
			}
		}
	}
	byName := map[string]tlsRoute{}
	quickSlots, hugeSlots := map[string]chan struct{}{}, map[string]chan struct{}{}
	for _, r := range routes {
		byName[r.name] = r
		quickSlots[r.name], hugeSlots[r.name] = make(chan struct{}, quickAtOnce), make(chan struct{}, hugeAtOnce)
	}
	var wg sync.WaitGroup
	for i := range seen {
		s := &seen[i]
		var slots chan struct{}
		switch s.input.kind {
		case quick:
			slots = quickSlots[s.route]
		case huge:
			slots = hugeSlots[s.route]
		}
		wg.Go(func() {
			if slots != nil {
				slots <- struct{}{}
				defer func() { <-slots }()
			}
			cfg := paths[0].tls
			if s.path != nil {
				cfg = s.path.tls
			}
			s.a, s.connect = sendOne(ctx, byName[s.route], cfg, s.input, s.path)
		})
	}
	wg.Wait()
	return seen
}

// sendOne opens a connection by r, completes the API server's handshake and sends in (to path
// p), waiting a second longer than the input's bound for the answer or the close.
func sendOne(ctx context.Context, r tlsRoute, cfg *tls.Config, in hostileInputDef, p *hostilePath) (rawhttp.Answer, error) {
	// Connecting — the dial and the handshake — takes at most handshakeBound: a dial that hangs
	// would hold its slot, and every input waiting for one, until the test's own timeout. The
	// connection outlives the bound (every provider's dial lets it).
	cctx, cancel := context.WithTimeout(ctx, handshakeBound)
	defer cancel()
	raw, err := r.dial(cctx)
	if err != nil {
		return rawhttp.Answer{}, err
	}
	conn := tls.Client(raw, cfg.Clone())
	if err := conn.HandshakeContext(cctx); err != nil {
		_ = raw.Close()
		return rawhttp.Answer{}, fmt.Errorf("TLS handshake: %w", err)
	}
	wait := in.bound + time.Second
	if in.kind == silent {
		return quiet(ctx, conn, wait), nil
	}
	return rawhttp.Exchange(ctx, conn, in.request(*p), wait), nil
}

// quiet sends nothing on conn and waits at most wait for the server to close it; what the
// server sends meanwhile is read and dropped. It closes conn.
func quiet(ctx context.Context, conn *tls.Conn, wait time.Duration) rawhttp.Answer {
	defer func() { _ = conn.Close() }()
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(wait))
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Now()) })
	defer stop()
	_, err := io.Copy(io.Discard, conn)
	a := rawhttp.Answer{Took: time.Since(start), Err: errors.New("the server closed the connection")}
	if rawhttp.IsTimeout(err) {
		a.Err = fmt.Errorf("still open after %s", wait)
	} else if err != nil {
		a.Err = fmt.Errorf("the server ended the connection: %w", err)
	}
	return a
}

// judge says what is wrong with s ("" when nothing is): the input must be answered or closed
// within its bound, and never admitted.
func (s hostileSeen) judge() string {
	in, a := s.input, s.a
	what := in.name
	if s.path != nil {
		what += " to " + s.path.path
	}
	what += " " + s.route
	switch {
	case s.connect != nil:
		return fmt.Sprintf("%s: no connection to send it on: %v", what, s.connect)
	case a.Took > in.bound || (a.Err != nil && rawhttp.IsTimeout(a.Err)):
		return fmt.Sprintf("%s: expected an answer or the connection closed within %s; saw %s", what, in.bound, a)
	}
	if admitted := s.admitted(); admitted != "" {
		return fmt.Sprintf("%s: expected it refused (an error status, or a review refusing it), never admitted; saw it %s: %s", what, admitted, a)
	}
	return ""
}

// admitted says how s's answer admits the input — "admitted (allowed: true)" — or "".
// A 2xx AdmissionReview allowing a malformed request is a webhook failing open; a 2xx
// ConversionReview with a Success result is a conversion of what is no conversion request. A
// well-formed review with only a wrong header may be judged instead of refused: admitted, it
// must show its webhook's judgement (the patch of a mutating webhook's probe; a validating
// webhook's probe is its denied object, never admitted).
func (s hostileSeen) admitted() string {
	a := s.a
	if s.path == nil || a.Err != nil || a.Status < 200 || a.Status > 299 {
		return ""
	}
	var review struct {
		Response *struct {
			UID     types.UID `json:"uid"`
			Allowed bool      `json:"allowed"`
			Patch   []byte    `json:"patch"`
			Result  *struct {
				Status string `json:"status"`
			} `json:"result"`
		} `json:"response"`
	}
	if json.Unmarshal([]byte(a.Body), &review) != nil || review.Response == nil {
		return ""
	}
	r := review.Response
	if s.path.conversion {
		if r.Result == nil || r.Result.Status != metav1.StatusSuccess || s.input.wellFormed {
			return ""
		}
		return "converted (result: Success)"
	}
	if !r.Allowed {
		return ""
	}
	if s.input.wellFormed && s.path.judged != nil && s.path.judged.Mutating && len(r.Patch) > 0 {
		return "" // judged: W3 and W14 judge the patch itself
	}
	if s.input.wellFormed && s.path.judged == nil {
		return "" // a review of no object, only its header wrong: nothing to judge it by
	}
	return "admitted (allowed: true)"
}

// outcome names what came back, for the report: "HTTP 200, AdmissionReview allowed: false
// (code 400)", "HTTP 415, closed", "closed without an answer".
func (s hostileSeen) outcome() string {
	a := s.a
	switch {
	case s.connect != nil:
		return "no connection"
	case a.Err != nil && rawhttp.IsTimeout(a.Err), a.Err != nil && strings.HasPrefix(a.Err.Error(), "still "):
		return "no answer, left open"
	case a.Err != nil && strings.Contains(a.Err.Error(), "reset"):
		return "reset without an answer"
	case a.Err != nil:
		return "closed without an answer"
	}
	out := fmt.Sprintf("HTTP %d", a.Status)
	var review struct {
		Kind     string `json:"kind"`
		Response *struct {
			Allowed bool `json:"allowed"`
			Status  *struct {
				Code int32 `json:"code"`
			} `json:"status"`
			Result *struct {
				Status string `json:"status"`
				Code   int32  `json:"code"`
			} `json:"result"`
		} `json:"response"`
	}
	if json.Unmarshal([]byte(a.Body), &review) == nil && review.Response != nil {
		r := review.Response
		switch {
		case s.path != nil && s.path.conversion && r.Result != nil:
			out += fmt.Sprintf(", ConversionReview %s (code %d)", r.Result.Status, r.Result.Code)
		case r.Status != nil:
			out += fmt.Sprintf(", AdmissionReview allowed: %t (code %d)", r.Allowed, r.Status.Code)
		default:
			out += fmt.Sprintf(", AdmissionReview allowed: %t", r.Allowed)
		}
	}
	if a.Closed {
		out += ", closed"
	}
	return out
}

// outcomes is what input got on every path and route, for the report: each outcome once, with
// the slowest answer and where it was seen — "every path and route", "every admission path on
// every route", paths seen on every route, then each path and route left.
func outcomes(seen []hostileSeen, input string, paths []hostilePath, routes int) []string {
	type group struct {
		routes  map[string][]string // path ("" for a silent connection) → routes
		slowest time.Duration
	}
	groups := map[string]*group{}
	for _, s := range seen {
		if s.input.name != input {
			continue
		}
		o := s.outcome()
		g := groups[o]
		if g == nil {
			g = &group{routes: map[string][]string{}}
			groups[o] = g
		}
		path := ""
		if s.path != nil {
			path = s.path.path
		}
		g.routes[path] = append(g.routes[path], s.route)
		g.slowest = max(g.slowest, s.a.Took)
	}
	var out []string
	for o, g := range groups {
		out = append(out, fmt.Sprintf("%s (slowest %s): %s", o, g.slowest.Round(10*time.Millisecond), where(g.routes, paths, routes)))
	}
	slices.Sort(out)
	return out
}

// where says where an outcome was seen, given the routes it was seen on by path.
func where(byPath map[string][]string, paths []hostilePath, routes int) string {
	if rs, ok := byPath[""]; ok { // a silent connection: per route
		if len(rs) == routes {
			return "every route"
		}
		return strings.Join(rs, "; ")
	}
	everyRoute := map[string]bool{}
	for p, rs := range byPath {
		everyRoute[p] = len(rs) == routes
	}
	var admission, conversion, full, rest []string
	for _, p := range paths {
		switch {
		case p.conversion:
			conversion = append(conversion, p.path)
		default:
			admission = append(admission, p.path)
		}
		if everyRoute[p.path] {
			full = append(full, p.path)
		} else {
			for _, r := range byPath[p.path] {
				rest = append(rest, p.path+" "+r)
			}
		}
	}
	all := func(of []string) bool {
		return len(of) > 0 && !slices.ContainsFunc(of, func(p string) bool { return !everyRoute[p] })
	}
	var parts []string
	switch {
	case len(full) == len(paths):
		return "every path and route"
	case all(admission) && len(full) == len(admission):
		parts = append(parts, "every admission path on every route")
	case all(conversion) && len(full) == len(conversion):
		parts = append(parts, "every conversion path on every route")
	case len(full) > 0:
		parts = append(parts, strings.Join(full, ", ")+" on every route")
	}
	return strings.Join(append(parts, rest...), "; ")
}

// podRun is one pod of the Deployment as it runs: its name and each container's restartCount.
type podRun struct {
	name     string
	restarts map[string]int32
	// lastEnd is, by container, how its previous run ended (reason and exit code), if it did.
	lastEnd map[string]string
}

// podRuns are the Deployment's pods not being deleted, by UID.
func podRuns(ctx context.Context, t *testing.T, c *suite.Cluster, it *target.Installed) map[types.UID]podRun {
	t.Helper()
	pods, err := release.DeploymentPods(ctx, c.Kube(), it.Namespace, it.Served.Deployment)
	expect.NoError(t, err, "listing the pods of Deployment %s/%s", it.Namespace, it.Served.Deployment)
	return runsOf(pods)
}

func runsOf(pods []corev1.Pod) map[types.UID]podRun {
	runs := map[types.UID]podRun{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		r := podRun{name: p.Name, restarts: map[string]int32{}, lastEnd: map[string]string{}}
		for _, s := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			r.restarts[s.Name] = s.RestartCount
			if end := s.LastTerminationState.Terminated; end != nil {
				r.lastEnd[s.Name] = fmt.Sprintf("%s, exit code %d", end.Reason, end.ExitCode)
			}
		}
		runs[p.UID] = r
	}
	return runs
}

// replacedOrRestarted lists how after differs from before: a pod gone or being deleted, a
// new pod, a container whose restartCount rose.
func replacedOrRestarted(before, after map[types.UID]podRun) []string {
	var out []string
	for uid, b := range before {
		a, ok := after[uid]
		if !ok {
			out = append(out, fmt.Sprintf("pod %s (UID %s) is gone or being deleted", b.name, uid))
			continue
		}
		for name, n := range a.restarts {
			if n != b.restarts[name] {
				line := fmt.Sprintf("pod %s: container %s restarted (restartCount %d, %d before)", a.name, name, n, b.restarts[name])
				if end, ok := a.lastEnd[name]; ok {
					line += "; its last run ended " + end
				}
				out = append(out, line)
			}
		}
	}
	for uid, a := range after {
		if _, ok := before[uid]; !ok {
			out = append(out, fmt.Sprintf("pod %s (UID %s) is new", a.name, uid))
		}
	}
	slices.Sort(out)
	return out
}
