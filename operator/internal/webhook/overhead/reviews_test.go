package overhead

import (
	"fmt"
	"sync/atomic"
)

// reviewTemplate is the AdmissionReview the API server sends for the bench's dry-run create of
// a DynamoGraphDeployment (scenarios/framework/dynamo.GraphDeployment, named bench-N): the object as the
// create handler has it before admission (uid, creationTimestamp, generation and managedFields
// set), the requesting user, and the create's options. %s stands for the object's name, and
// the request's uid and object's uid are made unique per call with it.
const reviewTemplate = `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{` +
	`"uid":"6c1a7e2b-4f0d-4b7e-9a52-%[1]s",` +
	`"kind":{"group":"nvidia.com","version":"v1alpha1","kind":"DynamoGraphDeployment"},` +
	`"resource":{"group":"nvidia.com","version":"v1alpha1","resource":"dynamographdeployments"},` +
	`"requestKind":{"group":"nvidia.com","version":"v1alpha1","kind":"DynamoGraphDeployment"},` +
	`"requestResource":{"group":"nvidia.com","version":"v1alpha1","resource":"dynamographdeployments"},` +
	`"name":"bench-%[1]s","namespace":"gauntlet-bench","operation":"CREATE",` +
	`"userInfo":{"username":"kubernetes-admin","groups":["kubeadm:cluster-admins","system:authenticated"]},` +
	`"object":{"apiVersion":"nvidia.com/v1alpha1","kind":"DynamoGraphDeployment","metadata":{%[2]s` +
	`"creationTimestamp":"2026-07-01T10:00:00Z","generation":1,"managedFields":[{"apiVersion":"nvidia.com/v1alpha1",` +
	`"fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:backendFramework":{},"f:services":{".":{},"f:frontend":{".":{},"f:replicas":{}}}}},` +
	`"manager":"gauntlet-bench","operation":"Update","time":"2026-07-01T10:00:00Z"}],` +
	`"name":"bench-%[1]s","namespace":"gauntlet-bench","uid":"0b7c9d3e-2a41-4e8f-b6d5-%[1]s"},` +
	`"spec":{"backendFramework":"vllm","services":{"frontend":{"replicas":1}}}},` +
	`"oldObject":null,"dryRun":true,` +
	`"options":{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1","dryRun":["All"],"fieldManager":"gauntlet-bench"}}}`

// stamped is the annotation the mutating webhook adds, which the validating webhook then sees.
const stamped = `"annotations":{"nvidia.com/dynamo-operator-origin-version":"v0.9.0-bench"},`

var serial atomic.Uint64

// mutateReview is the review the mutating webhook gets: the object as the user sent it.
func mutateReview() []byte { return render("") }

// validateReview is the review the validating webhook gets: the object as mutated.
func validateReview() []byte { return render(stamped) }

func render(annotations string) []byte {
	n := fmt.Sprintf("%012d", serial.Add(1)%1_000_000_000_000)
	return fmt.Appendf(nil, reviewTemplate, n, annotations)
}
