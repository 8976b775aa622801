package certs

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Mode says who provides the webhook serving certificate.
type Mode string

const (
	// ModeAutomatic: the operator generates, stores, rotates and injects its own CA and
	// serving certificate (the built-in cert-controller).
	ModeAutomatic Mode = "automatic"
	// ModeCertManager: cert-manager issues the Secret and its cainjector fills the caBundles;
	// the operator only serves the mounted files.
	ModeCertManager Mode = "cert-manager"
	// ModeExternal: the user supplies the Secret and the caBundles; the operator only serves
	// the mounted files.
	ModeExternal Mode = "external"
)

// ParseMode turns a flag value into a Mode.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAutomatic, ModeCertManager, ModeExternal:
		return m, nil
	}
	return "", fmt.Errorf("unknown webhook certificate mode %q (want %s, %s or %s)", s, ModeAutomatic, ModeCertManager, ModeExternal)
}

// Defaults, as documented for the chart's values.
const (
	DefaultCAValidity     = 10 * 365 * 24 * time.Hour
	DefaultServerValidity = 10 * 365 * 24 * time.Hour
	DefaultLookAhead      = 90 * 24 * time.Hour
	DefaultCheckInterval  = 30 * time.Second
	// DefaultCAPropagation is the flag's default for Options.CAPropagation (zero there means
	// no wait).
	DefaultCAPropagation = 5 * time.Second
	// DefaultOLMCertDir is where OLM mounts the serving certificate of operators it installs.
	DefaultOLMCertDir = "/apiserver.local.config/certificates"
)

// Options configures the certificate handling of the webhook server.
type Options struct {
	Mode Mode

	// Namespace is the operator's namespace, home of the Secret and the webhook Service.
	Namespace string
	// SecretName is the Secret holding tls.crt, tls.key and ca.crt.
	SecretName string
	// ServiceName is the webhook Service; generated certificates carry the SANs
	// <svc>, <svc>.<ns>, <svc>.<ns>.svc and <svc>.<ns>.svc.cluster.local.
	ServiceName string

	// CertDir is where the webhook server reads its certificate and key. In automatic mode the
	// operator writes tls.crt and tls.key there, so it must be writable (an emptyDir, never the
	// Secret's own volume).
	CertDir string
	// OLMCertDir is the fallback location OLM mounts apiserver.crt and apiserver.key into.
	// Defaults to DefaultOLMCertDir.
	OLMCertDir string

	// CAValidity and ServerValidity are the lifetimes of generated certificates; a Secret whose
	// CA or server certificate expires within LookAhead is regenerated.
	CAValidity, ServerValidity, LookAhead time.Duration

	// CheckInterval is how often the Secret, the files and every caBundle are re-checked in
	// automatic mode (the webhook configurations cannot be watched by a restricted operator).
	CheckInterval time.Duration

	// CAPropagation is how long a CA must have been in every caBundle before a certificate it
	// signed is stored or served (automatic mode): the time the API server's informers get to
	// see the new bundles. Zero: no wait.
	CAPropagation time.Duration

	// ValidatingWebhookConfigurations and MutatingWebhookConfigurations are injected with
	// ca.crt in every webhook they contain (automatic mode only).
	ValidatingWebhookConfigurations, MutatingWebhookConfigurations []string
	// ConversionCRDs get ca.crt in spec.conversion.webhook.clientConfig.caBundle (automatic
	// mode only).
	ConversionCRDs []string

	// LeaderElection says other replicas run beside this one and only the leader may generate
	// certificates, write the Secret and inject caBundles (automatic mode): the Controller
	// does so only while Controller.Leader() runs. Without it the Controller is the only
	// writer.
	LeaderElection bool

	// FieldOwner is the field manager of every write (Secret, caBundles), so the objects'
	// managedFields say which replica wrote them: the operator passes "dynamo-operator/<pod>".
	// Empty: the API client's default (the binary's name), the same for every replica.
	FieldOwner string
}

func (o *Options) setDefaults() {
	// Flags left empty ("don't touch the CRD") arrive as empty names.
	for _, names := range []*[]string{&o.ValidatingWebhookConfigurations, &o.MutatingWebhookConfigurations, &o.ConversionCRDs} {
		*names = slices.DeleteFunc(slices.Clone(*names), func(n string) bool { return n == "" })
	}
	if o.OLMCertDir == "" {
		o.OLMCertDir = DefaultOLMCertDir
	}
	if o.CAValidity == 0 {
		o.CAValidity = DefaultCAValidity
	}
	if o.ServerValidity == 0 {
		o.ServerValidity = DefaultServerValidity
	}
	if o.LookAhead == 0 {
		o.LookAhead = DefaultLookAhead
	}
	if o.CheckInterval == 0 {
		o.CheckInterval = DefaultCheckInterval
	}
}

func (o *Options) validate() error {
	var errs []error
	if _, err := ParseMode(string(o.Mode)); err != nil {
		errs = append(errs, err)
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("webhook certificate directory is empty"))
	}
	if o.Mode == ModeAutomatic {
		for _, f := range []struct{ name, value string }{
			{"namespace", o.Namespace}, {"certificate Secret name", o.SecretName}, {"webhook Service name", o.ServiceName},
		} {
			if f.value == "" {
				errs = append(errs, fmt.Errorf("automatic certificate mode needs the %s", f.name))
			}
		}
		// A look-ahead as long as a lifetime would declare every fresh certificate
		// "expiring" and regenerate forever.
		if o.LookAhead >= o.ServerValidity {
			errs = append(errs, fmt.Errorf("certificate look-ahead %s must be shorter than the server certificate validity %s", o.LookAhead, o.ServerValidity))
		}
		if o.LookAhead >= o.CAValidity {
			errs = append(errs, fmt.Errorf("certificate look-ahead %s must be shorter than the CA validity %s", o.LookAhead, o.CAValidity))
		}
		// A rotation begins within a check interval of the look-ahead and serves the new
		// certificate CAPropagation later: the old one must still be valid then.
		if o.LookAhead <= o.CAPropagation+o.CheckInterval {
			errs = append(errs, fmt.Errorf("certificate look-ahead %s must be longer than the CA propagation %s plus the check interval %s: a rotation serves the new certificate that long after it begins, and the old one must still be valid", o.LookAhead, o.CAPropagation, o.CheckInterval))
		}
		if o.LookAhead < 0 || o.CheckInterval < 0 || o.CAPropagation < 0 {
			errs = append(errs, errors.New("certificate look-ahead, check interval and CA propagation must not be negative"))
		}
	}
	return errors.Join(errs...)
}

// dnsNames are the SANs of a generated serving certificate.
func (o *Options) dnsNames() []string {
	svc, ns := o.ServiceName, o.Namespace
	return []string{svc, svc + "." + ns, svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local"}
}

// serviceHost is the name the API server dials a service-referenced webhook by, and so the
// SAN a reused certificate must carry.
func (o *Options) serviceHost() string { return o.ServiceName + "." + o.Namespace + ".svc" }

func (o *Options) secretRef() string { return o.Namespace + "/" + o.SecretName }
