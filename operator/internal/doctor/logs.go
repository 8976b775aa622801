package doctor

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The lines the operator logs at startup, as documented: webhooks registered, then the
// webhook server started (after its serving certificate became loadable).
var requiredLogLines = []string{"Registering validation webhooks", "Starting webhook server"}

// maxLogBytes bounds how much of each Pod's log is read: the startup lines come first.
const maxLogBytes = 8 << 20

// checkLogs reads each running operator Pod's log through the API server (pods/log) and looks
// for the documented startup lines.
func checkLogs(ctx context.Context, s *session) outcome {
	title := fmt.Sprintf("operator Pods logged %q and %q", requiredLogLines[0], requiredLogLines[1])
	pods, err := s.operatorPods(ctx)
	if err != nil {
		return failure(title, readError("listing operator Pods", err))
	}
	var running []corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p)
		}
	}
	if len(running) == 0 {
		return failure(title, undocumented(
			fmt.Sprintf("Deployment %s/%s has no running Pod to read logs from", s.opts.Namespace, s.deploymentName),
			s.fix.describePods(), s.fix.logs()), s.podSummaries(ctx)...)
	}
	var details []string
	var lacking []string
	for _, p := range running {
		log, err := s.podLog(ctx, p.Name)
		if err != nil {
			return failure(title, readError(fmt.Sprintf("reading the log of pod %s/%s container %s", p.Namespace, p.Name, s.container), err), details...)
		}
		var missing []string
		for _, line := range requiredLogLines {
			if !bytes.Contains(log, []byte(line)) {
				missing = append(missing, fmt.Sprintf("%q", line))
			}
		}
		if len(missing) == 0 {
			details = append(details, fmt.Sprintf("pod %s: both lines present", p.Name))
			continue
		}
		lacking = append(lacking, fmt.Sprintf("pod %s lacks %s", p.Name, strings.Join(missing, " and ")))
		details = append(details, certControllerErrors(log, 3)...)
		if last := lastLine(log); last != "" {
			details = append(details, fmt.Sprintf("pod %s last log line: %s", p.Name, last))
		}
	}
	if len(lacking) == 0 {
		return pass(title, details...)
	}
	return failure(title, undocumented(
		strings.Join(lacking, "; ")+": the operator has not finished starting (it registers its webhooks once its serving certificate is ready, then starts the webhook server), or its log was rotated",
		s.fix.logs(), s.fix.describePods()), details...)
}

func (s *session) podLog(ctx context.Context, pod string) ([]byte, error) {
	rc, err := s.clientset.CoreV1().Pods(s.opts.Namespace).GetLogs(pod, &corev1.PodLogOptions{
		Container: s.container, LimitBytes: ptr.To[int64](maxLogBytes),
	}).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }() // a read-only stream: what was read is the result
	return io.ReadAll(io.LimitReader(rc, maxLogBytes))
}

// certControllerErrors returns up to n log lines of cert-controller errors (e.g. RBAC
// denials, scenario T10's symptom), shortened.
func certControllerErrors(log []byte, n int) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() && len(out) < n {
		line := sc.Text()
		if strings.Contains(line, "cert-controller: ") && (strings.Contains(line, "ERROR") || strings.Contains(line, `"level":"error"`)) {
			out = append(out, "operator log: "+shorten(line, 400))
		}
	}
	return out
}

func lastLine(log []byte) string {
	lines := strings.Split(strings.TrimRight(string(log), "\n"), "\n")
	return shorten(lines[len(lines)-1], 400)
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
