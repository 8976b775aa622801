package procnode

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// apiEndpoint is where pods reach the kube-apiserver (KUBERNETES_SERVICE_HOST/PORT).
type apiEndpoint struct {
	host string
	port int
}

// errContainerConfig is kubelet's CreateContainerConfigError: a reference the container's
// environment needs cannot be resolved yet (missing Secret, ConfigMap or key).
type errContainerConfig struct{ err error }

func (e *errContainerConfig) Error() string { return e.err.Error() }
func (e *errContainerConfig) Unwrap() error { return e.err }

// defaultPath stands in for an image's PATH: the binary runs on the host, not in an image.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// containerEnv builds c's environment in Kubernetes' precedence order: runtime defaults,
// the image's own (imageEnv), envFrom, then env (a later entry wins; $(VAR) expands against
// what is defined so far). coverDir, when set, becomes the runtime default GOCOVERDIR
// (Config.CoverDir).
func containerEnv(ctx context.Context, src objectSource, pod *corev1.Pod, c *corev1.Container, imageEnv map[string]string, api apiEndpoint, coverDir string) ([]string, error) {
	vars := newEnvList()
	vars.set("PATH", defaultPath)
	vars.set("HOME", "/root")
	vars.set("HOSTNAME", pod.Name)
	if coverDir != "" {
		vars.set("GOCOVERDIR", coverDir)
	}
	for _, k := range sortedKeys(imageEnv) {
		vars.set(k, imageEnv[k])
	}
	if api.host != "" {
		hostPort := fmt.Sprintf("%s:%d", api.host, api.port)
		if strings.Contains(api.host, ":") {
			hostPort = fmt.Sprintf("[%s]:%d", api.host, api.port)
		}
		vars.set("KUBERNETES_SERVICE_HOST", api.host)
		vars.set("KUBERNETES_SERVICE_PORT", strconv.Itoa(api.port))
		vars.set("KUBERNETES_SERVICE_PORT_HTTPS", strconv.Itoa(api.port))
		vars.set("KUBERNETES_PORT", "tcp://"+hostPort)
	}

	for _, from := range c.EnvFrom {
		if err := addEnvFrom(ctx, src, pod.Namespace, from, vars); err != nil {
			return nil, &errContainerConfig{err: err}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			vars.set(e.Name, expandVars(e.Value, vars.lookup))
			continue
		}
		value, skip, err := envValueFrom(ctx, src, pod, c, e.ValueFrom)
		if err != nil {
			return nil, &errContainerConfig{err: fmt.Errorf("env %s of container %q: %w", e.Name, c.Name, err)}
		}
		if !skip {
			vars.set(e.Name, value)
		}
	}
	return vars.environ(), nil
}

func addEnvFrom(ctx context.Context, src objectSource, ns string, from corev1.EnvFromSource, vars *envList) error {
	switch {
	case from.SecretRef != nil:
		sec, err := src.secret(ctx, ns, from.SecretRef.Name)
		if apierrors.IsNotFound(err) && isTrue(from.SecretRef.Optional) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, k := range sortedKeys(sec.Data) {
			vars.set(from.Prefix+k, string(sec.Data[k]))
		}
	case from.ConfigMapRef != nil:
		cm, err := src.configMap(ctx, ns, from.ConfigMapRef.Name)
		if apierrors.IsNotFound(err) && isTrue(from.ConfigMapRef.Optional) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, k := range sortedKeys(cm.Data) {
			vars.set(from.Prefix+k, cm.Data[k])
		}
	}
	return nil
}

// envValueFrom resolves one valueFrom; skip reports an optional reference that is absent
// (the variable is then not set at all, as in kubelet).
func envValueFrom(ctx context.Context, src objectSource, pod *corev1.Pod, c *corev1.Container, from *corev1.EnvVarSource) (value string, skip bool, err error) {
	switch {
	case from.FieldRef != nil:
		v, err := podFieldValue(pod, from.FieldRef.FieldPath)
		return v, false, err
	case from.ResourceFieldRef != nil:
		v, err := resourceValue(c, from.ResourceFieldRef)
		return v, false, err
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		sec, err := src.secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
				return "", true, nil
			}
			return "", false, err
		}
		v, ok := sec.Data[ref.Key]
		if !ok {
			if isTrue(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
		}
		return string(v), false, nil
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := src.configMap(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
				return "", true, nil
			}
			return "", false, err
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if isTrue(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
		}
		return v, false, nil
	}
	return "", false, fmt.Errorf("unsupported valueFrom")
}

// containerArgv is the process's argv: the mapped binary stands in for the image's
// entrypoint (command[0] when a command is given), followed by the rest of the command and
// the args, with $(VAR) references expanded against the container's environment.
func containerArgv(binary string, c *corev1.Container, env []string) []string {
	lookup := environLookup(env)
	argv := []string{binary}
	if len(c.Command) > 1 {
		for _, a := range c.Command[1:] {
			argv = append(argv, expandVars(a, lookup))
		}
	}
	for _, a := range c.Args {
		argv = append(argv, expandVars(a, lookup))
	}
	return argv
}

// expandVars implements Kubernetes' $(VAR) syntax: "$$" escapes a dollar, an unknown
// $(VAR) stays as written.
func expandVars(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func environLookup(env []string) func(string) (string, bool) {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// envList keeps variables in definition order; redefining one keeps its first position.
type envList struct {
	order  []string
	values map[string]string
}

func newEnvList() *envList { return &envList{values: map[string]string{}} }

func (l *envList) set(k, v string) {
	if _, ok := l.values[k]; !ok {
		l.order = append(l.order, k)
	}
	l.values[k] = v
}

func (l *envList) lookup(k string) (string, bool) { v, ok := l.values[k]; return v, ok }

func (l *envList) environ() []string {
	out := make([]string, 0, len(l.order))
	for _, k := range l.order {
		out = append(out, k+"="+l.values[k])
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
