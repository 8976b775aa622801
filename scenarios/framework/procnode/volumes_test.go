package procnode

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func volumePod(vols ...corev1.Volume) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "op-0", Namespace: "ns", UID: "uid-1", Labels: map[string]string{"app": "op"}},
		Spec:       corev1.PodSpec{ServiceAccountName: "op", Volumes: vols, Containers: []corev1.Container{{Name: "c"}}},
	}
}

func testObjects() *staticObjects {
	return &staticObjects{
		secrets: map[string]*corev1.Secret{"ns/certs": {Data: map[string][]byte{
			"tls.crt": []byte("CERT"), "tls.key": []byte("KEY"), "ca.crt": []byte("CA"),
		}}},
		configMaps: map[string]*corev1.ConfigMap{"ns/kube-root-ca.crt": {
			Data: map[string]string{"ca.crt": "ROOT"}, BinaryData: map[string][]byte{"bin": {1, 2}},
		}},
	}
}

func TestSecretVolumeProjectsAllKeysOrSelectedItems(t *testing.T) {
	root := t.TempDir()
	pod := volumePod(
		corev1.Volume{Name: "all", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "certs"}}},
		corev1.Volume{Name: "some", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "certs", DefaultMode: ptr.To(int32(0o440)),
			Items: []corev1.KeyToPath{{Key: "tls.crt", Path: "tls.cert"}, {Key: "tls.key", Path: "keys/tls.key", Mode: ptr.To(int32(0o400))}},
		}}},
	)
	paths, err := setUpVolumes(context.Background(), testObjects(), pod, root)
	require.NoError(t, err)
	for _, name := range []string{"tls.crt", "tls.key", "ca.crt"} {
		_, err := os.Stat(filepath.Join(paths["all"], name))
		require.NoError(t, err, "volume all lacks %s", name)
	}
	got := readVolumeFile(t, paths["some"], "tls.cert")
	assert.Equal(t, "CERT", got, "some/tls.cert = %q", got)
	_, err = os.Stat(filepath.Join(paths["some"], "ca.crt"))
	assert.True(t, os.IsNotExist(err), "volume with items also holds unlisted key ca.crt")
	for file, mode := range map[string]os.FileMode{"tls.cert": 0o440, "keys/tls.key": 0o400} {
		info, err := os.Stat(filepath.Join(paths["some"], file))
		require.NoError(t, err, "mode of %s", file)
		assert.Equal(t, mode, info.Mode().Perm(), "mode of %s = %v, want %v", file, info.Mode().Perm(), mode)
	}
}

func TestMissingSecretHonoursOptional(t *testing.T) {
	optional := volumePod(corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "absent", Optional: ptr.To(true)}}})
	paths, err := setUpVolumes(context.Background(), testObjects(), optional, t.TempDir())
	require.NoError(t, err, "optional missing Secret")
	_, err = os.Readlink(filepath.Join(paths["v"], dataDirName))
	require.NoError(t, err, "optional missing Secret gives no (empty) volume")

	required := volumePod(corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "absent"}}})
	_, err = setUpVolumes(context.Background(), testObjects(), required, t.TempDir())
	var notReady *errVolumeNotReady
	require.ErrorAs(t, err, &notReady, "required missing Secret: err %v, want errVolumeNotReady wrapping NotFound", err)
	require.True(t, apierrors.IsNotFound(err), "required missing Secret: err %v, want errVolumeNotReady wrapping NotFound", err)
	want := `MountVolume.SetUp failed for volume "v" : secrets "absent" not found`
	require.Equal(t, want, err.Error(), "message %q, want %q", err, want)

	missingKey := volumePod(corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: "certs", Items: []corev1.KeyToPath{{Key: "nope", Path: "nope"}}}}})
	_, err = setUpVolumes(context.Background(), testObjects(), missingKey, t.TempDir())
	require.Error(t, err, "a missing key of a non-optional Secret was accepted")
}

func TestProjectedServiceAccountVolume(t *testing.T) {
	// The shape the ServiceAccount admission plugin injects (kube-api-access-*).
	pod := volumePod(corev1.Volume{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To(int32(0o644)),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(int64(3607))}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
				{Path: "app", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}},
			}}},
		},
	}}})
	objs := testObjects()
	paths, err := setUpVolumes(context.Background(), objs, pod, t.TempDir())
	require.NoError(t, err)
	dir := paths["kube-api-access"]
	for file, want := range map[string]string{"token": "token-for-ns/op--3607", "ca.crt": "ROOT", "namespace": "ns", "app": "op"} { //nolint:gosec // G101: the fake token of the test's fake object source
		got := readVolumeFile(t, dir, file)
		assert.Equal(t, want, got, "%s = %q, want %q", file, got, want)
	}
}

func TestEmptyDirIsWorldWritableAndUnsupportedKindsAreNamed(t *testing.T) {
	pod := volumePod(corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	paths, err := setUpVolumes(context.Background(), testObjects(), pod, t.TempDir())
	require.NoError(t, err)
	info, err := os.Stat(paths["scratch"])
	require.NoError(t, err, "emptyDir mode")
	require.Equal(t, fs.FileMode(0o777), info.Mode().Perm(), "emptyDir mode = %v, want 0777", info.Mode().Perm())
	pvc := volumePod(corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "d"}}})
	_, err = setUpVolumes(context.Background(), testObjects(), pvc, t.TempDir())
	var unsupported *errVolumeUnsupported
	require.ErrorAs(t, err, &unsupported, "PVC volume: %v, want errVolumeUnsupported naming persistentVolumeClaim", err)
	require.Equal(t, "persistentVolumeClaim", unsupported.kind, "PVC volume: %v, want errVolumeUnsupported naming persistentVolumeClaim", err)
}
