package procnode

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type probeKind string

const (
	readinessProbe probeKind = "Readiness"
	livenessProbe  probeKind = "Liveness"
	startupProbe   probeKind = "Startup"
)

// probeTarget is what a probe needs to know about the running container.
type probeTarget struct {
	podIP     string
	container *corev1.Container
	// pid is the container's process, for exec probes (run inside its namespaces).
	pid int
	// image is what the container's image holds: an exec command runs only what it holds.
	image Image
}

// probeOnce runs one probe attempt; a nil error is success. The error text is what kubelet
// would put in the "Unhealthy" event.
func probeOnce(ctx context.Context, p *corev1.Probe, t probeTarget) error {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.HTTPGet != nil:
		return probeHTTP(ctx, p.HTTPGet, t)
	case p.TCPSocket != nil:
		port, err := resolvePort(p.TCPSocket.Port, t.container)
		if err != nil {
			return err
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = t.podIP
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	case p.Exec != nil:
		return probeExec(ctx, p.Exec, t)
	case p.GRPC != nil:
		return fmt.Errorf("gRPC probes are not supported by the process node")
	}
	return fmt.Errorf("probe has no handler")
}

func probeHTTP(ctx context.Context, g *corev1.HTTPGetAction, t probeTarget) error {
	port, err := resolvePort(g.Port, t.container)
	if err != nil {
		return err
	}
	host := g.Host
	if host == "" {
		host = t.podIP
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	if p, q, ok := strings.Cut(path, "?"); ok {
		u.Path, u.RawQuery = p, q
	} else {
		u.Path = path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "kube-probe/gauntlet-node")
	req.Header.Set("Accept", "*/*")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	client := &http.Client{Transport: &http.Transport{
		// Like kubelet: probes never verify certificates and never reuse connections.
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // kubelet semantics
		DisableKeepAlives: true,
		Proxy:             nil,
	}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }() // the status and body read decide the probe
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 10*1024))
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP probe failed with statuscode: %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// probeExec runs the command inside the container's mount and network namespaces.
func probeExec(ctx context.Context, e *corev1.ExecAction, t probeTarget) error {
	return execInContainer(ctx, "probe", e.Command, t)
}

// execInContainer runs command (what an exec probe or hook names, the what) inside the
// container's mount and network namespaces. For an image whose contents the node knows, the
// program is what the image holds, or the command fails as on a real node; for an image known
// by its binary alone it is the host's.
func execInContainer(ctx context.Context, what string, command []string, t probeTarget) error {
	if len(command) == 0 {
		return fmt.Errorf("exec %s has no command", what)
	}
	program := command[0]
	if t.image.Described() {
		host, err := t.image.lookPath(program)
		if err != nil {
			return fmt.Errorf("command %q: %w", strings.Join(command, " "), err)
		}
		program = host
	}
	var cmd *exec.Cmd
	if t.pid > 0 {
		args := append([]string{"-t", strconv.Itoa(t.pid), "-m", "-n", "--", program}, command[1:]...)
		cmd = exec.CommandContext(ctx, "nsenter", args...) //nolint:gosec // G204: an exec probe or hook runs the pod spec's command, as kubelet does
	} else {
		cmd = exec.CommandContext(ctx, program, command[1:]...) //nolint:gosec // G204: as above
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("command %q failed: %v: %s", strings.Join(command, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// resolvePort turns a probe's port (number or container port name) into a number.
func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("port %q not found in container %q", p.StrVal, c.Name)
}

// probeState applies a probe's success and failure thresholds to raw attempts.
type probeState struct {
	successThreshold, failureThreshold int32
	successes, failures                int32
	healthy                            bool
}

func newProbeState(p *corev1.Probe, kind probeKind) *probeState {
	s := &probeState{successThreshold: p.SuccessThreshold, failureThreshold: p.FailureThreshold}
	if s.successThreshold <= 0 {
		s.successThreshold = 1
	}
	if s.failureThreshold <= 0 {
		s.failureThreshold = 3
	}
	// Liveness starts healthy (a container is alive until proven otherwise); readiness and
	// startup start unproven.
	s.healthy = kind == livenessProbe
	return s
}

// observe records one attempt and returns the probe's result after it.
func (s *probeState) observe(ok bool) bool {
	if ok {
		s.failures = 0
		s.successes++
		if s.successes >= s.successThreshold {
			s.healthy = true
		}
	} else {
		s.successes = 0
		s.failures++
		if s.failures >= s.failureThreshold {
			s.healthy = false
		}
	}
	return s.healthy
}

// probeResult is what a probe loop reports to its pod's worker.
type probeResult struct {
	container string
	kind      probeKind
	healthy   bool
	// message explains a failed attempt (for the Unhealthy event).
	message string
	// exhausted: the failure threshold is reached (a startup probe then kills the container).
	exhausted bool
	// generation identifies the container run the probe belongs to, so results of a
	// previous run are ignored.
	generation int
}

// runProbeLoop probes until ctx ends, reporting every change of result and every failed
// attempt. gate, when set, holds the loop until the startup probe has succeeded.
func runProbeLoop(ctx context.Context, kind probeKind, p *corev1.Probe, t probeTarget, generation int, gate <-chan struct{}, report func(probeResult)) {
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return
		}
	}
	if !sleepCtx(ctx, time.Duration(p.InitialDelaySeconds)*time.Second) {
		return
	}
	period := time.Duration(p.PeriodSeconds) * time.Second
	if period <= 0 {
		period = 10 * time.Second
	}
	state := newProbeState(p, kind)
	last, reported := state.healthy, false
	for {
		err := probeOnce(ctx, p, t)
		if ctx.Err() != nil {
			return
		}
		healthy := state.observe(err == nil)
		if healthy != last || !reported || err != nil {
			r := probeResult{container: t.container.Name, kind: kind, healthy: healthy, generation: generation,
				exhausted: state.failures >= state.failureThreshold}
			if err != nil {
				r.message = fmt.Sprintf("%s probe failed: %v", kind, err)
			}
			report(r)
			last, reported = healthy, true
		}
		if !sleepCtx(ctx, period) {
			return
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
