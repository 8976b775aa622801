package certmodes

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// caPEM is a fresh self-signed CA with the given serial.
func caPEM(t *testing.T, serial int64) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// vwc is a ValidatingWebhookConfiguration as the API server returns it: two webhooks with
// their caBundles, the first's owned by manager a, the second's by b.
func vwc(bundle1, bundle2 []byte) *unstructured.Unstructured {
	hook := func(name string, bundle []byte) any {
		return map[string]any{"name": name, "clientConfig": map[string]any{"caBundle": base64.StdEncoding.EncodeToString(bundle)}}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"webhooks": []any{hook("one.x", bundle1), hook("two.x", bundle2)}}}
	owns := func(name string) *metav1.FieldsV1 {
		return metav1.NewFieldsV1(`{"f:webhooks":{"k:{\"name\":\"` + name + `\"}":{".":{},"f:clientConfig":{"f:caBundle":{}},"f:name":{}}}}`)
	}
	u.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "dynamo-operator/a", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: owns("one.x")},
		{Manager: "dynamo-operator/b", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: owns("two.x")},
	})
	return u
}

func TestWebhookWritesAreTracedToTheirFieldManager(t *testing.T) {
	x, y := caPEM(t, 0x10), caPEM(t, 0x11)
	before, after := vwc(x, x), vwc(x, append(append([]byte{}, x...), y...))
	changes := webhookCABundleChanges(before, after)
	if len(changes) != 1 || changes[0].place != "webhook two.x" {
		t.Fatalf("changes from adding a CA to webhook two.x: expected only webhook two.x, saw %+v", changes)
	}
	if got := fieldOwners(after, changes[0].ownerPath); len(got) != 1 || got[0] != "dynamo-operator/b" {
		t.Errorf("owner of webhook two.x's caBundle: expected [dynamo-operator/b], saw %v", got)
	}
	w := write{object: "ValidatingWebhookConfiguration v", changes: changes, authors: []string{"dynamo-operator/b"}}
	if !w.onlyAddedTrust() {
		t.Errorf("a write from [10] to [10 + 11]: expected it to count as adding trust only")
	}
	if got, want := w.describe(), "changed caBundle of webhook two.x: CAs [10] → [10 + 11]"; got != want {
		t.Errorf("describe: expected %q, saw %q", want, got)
	}
	removed := write{object: w.object, changes: webhookCABundleChanges(after, before), authors: w.authors}
	if removed.onlyAddedTrust() {
		t.Errorf("a write from [10 + 11] to [10]: expected it not to count as adding trust only")
	}
	if w.authoredBy([]tenure{{holder: "a_1234"}}) || !w.authoredBy([]tenure{{holder: "b_5678"}}) {
		t.Errorf("a write by dynamo-operator/b: expected it authored by holder b_5678 and not by a_1234")
	}
}

func TestEventsOrderByRevisionElseArrival(t *testing.T) {
	now := time.Now()
	l := &writeLog{events: []event{
		{rv: "30", arrived: now}, {rv: "9", arrived: now.Add(time.Second)}, {rv: "100", arrived: now.Add(2 * time.Second)},
	}}
	events, numeric := l.ordered()
	if !numeric || events[0].rv != "9" || events[1].rv != "30" || events[2].rv != "100" {
		t.Errorf("integer resourceVersions: expected 9, 30, 100 by revision, saw %s, %s, %s (numeric %t)", events[0].rv, events[1].rv, events[2].rv, numeric)
	}
	l.events = append(l.events, event{rv: "opaque", arrived: now.Add(-time.Second)})
	events, numeric = l.ordered()
	if numeric || events[0].rv != "opaque" || events[1].rv != "30" || events[3].rv != "100" {
		t.Errorf("one opaque resourceVersion: expected arrival order opaque, 30, 9, 100, saw %s, %s, %s, %s (numeric %t)", events[0].rv, events[1].rv, events[2].rv, events[3].rv, numeric)
	}
}
