package kind

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/exec"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
)

// DialService opens a TCP connection to a Service's ClusterIP:port from inside the cluster
// network, where the API server dials it: a socat in the control-plane node carries the bytes
// over `docker exec`. Nothing is sent to the cluster's addresses from this machine. The error
// is socat's when the connection is refused or times out.
func (p *Provider) DialService(ctx context.Context, clusterIP string, port int32) (net.Conn, error) {
	node, err := p.controlPlane()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(clusterIP, strconv.Itoa(int(port)))
	dialCtx := ctx // bounds the dial; the connection outlives it
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	local, remote := net.Pipe()
	stderrR, stderrW := io.Pipe()
	cmd := node.CommandContext(ctx, "socat", "-d", "-d", "STDIO", "TCP:"+addr+",connect-timeout=5").
		SetStdin(remote).SetStdout(remote).SetStderr(stderrW)
	exited := make(chan error, 1)
	go func() {
		err := cmd.Run()
		_ = remote.Close()                 // net.Pipe's Close never fails
		_ = stderrW.CloseWithError(io.EOF) // io.Pipe's CloseWithError never fails
		exited <- err
	}()
	connected, scanned := make(chan struct{}), make(chan struct{})
	var lines []string // socat's messages before it connected; read after scanned
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderrR)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.Contains(sc.Text(), "starting data transfer loop") {
				signalled = true
				close(connected)
				continue
			}
			if !signalled {
				lines = append(lines, sc.Text())
				// socat failed to connect ("E TCP:…: Connection refused", then "N exit(1)"):
				// `docker exec -i` returns only once its stdin ends, and until then the
				// dial waits. End it.
				if socatEnds(sc.Text()) {
					_ = remote.Close() // net.Pipe's Close never fails
				}
				continue
			}
			// socat has exited (the server closed the connection), but `docker exec -i` returns
			// only once its stdin ends: end it, so the caller sees the close now, as a direct
			// connection would.
			if strings.Contains(sc.Text(), " exiting with status ") {
				_ = remote.Close() // net.Pipe's Close never fails
			}
		}
	}()
	select {
	case <-connected:
		return &execConn{Conn: local, cancel: cancel}, nil
	case err := <-exited:
		cancel()
		_ = local.Close() // net.Pipe's Close never fails
		<-scanned
		return nil, fmt.Errorf("dial tcp %s (from node %s): %s", addr, node, socatError(lines, err))
	case <-dialCtx.Done():
		cancel()
		_ = local.Close() // net.Pipe's Close never fails
		return nil, fmt.Errorf("dial tcp %s (from node %s): %w", addr, node, dialCtx.Err())
	}
}

// socatEnds says whether socat's message line, before it connected, is an error or its exit:
// it exits without connecting.
func socatEnds(line string) bool {
	return strings.Contains(line, " E ") || strings.Contains(line, " N exit(")
}

// socatError is the reason in socat's last error line, e.g. "Connection refused".
func socatError(lines []string, err error) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if _, msg, ok := strings.Cut(lines[i], " E "); ok {
			return msg
		}
	}
	if err != nil {
		return err.Error()
	}
	return "socat exited before connecting"
}

// execConn is one end of a pipe to a socat in a node; closing it ends the socat.
type execConn struct {
	net.Conn
	cancel context.CancelFunc
}

func (c *execConn) Close() error {
	err := c.Conn.Close()
	c.cancel()
	return err
}

// Container applies action to container of pod through containerd in the pod's node.
func (p *Provider) Container(ctx context.Context, pod *corev1.Pod, container string, action cluster.ContainerAction) error {
	id, err := containerdID(pod, container)
	if err != nil {
		return err
	}
	node, err := p.node(pod.Spec.NodeName)
	if err != nil {
		return err
	}
	ctr := func(args ...string) error {
		out, err := exec.CombinedOutputLines(node.CommandContext(ctx, "ctr", append([]string{"--namespace=k8s.io", "tasks"}, args...)...))
		if err != nil {
			return fmt.Errorf("%s container %s of pod %s/%s (ctr tasks %s in node %s): %w: %s",
				action, container, pod.Namespace, pod.Name, strings.Join(args, " "), node, err, strings.Join(out, "; "))
		}
		return nil
	}
	switch action {
	case cluster.Freeze:
		return ctr("pause", id)
	case cluster.Resume:
		return ctr("resume", id)
	case cluster.Kill:
		if err := ctr("kill", "--all", "--signal", "SIGKILL", id); err != nil {
			return err
		}
		// A frozen task dies of the pending SIGKILL as soon as it thaws; a running one has
		// nothing to resume, which ctr reports as an error we do not need.
		_ = ctr("resume", id)
		return nil
	default:
		return fmt.Errorf("unknown container action %q", action)
	}
}

// containerdID is the containerd ID of a pod's container, from its status.
func containerdID(pod *corev1.Pod, container string) (string, error) {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != container {
			continue
		}
		id, ok := strings.CutPrefix(cs.ContainerID, "containerd://")
		if !ok {
			return "", fmt.Errorf("pod %s/%s container %s: containerID %q is not a containerd one", pod.Namespace, pod.Name, container, cs.ContainerID)
		}
		return id, nil
	}
	return "", fmt.Errorf("pod %s/%s has no status for container %s (not started yet?)", pod.Namespace, pod.Name, container)
}

func (p *Provider) controlPlane() (nodes.Node, error) {
	all, err := p.kind.ListInternalNodes(p.name)
	if err != nil {
		return nil, fmt.Errorf("listing the nodes of kind cluster %q: %w", p.name, err)
	}
	for _, n := range all {
		if role, err := n.Role(); err == nil && role == "control-plane" {
			return n, nil
		}
	}
	return nil, fmt.Errorf("kind cluster %q has no control-plane node", p.name)
}

func (p *Provider) node(name string) (nodes.Node, error) {
	all, err := p.kind.ListInternalNodes(p.name)
	if err != nil {
		return nil, fmt.Errorf("listing the nodes of kind cluster %q: %w", p.name, err)
	}
	for _, n := range all {
		if n.String() == name {
			return n, nil
		}
	}
	return nil, errors.New("kind cluster " + p.name + " has no node " + name)
}
