package contract

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	e2etypes "sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/pki"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// noPrivateKeyInLogs is W15: no container of a pod in the target's namespace logs a private key
// — a PEM block of one (as text, or JSON-escaped on one line), a PEM private key base64-encoded
// (what a Secret's data looks like when the Secret object itself is logged), or the body of the
// serving Secret's tls.key. It reads every container's log, and the previous one of a container
// that restarted. It runs right after W3, while the pods that made or loaded the first serving
// certificate still run (W4's restarts replace them). A leak is reported by pod, container and
// line, with the log line up to the key: never the key.
func noPrivateKeyInLogs() e2etypes.Feature {
	return features.New("no container of the target's pods logs a private key").
		WithLabel(suite.LabelScenario, "W15").
		Assess("every log of every pod in the target's namespace is free of private keys", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c, it := suite.ClusterFrom(ctx, t), suite.TargetFrom(ctx, t)
			var keys [][]byte
			if it.Served.Secret != "" {
				s, err := c.Kube().CoreV1().Secrets(it.Namespace).Get(ctx, it.Served.Secret, metav1.GetOptions{})
				switch {
				case err == nil:
					keys = append(keys, s.Data[corev1.TLSPrivateKeyKey])
				case !apierrors.IsNotFound(err):
					expect.NoError(t, err, "getting Secret %s/%s, the serving certificate", it.Namespace, it.Served.Secret)
				}
			}
			pods, err := c.Kube().CoreV1().Pods(it.Namespace).List(ctx, metav1.ListOptions{})
			expect.NoError(t, err, "listing the pods of namespace %s", it.Namespace)
			var leaks, unread []string
			read, size := 0, 0
			for _, p := range pods.Items {
				for _, l := range containerLogs(p) {
					log, err := c.Kube().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: l.container, Previous: l.previous}).DoRaw(ctx)
					if err != nil {
						unread = append(unread, fmt.Sprintf("%s: %v", l.describe(p), err))
						continue
					}
					read, size = read+1, size+len(log)
					for _, leak := range privateKeysIn(log, keys) {
						leaks = append(leaks, l.describe(p)+" "+leak)
					}
				}
			}
			suite.Note(ctx, t, "logsRead", fmt.Sprintf("%d logs of %d pods, %d bytes", read, len(pods.Items), size))
			if len(unread) > 0 {
				suite.Note(ctx, t, "logsUnread", unread)
			}
			if read == 0 {
				expect.Fatalf(t, "no log of namespace %s could be read, so none could be checked for private keys (%d pods): %s",
					it.Namespace, len(pods.Items), strings.Join(unread, "; "))
			}
			if len(leaks) > 0 {
				expect.Errorf(t, "expected no private key in any log of namespace %s (anyone who may read pod logs would hold the serving key); seen:\n  %s",
					it.Namespace, strings.Join(leaks, "\n  "))
			}
			return ctx
		}).Feature()
}

// containerLog is one log of a pod: a container's current one, or its previous one.
type containerLog struct {
	container string
	previous  bool
}

func (l containerLog) describe(p corev1.Pod) string {
	if l.previous {
		return fmt.Sprintf("pod %s container %s (previous)", p.Name, l.container)
	}
	return fmt.Sprintf("pod %s container %s", p.Name, l.container)
}

// containerLogs are the logs p has: each container's that has started, and the previous one of
// each that restarted.
func containerLogs(p corev1.Pod) []containerLog {
	var out []containerLog
	for _, s := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if s.State.Running != nil || s.State.Terminated != nil {
			out = append(out, containerLog{container: s.Name})
		}
		if s.RestartCount > 0 {
			out = append(out, containerLog{container: s.Name, previous: true})
		}
	}
	return out
}

// privateKeysIn lists the lines of log that hold a private key — key material as S1 finds it in
// what a suite collects (pki.KeyMaterial: a PEM private-key header, its base64 form, either in a
// hex dump), or the body of one of keys (PEM) — each as "line N: <the line up to the key> (what)".
// A PEM key's body lines after its header are not reported again.
func privateKeysIn(log []byte, keys [][]byte) []string {
	var bodies []string
	for _, k := range keys {
		if b, _ := pem.Decode(k); b != nil {
			// The PEM body's first line: base64 of the key's first 48 bytes.
			bodies = append(bodies, base64.StdEncoding.EncodeToString(b.Bytes[:min(48, len(b.Bytes))]))
		}
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	inBlock := false // within a PEM private key's lines, already reported at its header
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if inBlock {
			inBlock = !strings.Contains(line, "-----END ")
			continue
		}
		at, what := keyIn(line, bodies)
		if at < 0 {
			continue
		}
		out = append(out, fmt.Sprintf("line %d: %q… (%s)", n, shortened(line[:at], 120), what))
		inBlock = what == pki.PEMKeyHeader && !strings.Contains(line[at:], "-----END ")
	}
	return out
}

// keyIn is where line holds a private key, and what kind; -1 when it holds none.
func keyIn(line string, bodies []string) (int, string) {
	if what, at := pki.KeyMaterial([]byte(line)); what != "" {
		return at, what
	}
	for _, b := range bodies {
		if i := strings.Index(line, b); i >= 0 {
			return i, "the serving Secret's tls.key"
		}
	}
	return -1, ""
}

// shortened keeps the last n bytes of s, marking the cut: the text just before a key.
func shortened(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
