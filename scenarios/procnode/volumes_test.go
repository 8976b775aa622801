package procnode

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

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
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if _, err := os.Stat(filepath.Join(paths["all"], name)); err != nil {
			t.Errorf("volume all lacks %s: %v", name, err)
		}
	}
	if got := readVolumeFile(t, paths["some"], "tls.cert"); got != "CERT" {
		t.Errorf("some/tls.cert = %q", got)
	}
	if _, err := os.Stat(filepath.Join(paths["some"], "ca.crt")); !os.IsNotExist(err) {
		t.Errorf("volume with items also holds unlisted key ca.crt")
	}
	for file, mode := range map[string]os.FileMode{"tls.cert": 0o440, "keys/tls.key": 0o400} {
		info, err := os.Stat(filepath.Join(paths["some"], file))
		if err != nil || info.Mode().Perm() != mode {
			t.Errorf("mode of %s = %v (%v), want %v", file, info.Mode().Perm(), err, mode)
		}
	}
}

func TestMissingSecretHonoursOptional(t *testing.T) {
	optional := volumePod(corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "absent", Optional: ptr.To(true)}}})
	paths, err := setUpVolumes(context.Background(), testObjects(), optional, t.TempDir())
	if err != nil {
		t.Fatalf("optional missing Secret: %v", err)
	}
	if _, err := os.Readlink(filepath.Join(paths["v"], dataDirName)); err != nil {
		t.Fatalf("optional missing Secret gives no (empty) volume: %v", err)
	}

	required := volumePod(corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "absent"}}})
	_, err = setUpVolumes(context.Background(), testObjects(), required, t.TempDir())
	var notReady *errVolumeNotReady
	if !errors.As(err, &notReady) || !apierrors.IsNotFound(err) {
		t.Fatalf("required missing Secret: err %v, want errVolumeNotReady wrapping NotFound", err)
	}
	if want := `MountVolume.SetUp failed for volume "v" : secrets "absent" not found`; err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}

	missingKey := volumePod(corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: "certs", Items: []corev1.KeyToPath{{Key: "nope", Path: "nope"}}}}})
	if _, err := setUpVolumes(context.Background(), testObjects(), missingKey, t.TempDir()); err == nil {
		t.Fatal("a missing key of a non-optional Secret was accepted")
	}
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
	if err != nil {
		t.Fatal(err)
	}
	dir := paths["kube-api-access"]
	for file, want := range map[string]string{"token": "token-for-ns/op--3607", "ca.crt": "ROOT", "namespace": "ns", "app": "op"} { //nolint:gosec // G101: the fake token of the test's fake object source
		if got := readVolumeFile(t, dir, file); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
}

func TestEmptyDirIsWorldWritableAndUnsupportedKindsAreNamed(t *testing.T) {
	pod := volumePod(corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	paths, err := setUpVolumes(context.Background(), testObjects(), pod, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(paths["scratch"]); err != nil || info.Mode().Perm() != 0o777 {
		t.Fatalf("emptyDir mode = %v (%v), want 0777", info.Mode().Perm(), err)
	}
	pvc := volumePod(corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "d"}}})
	_, err = setUpVolumes(context.Background(), testObjects(), pvc, t.TempDir())
	var unsupported *errVolumeUnsupported
	if !errors.As(err, &unsupported) || unsupported.kind != "persistentVolumeClaim" {
		t.Fatalf("PVC volume: %v, want errVolumeUnsupported naming persistentVolumeClaim", err)
	}
}
