package procnode

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestBridgeForwardRuleNamesItsBridgeAndNode(t *testing.T) {
	r := bridgeForwardRule{nodeName: "gauntlet-a", bridgeName: "gn-0123abcd"}
	assert.Equal(t, `iptables -I FORWARD -i gn-0123abcd -o gn-0123abcd -m comment --comment gauntlet process node gauntlet-a: its pods reach each other -j ACCEPT`, r.String())
}

// TestPodsOnOneBridgeReachEachOther connects two pod namespaces to a node's bridge and opens a
// TCP connection from one pod's address to the other's: on a host whose firewall judges
// bridged frames (Docker's FORWARD policy DROP with br_netfilter), it times out unless the
// node accepts its bridge's traffic. Closing the network removes the rule.
func TestPodsOnOneBridgeReachEachOther(t *testing.T) {
	require.Zero(t, os.Geteuid(), "the bridge network test needs root (a bridge, veths and network namespaces)")
	node := fmt.Sprintf("gauntlet-fw-%d", os.Getpid())
	bridge := bridgeNameFor(node)
	_, cidr, err := net.ParseCIDR(fmt.Sprintf("10.247.%d.0/29", os.Getpid()%250))
	require.NoError(t, err)
	n, err := newBridgeNetwork(node, bridge, cidr, t.TempDir())
	require.NoError(t, err)
	closed := false
	defer func() {
		if !closed {
			_ = n.close()
		}
	}()
	serverIP, serverNS, err := n.addPod("server")
	require.NoError(t, err)
	_, clientNS, err := n.addPod("client")
	require.NoError(t, err)

	var l net.Listener
	inNetns(t, serverNS, func() (err error) {
		l, err = net.Listen("tcp", net.JoinHostPort(serverIP, "8080"))
		return err
	})
	defer func() { _ = l.Close() }()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		_, _ = io.WriteString(c, "pong")
		_ = c.Close()
	}()
	var c net.Conn
	var dialErr error
	inNetns(t, clientNS, func() error {
		c, dialErr = net.DialTimeout("tcp", l.Addr().String(), 3*time.Second)
		return nil
	})
	if dialErr != nil {
		forward, _ := exec.Command("iptables", "-S", "FORWARD").CombinedOutput() // the host's, from this thread
		require.NoError(t, dialErr, "pod client could not reach pod server at %s across bridge %s\niptables -S FORWARD:\n%s", l.Addr(), bridge, forward)
	}
	got, err := io.ReadAll(c)
	_ = c.Close()
	require.NoError(t, err)
	assert.Equal(t, "pong", string(got))

	rule := n.forward
	if rule.needed() {
		assert.True(t, rule.present(), "while the node runs, iptables should hold %s", rule)
	}
	closed = true
	require.NoError(t, n.close())
	assert.False(t, rule.present(), "the node's network is closed, yet iptables still holds %s", rule)
}

// inNetns runs f on a thread in the network namespace at nsPath; sockets it opens stay there.
// The thread is never handed back to the Go scheduler (its namespace changed).
func inNetns(t *testing.T, nsPath string, f func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer func() { _ = unix.Close(fd) }()
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", nsPath, err)
			return
		}
		errc <- f()
	}()
	require.NoError(t, <-errc)
}
