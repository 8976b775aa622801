package doctor

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/gauntlet-dev/gauntlet/operator/internal/certs"
)

// permission is one request the cert-controller makes in automatic mode.
type permission struct {
	verb, group, resource, namespace, name string
}

func (p permission) String() string {
	r := p.resource
	if p.group != "" {
		r += "." + p.group
	}
	if p.name != "" {
		r += "/" + p.name
	}
	if p.namespace != "" {
		return fmt.Sprintf("%s %s in namespace %s", p.verb, r, p.namespace)
	}
	return p.verb + " " + r
}

// canI is the `kubectl auth can-i` command that checks p for user.
func (p permission) canI(user string) string {
	r := p.resource
	if p.group != "" {
		r += "." + p.group
	}
	if p.name != "" {
		r += "/" + p.name
	}
	cmd := fmt.Sprintf("kubectl auth can-i %s %s --as=%s", p.verb, r, user)
	if p.namespace != "" {
		cmd += " -n " + p.namespace
	}
	return cmd
}

// certControllerPermissions are the requests the automatic mode's cert-controller makes: it
// creates, reads, updates and watches its Secret, and reads and updates the caBundle of its
// webhook configurations (and of the conversion CRD, when the release points one at it).
func (s *session) certControllerPermissions() []permission {
	ns := s.opts.Namespace
	ps := []permission{
		{verb: "create", resource: "secrets", namespace: ns},
		{verb: "get", resource: "secrets", namespace: ns, name: s.secretName},
		{verb: "update", resource: "secrets", namespace: ns, name: s.secretName},
		{verb: "watch", resource: "secrets", namespace: ns, name: s.secretName},
	}
	for _, c := range []struct{ resource, name string }{
		{"validatingwebhookconfigurations", s.validatingName},
		{"mutatingwebhookconfigurations", s.mutatingName},
	} {
		for _, verb := range []string{"get", "update"} {
			ps = append(ps, permission{verb: verb, group: "admissionregistration.k8s.io", resource: c.resource, name: c.name})
		}
	}
	if s.conversionCRD != "" {
		for _, verb := range []string{"get", "update"} {
			ps = append(ps, permission{verb: verb, group: "apiextensions.k8s.io", resource: "customresourcedefinitions", name: s.conversionCRD})
		}
	}
	return ps
}

// checkRBAC asks the API server, with SubjectAccessReviews for the operator's
// ServiceAccount, whether the cert-controller may do what automatic mode needs.
func checkRBAC(ctx context.Context, s *session) outcome {
	ns := s.opts.Namespace
	user := fmt.Sprintf("system:serviceaccount:%s:%s", ns, s.saName)
	title := fmt.Sprintf("ServiceAccount %s/%s has the cert-controller's permissions", ns, s.saName)
	if s.mode != certs.ModeAutomatic {
		return pass(title, fmt.Sprintf("not needed: in %s mode the operator never writes the Secret or the caBundles", s.mode))
	}
	var denied []permission
	var details []string
	for _, p := range s.certControllerPermissions() {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: p.verb, Group: p.group, Resource: p.resource, Namespace: p.namespace, Name: p.name,
			},
		}}
		if err := s.client.Create(ctx, sar); err != nil {
			return failure(title, readError("creating a SubjectAccessReview for "+user, err))
		}
		if !sar.Status.Allowed {
			denied = append(denied, p)
			reason := sar.Status.Reason
			if reason == "" {
				reason = "no RBAC rule allows it"
			}
			details = append(details, fmt.Sprintf("cannot %s (%s)", p, reason))
		}
	}
	if len(denied) == 0 {
		return pass(title, fmt.Sprintf("allowed: %d requests of the automatic-mode cert-controller", len(s.certControllerPermissions())))
	}
	var cannot []string
	for _, p := range denied {
		cannot = append(cannot, p.String())
	}
	return failure(title, documented(t10,
		fmt.Sprintf("%s cannot %s", user, strings.Join(cannot, ", ")),
		s.fix.reinstall()+"   # re-renders the chart's Role "+s.deploymentName+"-certs and ClusterRole",
		denied[0].canI(user)+"   # must say yes"),
		details...)
}
