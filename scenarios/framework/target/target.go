// Package target reads the description of an operator under test: where its binaries and chart
// come from, its chart values per certificate mode, the objects its webhooks need and judge, and
// the checks it is known to fail. The webhook contract's checks (the W catalog) run against any
// target from this description alone.
//
// A description is one YAML file, target.yaml, in the target's directory (scenarios/targets/<name>).
// Load validates it against the types below and reports every problem as file:line; Schema gives
// the same rules as a JSON schema, for editors.
//
// The Go types are the one source of the format: a field without omitempty is required, `doc`
// is its description, `enum` lists the values it may take.
package target

import "time"

// Target describes one operator under test.
type Target struct {
	Name        string       `yaml:"name" doc:"The target's name, as TARGET=<name> and the report call it: lower case letters, digits and dashes." pattern:"^[a-z][a-z0-9-]*$"`
	Description string       `yaml:"description,omitempty" doc:"One line on what the operator is, for the report."`
	Source      Source       `yaml:"source" doc:"Where the operator's binaries come from."`
	Chart       Chart        `yaml:"chart" doc:"The Helm chart users install, and the values every certificate mode shares."`
	CertModes   CertModes    `yaml:"certModes" doc:"The certificate modes the target supports, each with its chart values. A mode left out is not applicable: its checks are reported as such, with the reason the target gives in notApplicable."`
	Setup       []string     `yaml:"setup,omitempty" doc:"Manifests (paths relative to this file) applied in order after the install and before any probe: what the webhooks need before they judge anything (a policy, a constraint). Each is retried until the API server knows its kind, so a Constraint may follow its ConstraintTemplate."`
	Probes      []Probe      `yaml:"probes" doc:"For each webhook: an object it must admit, and one it must deny."`
	Names       Names        `yaml:"names,omitempty" doc:"Names the checks would otherwise read from the rendered chart; give one only where the chart leaves a choice."`
	Divergences []Divergence `yaml:"divergences,omitempty" doc:"Checks the target is known to fail, each with the reason and a link. The report marks each reproduced or no longer reproducing; only unexpected results fail the run."`

	dir   string         // the description's directory, which its paths are relative to
	file  string         // the description's file
	lines map[string]int // field path → line, for problems found after Load (a build's)
}

// Dir is the description's directory; the paths it gives are relative to it.
func (t *Target) Dir() string { return t.dir }

// Source is where the binaries come from: exactly one of Module, Dir and Images.
type Source struct {
	Module   *Module   `yaml:"module,omitempty" doc:"Build from a Go module version the module proxy serves."`
	Dir      string    `yaml:"dir,omitempty" doc:"Build from a source directory (relative to this file) holding the module."`
	Images   []string  `yaml:"images,omitempty" doc:"Prebuilt images the cluster can already pull (provider existing): nothing is built."`
	Binaries []Binary  `yaml:"binaries,omitempty" doc:"With module or dir: the image references the chart renders, each with the main package that is its program."`
	StandIns []StandIn `yaml:"standIns,omitempty" doc:"With module or dir: images the chart renders that cannot be built here (a sidecar's, a hook Job's), each run as gauntlet's stand-in program instead. The report lists them."`
}

// Module is a Go module version.
type Module struct {
	Path    string `yaml:"path" doc:"Module path, e.g. github.com/open-policy-agent/gatekeeper/v3."`
	Version string `yaml:"version" doc:"A version the module proxy serves, e.g. v3.23.1." pattern:"^v[0-9]+\\.[0-9]+\\.[0-9]+"`
}

// Binary is one image the chart renders: the program it runs, and what else it holds. Built
// FROM scratch, it holds these and nothing else: a command, exec probe or hook naming anything
// else fails, as on a real node.
type Binary struct {
	Image    string      `yaml:"image" doc:"The image reference as the rendered chart has it, e.g. openpolicyagent/gatekeeper:v3.23.1."`
	Package  string      `yaml:"package" doc:"The main package of the image's entrypoint, relative to the module root (. for the root)."`
	Path     string      `yaml:"path,omitempty" doc:"Where the image holds the entrypoint, e.g. /manager. Left out: the path the chart's containers name in their command, or /<the program's name> when they name none."`
	Programs []Program   `yaml:"programs,omitempty" doc:"Further programs the image holds, which a container's command (an init container's, say) may name."`
	Files    []ImageFile `yaml:"files,omitempty" doc:"Files and directories the image holds, which its programs read (e.g. CRDs under /opt)."`
}

// Program is one more program an image holds.
type Program struct {
	Path    string `yaml:"path" doc:"Where the image holds it, as a container's command names it: a clean absolute path, e.g. /crd-apply."`
	Package string `yaml:"package" doc:"Its main package, relative to the module root, e.g. ./cmd/crd-apply."`
}

// ImageFile is a file or directory an image holds.
type ImageFile struct {
	Path string `yaml:"path" doc:"Where the image holds it: a clean absolute path, e.g. /opt/crds."`
	From string `yaml:"from" doc:"The file or directory put there: inside the module with source.module, else relative to this file, e.g. config/crd/bases."`
}

// StandIn is an image nobody can build here, run as gauntlet's stand-in program.
type StandIn struct {
	Image    string `yaml:"image" doc:"The image reference as the rendered chart has it, e.g. quay.io/brancz/kube-rbac-proxy:v0.18.0."`
	Replaces string `yaml:"replaces" doc:"What the image's containers do for the operator, which the stand-in does not, e.g. the metrics proxy sidecar."`
	Why      string `yaml:"why" doc:"Why it cannot run here, and why the checks do not need it."`
	// Runs takes workspace.StandInUntilStopped or workspace.StandInExitAtOnce.
	Runs string `yaml:"runs" doc:"untilStopped: the stand-in stays up until it is stopped, then exits 0 (a sidecar's); exitAtOnce: it exits 0 at once (a hook Job's)." enum:"untilStopped,exitAtOnce"`
}

// Chart is the chart users install.
type Chart struct {
	Path      string         `yaml:"path" doc:"The chart's directory: inside the module with source.module, else relative to this file."`
	Release   string         `yaml:"release" doc:"The Helm release name the target's documentation installs with."`
	Namespace string         `yaml:"namespace" doc:"The release namespace the target's documentation installs into."`
	Values    map[string]any `yaml:"values,omitempty" doc:"Values every certificate mode sets. Users get the chart's defaults: set only what cannot run here, and say why in overrides."`
	Overrides []Override     `yaml:"overrides,omitempty" doc:"Why each value that departs from the chart's defaults is set. The report lists them."`
	// Dependencies are added to the chart as it is loaded (Target.LoadChart).
	Dependencies []ChartDependency `yaml:"dependencies,omitempty" doc:"Subcharts the chart's Chart.yaml lists from a Helm repository, which the chart's directory does not carry (helm dependency build would fetch them, and the packaged chart users install bundles them): each taken from the Go module that holds it."`
}

// ChartDependency is a subchart the chart lists but does not carry, from a Go module.
type ChartDependency struct {
	Name   string `yaml:"name" doc:"The dependency's name as the chart's Chart.yaml lists it, e.g. kyverno-api."`
	Module Module `yaml:"module" doc:"The Go module version that holds the subchart, e.g. the one the target's go.mod pins."`
	Path   string `yaml:"path" doc:"The subchart's directory inside that module, e.g. charts/kyverno-api."`
	Why    string `yaml:"why" doc:"Why that module's subchart is the one the chart's repository serves."`
}

// Override says why one chart value departs from the chart's default.
type Override struct {
	Value string `yaml:"value" doc:"The value's dotted path, e.g. postInstall.labelNamespace.enabled."`
	Why   string `yaml:"why" doc:"Why it cannot keep the chart's default here."`
}

// The certificate modes, in the W catalog's words.
const (
	// SelfManaged: the operator creates, stores, rotates and injects its own certificate.
	SelfManaged = "selfManaged"
	// CertManager: cert-manager issues the Secret and its cainjector fills the caBundles.
	CertManager = "certManager"
	// External: the user creates the Secret and passes the caBundle as a value.
	External = "external"
)

// CertModes holds the values of each certificate mode the target supports.
type CertModes struct {
	SelfManaged   *CertMode         `yaml:"selfManaged,omitempty" doc:"The operator creates, stores, rotates and injects its own certificate."`
	CertManager   *CertMode         `yaml:"certManager,omitempty" doc:"cert-manager issues the Secret and its cainjector fills the caBundles."`
	External      *CertMode         `yaml:"external,omitempty" doc:"The user creates the Secret (names.secret, keys tls.crt, tls.key, ca.crt) and passes the CA as a value: the string ${CA_BUNDLE} in values is replaced with the base64 PEM bundle."`
	NotApplicable map[string]string `yaml:"notApplicable,omitempty" doc:"Why a mode is left out, by mode name (selfManaged, certManager, external)."`
}

// CertMode is how to install the target in one certificate mode.
type CertMode struct {
	Values    map[string]any `yaml:"values,omitempty" doc:"Chart values for this mode, merged over chart.values."`
	Setup     []string       `yaml:"setup,omitempty" doc:"Manifests (paths relative to this file) applied in the release namespace before the install in this mode, e.g. the Issuer and Certificate a chart expects to find."`
	Overrides []Override     `yaml:"overrides,omitempty" doc:"Why each value of this mode goes beyond what the target documents for the mode. The report lists them."`
	Rotation  *Rotation      `yaml:"rotation,omitempty" doc:"How to make the serving certificate rotate during a check; without it, rotation checks are not applicable in this mode."`
	Repair    *Repair        `yaml:"repair,omitempty" doc:"What the target repairs on its own in this mode, and how fast it documents doing it. A fault left out (or repair left out) is one it does not repair here: the doctor must name it instead."`
}

// Repair is how long the target documents taking to repair each fault of its serving
// certificate on its own (W6, W7), as Go durations. Each is counted from the fault until the
// webhooks answer again, trusted by every caBundle; "" is a fault the target does not repair.
type Repair struct {
	Secret   string `yaml:"secret,omitempty" doc:"The serving Secret deleted: how long until it is back and every webhook answers again, its certificate verified by every caBundle, as a Go duration (e.g. 30s). Left out: the target does not recreate it in this mode." pattern:"^[0-9]+(ms|s|m|h)([0-9]+(ms|s|m))*$"`
	CABundle string `yaml:"caBundle,omitempty" doc:"Every caBundle of the target's webhook configurations emptied: how long until they verify the served certificate again and every webhook answers, as a Go duration (e.g. 30s). Left out: the target does not refill them in this mode." pattern:"^[0-9]+(ms|s|m|h)([0-9]+(ms|s|m))*$"`
}

// SecretDeleted is how long the target takes to repair a deleted serving Secret, and whether it
// repairs it at all (r may be nil: it repairs nothing).
func (r *Repair) SecretDeleted() (time.Duration, bool) {
	if r == nil {
		return 0, false
	}
	return within(r.Secret)
}

// CABundleEmptied is how long the target takes to refill emptied caBundles, and whether it
// refills them at all (r may be nil: it repairs nothing).
func (r *Repair) CABundleEmptied() (time.Duration, bool) {
	if r == nil {
		return 0, false
	}
	return within(r.CABundle)
}

// within is a declared duration; "" (or one Load would have refused) is none.
func within(d string) (time.Duration, bool) {
	if d == "" {
		return 0, false
	}
	v, err := time.ParseDuration(d)
	return v, err == nil && v > 0
}

// Rotation is how a check makes the serving certificate rotate.
type Rotation struct {
	Values    map[string]any `yaml:"values,omitempty" doc:"Chart values (merged over the mode's) that make the certificate rotate on its own within the check, e.g. short validities."`
	Procedure string         `yaml:"procedure,omitempty" doc:"The target's documented manual procedure instead: deleteSecret (delete the serving Secret) or renewCertificate (a cert-manager renewal)." enum:"deleteSecret,renewCertificate"`
	Within    string         `yaml:"within" doc:"How long the target documents a rotation to take, as a Go duration (e.g. 2m)." pattern:"^[0-9]+(ms|s|m|h)([0-9]+(ms|s|m))*$"`
}

// The rotation procedures a description may name.
const (
	// DeleteSecret: delete the serving Secret; the operator makes a new certificate.
	DeleteSecret = "deleteSecret"
	// RenewCertificate: a cert-manager renewal of the Certificate that issues the serving Secret.
	RenewCertificate = "renewCertificate"
)

// WithinDuration is Within as a duration (Load has checked that it parses).
func (r Rotation) WithinDuration() time.Duration {
	d, _ := time.ParseDuration(r.Within)
	return d
}

// Probe is what one webhook must admit and deny.
type Probe struct {
	Webhook  string  `yaml:"webhook" doc:"The webhook's name, as in its webhook configuration."`
	Admitted string  `yaml:"admitted" doc:"A manifest (path relative to this file) holding one object the webhook must admit."`
	Denied   *Denial `yaml:"denied,omitempty" doc:"An object the webhook must deny (validating webhooks)."`
	Patch    string  `yaml:"patch,omitempty" doc:"Mutating webhooks: the JSON patch it answers for the admitted object, as JSON (a list of operations)."`
}

// Denial is an object a webhook must deny and the stable part of its message.
type Denial struct {
	Object  string `yaml:"object" doc:"A manifest (path relative to this file) holding one object the webhook must deny."`
	Message string `yaml:"message" doc:"Text the API server's denial must contain: the stable part of the webhook's message."`
}

// Names are what the checks would otherwise read from the rendered chart.
type Names struct {
	Deployment string `yaml:"deployment,omitempty" doc:"The Deployment whose pods serve the webhooks, where the chart renders several behind the webhook Service's selector."`
	Secret     string `yaml:"secret,omitempty" doc:"The Secret holding the serving certificate, where the serving container mounts several, or none because it reads the Secret through the API. Where it mounts some, this must be one of them."`
}

// Divergence is one check the target is known to fail.
type Divergence struct {
	Check string   `yaml:"check" doc:"The W check's ID, e.g. W5." pattern:"^W[0-9]+$"`
	Modes []string `yaml:"modes,omitempty" doc:"The certificate modes it applies to; all when left out." enum:"selfManaged,certManager,external"`
	Why   string   `yaml:"why" doc:"One line on why the target behaves so."`
	Link  string   `yaml:"link" doc:"Evidence: the target's documentation, code or issue." pattern:"^https://"`
	// Intermittent divergences need a rare instant (a request at the moment a pod stops): a run
	// that misses it passes the check without making the description stale.
	Intermittent bool `yaml:"intermittent,omitempty" doc:"The failure needs a rare instant to show, so a run may miss it: a pass is then reported as not seen this run, not as a divergence that no longer reproduces."`
}
