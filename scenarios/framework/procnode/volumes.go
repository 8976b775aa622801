package procnode

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
)

// objectSource is what volumes and env read from the cluster: Secrets, ConfigMaps and
// ServiceAccount tokens. NotFound errors must satisfy apierrors.IsNotFound.
type objectSource interface {
	secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	configMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	serviceAccountToken(ctx context.Context, pod *corev1.Pod, audience string, expirationSeconds int64) (string, error)
}

const defaultVolumeFileMode fs.FileMode = 0o644

// errVolumeNotReady is a volume whose source is missing; the pod waits in ContainerCreating
// and the message goes into an Event, worded like kubelet's.
type errVolumeNotReady struct {
	volume string
	err    error
}

func (e *errVolumeNotReady) Error() string {
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", e.volume, e.err)
}

func (e *errVolumeNotReady) Unwrap() error { return e.err }

// errVolumeUnsupported is a volume type the process node cannot provide.
type errVolumeUnsupported struct{ volume, kind string }

func (e *errVolumeUnsupported) Error() string {
	return fmt.Sprintf("volume %q: %s volumes are not supported by the process node", e.volume, e.kind)
}

// setUpVolumes materialises every volume of pod under root (one directory per volume) and
// returns each volume's host path. It is called again on every resync and on Secret or
// ConfigMap changes; atomic writes make repeated calls cheap and safe for readers.
func setUpVolumes(ctx context.Context, src objectSource, pod *corev1.Pod, root string) (map[string]string, error) {
	paths := make(map[string]string, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		dir := filepath.Join(root, v.Name)
		switch {
		case v.EmptyDir != nil:
			if err := os.MkdirAll(dir, 0o777); err != nil { //nolint:gosec // G301: emptyDir is world-writable in kubelet; pods rely on it
				return nil, fmt.Errorf("creating emptyDir %q for pod %s/%s: %w", v.Name, pod.Namespace, pod.Name, err)
			}
			// MkdirAll's mode is filtered by the umask; emptyDir is world-writable in kubelet.
			if err := os.Chmod(dir, 0o777); err != nil { //nolint:gosec // G302: as above
				return nil, fmt.Errorf("chmod emptyDir %q for pod %s/%s: %w", v.Name, pod.Namespace, pod.Name, err)
			}
		case v.HostPath != nil:
			if err := setUpHostPath(v.HostPath); err != nil {
				return nil, &errVolumeNotReady{volume: v.Name, err: err}
			}
			dir = v.HostPath.Path
		case v.Secret != nil, v.ConfigMap != nil, v.DownwardAPI != nil, v.Projected != nil:
			payload, err := volumePayload(ctx, src, pod, v)
			if err != nil {
				return nil, &errVolumeNotReady{volume: v.Name, err: err}
			}
			if _, err := writeAtomically(dir, payload); err != nil {
				return nil, fmt.Errorf("writing volume %q of pod %s/%s: %w", v.Name, pod.Namespace, pod.Name, err)
			}
		default:
			return nil, &errVolumeUnsupported{volume: v.Name, kind: volumeKind(v)}
		}
		paths[v.Name] = dir
	}
	return paths, nil
}

func setUpHostPath(hp *corev1.HostPathVolumeSource) error {
	t := corev1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	switch t {
	// What kubelet creates for these types: 0755 directories and 0644 files on the host.
	case corev1.HostPathDirectoryOrCreate:
		return os.MkdirAll(hp.Path, 0o755) //nolint:gosec // G301: kubelet's mode for DirectoryOrCreate
	case corev1.HostPathFileOrCreate:
		f, err := os.OpenFile(hp.Path, os.O_CREATE|os.O_RDONLY, 0o644) //nolint:gosec // G302/G304: kubelet's mode for FileOrCreate, at the pod spec's path
		if err != nil {
			return err
		}
		return f.Close()
	case corev1.HostPathUnset:
		return nil
	default:
		_, err := os.Stat(hp.Path)
		return err
	}
}

func volumeKind(v *corev1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim"
	case v.CSI != nil:
		return "csi"
	case v.Ephemeral != nil:
		return "ephemeral"
	case v.Image != nil:
		return "image"
	default:
		return "this kind of"
	}
}

// volumePayload computes the files of a Secret, ConfigMap, downward API or projected volume.
func volumePayload(ctx context.Context, src objectSource, pod *corev1.Pod, v *corev1.Volume) (map[string]volumeFile, error) {
	payload := map[string]volumeFile{}
	switch {
	case v.Secret != nil:
		return payload, addSecret(ctx, src, pod.Namespace, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, v.Secret.DefaultMode, payload)
	case v.ConfigMap != nil:
		return payload, addConfigMap(ctx, src, pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, v.ConfigMap.DefaultMode, payload)
	case v.DownwardAPI != nil:
		return payload, addDownwardAPI(pod, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode, payload)
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			var err error
			switch {
			case s.Secret != nil:
				err = addSecret(ctx, src, pod.Namespace, s.Secret.Name, s.Secret.Items, s.Secret.Optional, v.Projected.DefaultMode, payload)
			case s.ConfigMap != nil:
				err = addConfigMap(ctx, src, pod.Namespace, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, v.Projected.DefaultMode, payload)
			case s.DownwardAPI != nil:
				err = addDownwardAPI(pod, s.DownwardAPI.Items, v.Projected.DefaultMode, payload)
			case s.ServiceAccountToken != nil:
				err = addServiceAccountToken(ctx, src, pod, s.ServiceAccountToken, v.Projected.DefaultMode, payload)
			default:
				err = fmt.Errorf("projected source kind not supported by the process node")
			}
			if err != nil {
				return nil, err
			}
		}
		return payload, nil
	}
	return nil, fmt.Errorf("volume %q has no file-based source", v.Name)
}

func fileMode(itemMode, defaultMode *int32) fs.FileMode {
	switch {
	case itemMode != nil:
		return podFileMode(*itemMode)
	case defaultMode != nil:
		return podFileMode(*defaultMode)
	}
	return defaultVolumeFileMode
}

// podFileMode is a mode from the pod spec, which API validation keeps within 0–0777; anything
// else falls back to the default.
func podFileMode(m int32) fs.FileMode {
	if m < 0 || m > 0o777 {
		return defaultVolumeFileMode
	}
	return fs.FileMode(m)
}

func addSecret(ctx context.Context, src objectSource, ns, name string, items []corev1.KeyToPath, optional *bool, defaultMode *int32, payload map[string]volumeFile) error {
	sec, err := src.secret(ctx, ns, name)
	if apierrors.IsNotFound(err) && isTrue(optional) {
		return nil
	}
	if err != nil {
		return err
	}
	return addKeys("Secret", ns, name, sec.Data, items, optional, defaultMode, payload)
}

func addConfigMap(ctx context.Context, src objectSource, ns, name string, items []corev1.KeyToPath, optional *bool, defaultMode *int32, payload map[string]volumeFile) error {
	cm, err := src.configMap(ctx, ns, name)
	if apierrors.IsNotFound(err) && isTrue(optional) {
		return nil
	}
	if err != nil {
		return err
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return addKeys("ConfigMap", ns, name, data, items, optional, defaultMode, payload)
}

// addKeys projects data into payload: every key when items is empty, else the listed keys
// at their paths (a missing key fails unless the source is optional, as in kubelet).
func addKeys(kind, ns, name string, data map[string][]byte, items []corev1.KeyToPath, optional *bool, defaultMode *int32, payload map[string]volumeFile) error {
	if len(items) == 0 {
		for k, v := range data {
			payload[k] = volumeFile{data: v, mode: fileMode(nil, defaultMode)}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if isTrue(optional) {
				continue
			}
			return fmt.Errorf("couldn't find key %s in %s %s/%s", it.Key, kind, ns, name)
		}
		payload[it.Path] = volumeFile{data: v, mode: fileMode(it.Mode, defaultMode)}
	}
	return nil
}

func addDownwardAPI(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, defaultMode *int32, payload map[string]volumeFile) error {
	for _, it := range items {
		var value string
		var err error
		switch {
		case it.FieldRef != nil:
			value, err = podFieldValue(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			value, err = containerResourceValue(pod, it.ResourceFieldRef)
		default:
			err = fmt.Errorf("downward API item %q has neither fieldRef nor resourceFieldRef", it.Path)
		}
		if err != nil {
			return err
		}
		payload[it.Path] = volumeFile{data: []byte(value), mode: fileMode(it.Mode, defaultMode)}
	}
	return nil
}

func addServiceAccountToken(ctx context.Context, src objectSource, pod *corev1.Pod, p *corev1.ServiceAccountTokenProjection, defaultMode *int32, payload map[string]volumeFile) error {
	exp := int64(3600)
	if p.ExpirationSeconds != nil {
		exp = *p.ExpirationSeconds
	}
	token, err := src.serviceAccountToken(ctx, pod, p.Audience, exp)
	if err != nil {
		return err
	}
	mode := defaultVolumeFileMode
	if defaultMode != nil {
		mode = podFileMode(*defaultMode)
	}
	payload[p.Path] = volumeFile{data: []byte(token), mode: mode}
	return nil
}

// podFieldValue resolves a downward API field path (env fieldRef and volume items).
func podFieldValue(pod *corev1.Pod, path string) (string, error) {
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.hostIPs":
		return joinIPs(pod.Status.HostIPs), nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.podIPs":
		ips := make([]string, 0, len(pod.Status.PodIPs))
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	}
	return "", fmt.Errorf("unsupported downward API field path %q", path)
}

func joinIPs(ips []corev1.HostIP) string {
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, ip.IP)
	}
	return strings.Join(out, ",")
}

// subscript parses `prefix['key']`.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q\n", k, m[k])
	}
	return b.String()
}

// containerResourceValue resolves a downward API volume's resourceFieldRef, which names
// its container.
func containerResourceValue(pod *corev1.Pod, ref *corev1.ResourceFieldSelector) (string, error) {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Name == ref.ContainerName || (ref.ContainerName == "" && len(pod.Spec.Containers) == 1) {
			return resourceValue(c, ref)
		}
	}
	return "", fmt.Errorf("resourceFieldRef names unknown container %q", ref.ContainerName)
}

// resourceValue is c's limit or request (the node's capacity when unset), divided by the
// divisor and rounded up, as kubelet does.
func resourceValue(c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(name)]
	if !ok {
		q = hostCapacity()[corev1.ResourceName(name)]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == "cpu" {
		return fmt.Sprint((q.MilliValue() + divisor.MilliValue() - 1) / divisor.MilliValue()), nil
	}
	return fmt.Sprint((q.Value() + divisor.Value() - 1) / divisor.Value()), nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// tokenRefreshAt is when kubelet would refresh a projected token: at 80% of its lifetime,
// or after 24 hours, whichever comes first.
func tokenRefreshAt(issued time.Time, lifetime time.Duration) time.Time {
	refresh := lifetime * 8 / 10
	if refresh > 24*time.Hour {
		refresh = 24 * time.Hour
	}
	return issued.Add(refresh)
}
