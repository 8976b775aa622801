package procnode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Pods on a node's bridge reach each other through the bridge. Where br_netfilter is loaded
// and net.bridge.bridge-nf-call-iptables is 1 (Docker and kube-proxy set both), bridged frames
// cross iptables' FORWARD chain, whose policy Docker sets to DROP: a connection from one pod to
// another would then time out while host-to-pod and pod-to-host work. A CNI bridge plugin meets
// the same and accepts its bridge's traffic; so does the node, with one rule at the top of
// FORWARD that it removes with its bridge.

// bridgeNFCallIPTables says whether bridged frames cross iptables ("1"); absent when
// br_netfilter is not loaded.
const bridgeNFCallIPTables = "/proc/sys/net/bridge/bridge-nf-call-iptables"

// bridgeForwardRule is the rule accepting traffic between the ports of node nodeName's bridge.
type bridgeForwardRule struct {
	nodeName, bridgeName string
}

// args is the rule as iptables takes it after -I, -D or -C. The comment names the node for a
// person reading `iptables -S FORWARD`.
func (r bridgeForwardRule) args() []string {
	return []string{"FORWARD", "-i", r.bridgeName, "-o", r.bridgeName,
		"-m", "comment", "--comment", "gauntlet process node " + r.nodeName + ": its pods reach each other",
		"-j", "ACCEPT"}
}

func (r bridgeForwardRule) String() string { return "iptables -I " + strings.Join(r.args(), " ") }

// needed reports whether bridged frames cross iptables on this host, and so whether the node
// must accept its bridge's traffic there.
func (r bridgeForwardRule) needed() bool {
	v, err := os.ReadFile(bridgeNFCallIPTables)
	return err == nil && strings.TrimSpace(string(v)) == "1"
}

// insert adds the rule, replacing any copy a killed node left. Without an iptables command
// there is no iptables ruleset to pass, so there is nothing to do.
func (r bridgeForwardRule) insert() error {
	if !r.needed() {
		return nil
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil
	}
	if err := r.remove(); err != nil {
		return err
	}
	if out, err := iptables(append([]string{"-I"}, r.args()...)...); err != nil {
		return fmt.Errorf("accepting the traffic between the pods on bridge %s (%s is 1, so the host's iptables FORWARD chain judges it, and Docker's policy there drops it): %s: %w: %s",
			r.bridgeName, bridgeNFCallIPTables, r, err, out)
	}
	return nil
}

// remove deletes every copy of the rule; none (or no iptables to hold one) is not an error.
func (r bridgeForwardRule) remove() error {
	for r.present() {
		if out, err := iptables(append([]string{"-D"}, r.args()...)...); err != nil {
			return fmt.Errorf("removing the iptables rule of node %s's bridge: iptables -D %s: %w: %s", r.nodeName, strings.Join(r.args(), " "), err, out)
		}
	}
	return nil
}

// present reports whether iptables holds the rule (false also when it cannot be asked).
func (r bridgeForwardRule) present() bool {
	if _, err := exec.LookPath("iptables"); err != nil {
		return false
	}
	_, err := iptables(append([]string{"-C"}, r.args()...)...)
	return err == nil
}

// iptables runs iptables, waiting for the xtables lock another program (Docker) may hold.
func iptables(args ...string) (string, error) {
	out, err := exec.Command("iptables", append([]string{"-w", "10"}, args...)...).CombinedOutput() //nolint:gosec // G204: the node's own rule, built from its node and bridge names
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return strings.TrimSpace(string(out)), fmt.Errorf("iptables exited %d", exit.ExitCode())
	}
	return strings.TrimSpace(string(out)), err
}
