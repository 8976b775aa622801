package procnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"
)

// What a process node creates on the host outside its state directory: the node's bridge,
// host-side veths and the iptables rule accepting its bridge's traffic, and the mount targets
// recorded in the host-wide registry under /run. A node stopped with SIGTERM removes all of it;
// a killed node leaves it behind. HostLeftovers says what is left of a node, CleanHost removes
// it once the node is gone.

// BridgeName is a node's default pod bridge: "gn-" and 8 hex digits of the SHA-256 of the
// node name (CONTRACT.md).
func BridgeName(nodeName string) string { return bridgeNameFor(nodeName) }

// HostLeftovers lists, as sentences a person can act on, what node nodeName left on the host:
// its bridge, host-side veths and iptables rule, and mount targets the registry still records
// for it. It also names the registry itself when it records nothing (the last node removes it).
// It only reads: nothing is removed.
func HostLeftovers(nodeName string) []string {
	var out []string
	if links, err := nodeLinks(nodeName, bridgeNameFor(nodeName)); err == nil {
		for _, l := range links {
			out = append(out, "network interface "+l.Attrs().Name+" of node "+nodeName)
		}
	}
	if rule := (bridgeForwardRule{nodeName: nodeName, bridgeName: bridgeNameFor(nodeName)}); rule.present() {
		out = append(out, "iptables rule of node "+nodeName+" (iptables -D "+strings.Join(rule.args(), " ")+")")
	}
	return append(out, mountTargetLeftovers(hostMountpointRegistry, nodeName)...)
}

// mountTargetLeftovers lists the mount targets registry records for node nodeName, or the
// registry itself when it records nothing.
func mountTargetLeftovers(registry, nodeName string) []string {
	state, err := readMountpointState(registry)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return []string{err.Error()}
	case len(state) == 0:
		return []string{"mount target registry " + registry + " records nothing but still exists"}
	}
	var out []string
	for p, holders := range state {
		for h := range holders {
			if holderInstance(h) == nodeName {
				out = append(out, fmt.Sprintf("mount target %s, created on the host for node %s, still recorded in %s", p, nodeName, registry))
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// CleanHost removes what a node that no longer runs left on the host: the mount targets whose
// holders all died (any node's, as every node does when it starts), the registry once it
// records nothing, and node nodeName's bridge, veths and iptables rule. Call it only after the
// node has stopped: it deletes the links of a running node too.
func CleanHost(nodeName string) error {
	var errs []error
	if _, err := os.Stat(hostMountpointRegistry); err == nil {
		mounts, err := newMountpoints(hostMountpointRegistry, "cleanup")
		if err == nil {
			err = mounts.removeOrphans()
		}
		errs = append(errs, err)
	}
	errs = append(errs, bridgeForwardRule{nodeName: nodeName, bridgeName: bridgeNameFor(nodeName)}.remove(),
		removeNodeLinks(nodeName, bridgeNameFor(nodeName)))
	return errors.Join(errs...)
}

// holderInstance is the node name in a registry holder "<pid>:<start time>:<instance>".
func holderInstance(holder string) string {
	parts := strings.SplitN(holder, ":", 3)
	if len(parts) != 3 {
		return ""
	}
	return parts[2]
}

// readMountpointState reads the registry in dir without its lock: writers replace the file
// by rename, so a read sees one whole version.
func readMountpointState(dir string) (mountpointState, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	state := mountpointState{}
	raw, err := os.ReadFile(filepath.Join(dir, "state.json")) //nolint:gosec // G304: the registry file in the registry dir the caller names
	switch {
	case errors.Is(err, os.ErrNotExist):
		return state, nil
	case err != nil:
		return nil, fmt.Errorf("reading the mount target registry: %w", err)
	}
	if err := json.Unmarshal(raw, &state); err != nil {
		return nil, fmt.Errorf("reading the mount target registry %s: %w (delete it once no process node runs)", dir, err)
	}
	return state, nil
}

// nodeLinks are the node's bridge and every host-side veth carrying its prefix.
func nodeLinks(nodeName, bridgeName string) ([]netlink.Link, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	prefix := vethPrefix(nodeName)
	var out []netlink.Link
	for _, l := range links {
		name := l.Attrs().Name
		if name == bridgeName || (strings.HasPrefix(name, prefix) && len(name) == 15) {
			out = append(out, l)
		}
	}
	return out, nil
}
