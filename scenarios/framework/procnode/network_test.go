package procnode

import (
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPodMACFollowsItsAddress(t *testing.T) {
	assert.Equal(t, "0a:58:0a:f4:00:07", podMAC(net.ParseIP("10.244.0.7")).String())
}

// TestAPodOnAReusedAddressIsReachedAtOnce gives a new pod the address of a pod that was just
// removed, after the host talked to the first one: the host's neighbour entry for that address
// still holds the first pod's MAC (reachable for 15–45 s, then up to 8 s of probes), so unless
// a pod's MAC follows from its address, connections to the new pod time out meanwhile — what
// the node's Service proxy saw, dialling a webhook pod started right after another was deleted.
func TestAPodOnAReusedAddressIsReachedAtOnce(t *testing.T) {
	require.Zero(t, os.Geteuid(), "the bridge network test needs root (a bridge, veths and network namespaces)")
	node := fmt.Sprintf("gauntlet-mac-%d", os.Getpid())
	_, cidr, err := net.ParseCIDR(fmt.Sprintf("10.246.%d.0/29", os.Getpid()%250))
	require.NoError(t, err)
	n, err := newBridgeNetwork(node, bridgeNameFor(node), cidr, t.TempDir())
	require.NoError(t, err)
	defer func() { _ = n.close() }()

	// answer starts pod uid, which must get address want (any when empty), and reads its
	// answer from the host.
	answer := func(uid, want string) string {
		ip, ns, err := n.addPod(uid)
		require.NoError(t, err)
		if want != "" {
			require.Equal(t, want, ip, "the test needs the removed pod's address handed out again")
		}
		var l net.Listener
		inNetns(t, ns, func() (err error) {
			l, err = net.Listen("tcp", net.JoinHostPort(ip, "8080"))
			return err
		})
		go func() {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, uid)
			_ = c.Close()
		}()
		c, err := net.DialTimeout("tcp", l.Addr().String(), 2*time.Second)
		require.NoError(t, err, "the host could not reach pod %s at %s", uid, l.Addr())
		got, err := io.ReadAll(c)
		_ = c.Close()
		_ = l.Close()
		require.NoError(t, err)
		assert.Equal(t, uid, string(got))
		return ip
	}
	// Another pod keeps the bridge's carrier up: a bridge losing its last port flushes its
	// neighbour entries, which would hide the stale one.
	_, _, err = n.addPod("bystander")
	require.NoError(t, err)
	first := answer("first", "")
	require.NoError(t, n.removePod("first"))
	answer("second", first) // the lowest free address again: its reuse is the point
}
