package procnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// podInitArg is the first argument with which the daemon re-executes itself as a
// container's init. Go cannot run code between fork and exec, so namespace setup that
// must precede the container binary (bind mounts, setns) happens in this short-lived
// copy of the daemon, which then execs the binary in place (same pid).
const podInitArg = "gauntlet-pod-init"

// File descriptors the daemon hands its init: the spec to read, and a close-on-exec status
// pipe that carries an error message, or nothing when exec succeeded.
const (
	podInitSpecFD   = 3
	podInitStatusFD = 4
)

// initSpec is one container process as the init must set it up.
type initSpec struct {
	// Netns is the pod's network namespace file; empty keeps the host network.
	Netns string `json:"netns,omitempty"`
	// DetachDir is unmounted (lazily) in the private mount namespace before exec, so the
	// container does not pin other pods' network namespaces.
	DetachDir  string      `json:"detachDir,omitempty"`
	Hostname   string      `json:"hostname,omitempty"`
	Mounts     []initMount `json:"mounts,omitempty"`
	Binary     string      `json:"binary"`
	Argv       []string    `json:"argv"`
	Env        []string    `json:"env"`
	WorkingDir string      `json:"workingDir,omitempty"`
}

// initMount bind-mounts Source at Target inside the container's mount namespace.
type initMount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// IsPodInit reports whether this process was started as a container's init. A binary that
// runs a process node (the daemon, or a test binary running one in-process) must check it
// first thing in main (or TestMain) and then call RunPodInit.
func IsPodInit() bool { return len(os.Args) > 1 && os.Args[1] == podInitArg }

// RunPodInit sets up the container's namespaces and execs its binary. It never returns:
// on failure it writes the reason to the status pipe and exits with 127.
func RunPodInit() {
	err := podInit()
	status := os.NewFile(podInitStatusFD, "status")
	_, _ = fmt.Fprint(status, err)
	fmt.Fprintf(os.Stderr, "gauntlet-node: starting container: %v\n", err)
	os.Exit(127)
}

func podInit() error {
	// setns(CLONE_NEWNET) changes only the calling thread; exec must happen from it.
	runtime.LockOSThread()
	unix.CloseOnExec(podInitStatusFD)
	unix.CloseOnExec(podInitSpecFD)
	raw, err := io.ReadAll(os.NewFile(podInitSpecFD, "spec"))
	if err != nil {
		return fmt.Errorf("reading init spec: %w", err)
	}
	var spec initSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("parsing init spec: %w", err)
	}
	return setUpAndExec(&spec)
}

// setUpAndExec runs inside the new mount and UTS namespaces the daemon created with
// Unshareflags (Go also made "/" recursively private there).
func setUpAndExec(spec *initSpec) error {
	var netnsFD = -1
	if spec.Netns != "" {
		fd, err := unix.Open(spec.Netns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening network namespace %s: %w", spec.Netns, err)
		}
		netnsFD = fd
	}
	if len(spec.Mounts) > 0 || spec.DetachDir != "" {
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("making / private in the container's mount namespace: %w", err)
		}
	}
	for _, m := range spec.Mounts {
		if err := unix.Mount(m.Source, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mounting %s at %s: %w", m.Source, m.Target, err)
		}
		if m.ReadOnly {
			if err := unix.Mount("", m.Target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("remounting %s read-only: %w", m.Target, err)
			}
		}
	}
	if spec.DetachDir != "" {
		if err := unix.Unmount(spec.DetachDir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("detaching %s: %w", spec.DetachDir, err)
		}
	}
	if spec.Hostname != "" {
		if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
			return fmt.Errorf("setting hostname %q: %w", spec.Hostname, err)
		}
	}
	if netnsFD >= 0 {
		if err := unix.Setns(netnsFD, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("joining network namespace %s: %w", spec.Netns, err)
		}
		_ = unix.Close(netnsFD)
	}
	if spec.WorkingDir != "" {
		if err := os.Chdir(spec.WorkingDir); err != nil {
			return fmt.Errorf("changing to working dir %s: %w", spec.WorkingDir, err)
		}
	}
	if err := unix.Exec(spec.Binary, spec.Argv, spec.Env); err != nil {
		return fmt.Errorf("exec %s: %w", spec.Binary, err)
	}
	return nil
}
