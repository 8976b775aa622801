package contract

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

func TestEmptyingThenRestoringPutsBackOnlyWhatIsStillEmpty(t *testing.T) {
	a := &admissionregistrationv1.WebhookClientConfig{CABundle: []byte("ca-a")}
	b := &admissionregistrationv1.WebhookClientConfig{CABundle: []byte("ca-b")}
	slots := []bundleSlot{{"a.example.com", a}, {"b.example.com", b}}
	ref := webhookRef{configuration: "demo"}

	saved := savedBundles{}
	changed := editSlots(slots, ref, func(w webhookRef, current []byte) []byte {
		saved[w] = current
		return nil
	})
	assert.True(t, changed, "emptying two bundles is a change")
	assert.Empty(t, a.CABundle, "bundle a after emptying")
	assert.Empty(t, b.CABundle, "bundle b after emptying")

	b.CABundle = []byte("ca-b-refilled-by-the-target")
	restore := func(w webhookRef, current []byte) []byte {
		if len(current) == 0 {
			return saved[w]
		}
		return current
	}
	assert.True(t, editSlots(slots, ref, restore), "restoring bundle a is a change")
	assert.Equal(t, "ca-a", string(a.CABundle), "bundle a: expected the saved one back")
	assert.Equal(t, "ca-b-refilled-by-the-target", string(b.CABundle), "bundle b: expected the target's refill kept")
	assert.False(t, editSlots(slots, ref, restore), "a second restore changes nothing")
}

func TestTheDoctorIsAskedAboutTheTargetsServiceAndSecret(t *testing.T) {
	it := &target.Installed{Namespace: "gatekeeper-system", Served: target.Served{Service: "gatekeeper-webhook-service", Secret: "gatekeeper-webhook-server-cert"}}
	got := strings.Join(doctorArgs(clusterAt{"/kube/config", true}, it, "w6-abc"), " ")
	want := "--kubeconfig /kube/config --namespace gatekeeper-system --service gatekeeper-webhook-service --secret gatekeeper-webhook-server-cert --test-namespace w6-abc -o json"
	assert.Equal(t, want, got, "the generic doctor's command line, on a cluster whose addresses this machine reaches (local)")
	// A kind node's Service and pod addresses are not this machine's to dial: a ClusterIP
	// dialed from here leaves by the default route and meets whatever answers there.
	got = strings.Join(doctorArgs(clusterAt{"/kube/config", false}, it, "w6-abc"), " ")
	assert.Equal(t, want+" --connect=port-forward", got, "the generic doctor's command line, on a cluster whose addresses this machine does not reach (kind)")
}

// clusterAt is what the doctor's command line needs of a cluster.
type clusterAt struct {
	kubeconfig             string
	serviceNetworkFromHost bool
}

func (c clusterAt) KubeconfigPath() string       { return c.kubeconfig }
func (c clusterAt) ServiceNetworkFromHost() bool { return c.serviceNetworkFromHost }

func TestAWaitPastItsDeadlineStillLooksOnce(t *testing.T) {
	assert.Equal(t, poll.Interval, until(time.Now().Add(-time.Minute)), "a deadline passed")
	left := until(time.Now().Add(time.Minute))
	assert.True(t, left > 59*time.Second && left <= time.Minute, "a deadline a minute away: expected about a minute, saw %s", left)
}
