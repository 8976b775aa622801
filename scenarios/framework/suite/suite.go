// Package suite turns scenario features into an e2e suite: it picks the provider
// (--provider / GAUNTLET_PROVIDER, default local), creates or reuses the cluster
// (KEEP_CLUSTER=1), installs the suite's operator release, runs the features, records each
// scenario (its ID is the feature's `scenario` label) in _output/e2e/<suite>/summary.json and
// junit.xml, collects artifacts of failures under _output/e2e/<suite>/artifacts/, prints
// progress with elapsed times, and ends by writing where its time went (ProfileFile).
//
// Scenario packages stay provider-agnostic: a step gets the cluster under test with
// ClusterFrom and the suite's release with ReleaseFrom, both from the context.
package suite

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/pkg/types"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/chart"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/cluster"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/expect"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/release"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/target"
)

// Feature labels the suite reads.
const (
	// LabelScenario holds the catalog ID (CATALOG.md), e.g. C1. Every feature needs one.
	LabelScenario = "scenario"
	// LabelCertMode restricts a feature to suites whose release uses one of these certificate
	// modes (chart.CertMode values); features without it run in every suite.
	LabelCertMode = "certmode"
	// LabelSuite marks namespaces the suite created, so a kept cluster can be cleaned.
	LabelSuite = release.SuiteNamespaceLabel
	// LabelAtOnce names a group of features that run at once (e2e-framework's TestInParallel):
	// features next to each other in Spec.Features with the same value start together, and the
	// feature after them once they all ended. For scenarios that mostly wait and share nothing
	// they change, e.g. each stopping an operator of its own.
	LabelAtOnce = "at-once"
)

// Timeouts of the suite's own steps.
const (
	releaseReadyTimeout = 3 * time.Minute
	admissionWarnAfter  = 30 * time.Second
	artifactsTimeout    = time.Minute
)

// Spec describes a suite: its name, what its cluster needs, the release installed before the
// scenarios run, and the scenarios.
type Spec struct {
	// Name is the suite's directory under _output/e2e and part of its cluster's name.
	Name string
	// CertManager asks for a cluster with cert-manager.
	CertManager bool
	// Release is installed before any scenario and handed to them through ReleaseFrom; nil
	// installs nothing (scenarios then install what they need).
	Release *chart.Release
	// BeforeInstall runs after the cluster is up and before Release is installed, e.g. to
	// create the Issuer a release's issuerRef names. It may change the release.
	BeforeInstall func(ctx context.Context, c *Cluster, r *chart.Release) error
	// Targets installs, instead of Release, the target --target names (env GAUNTLET_TARGET,
	// default DefaultTarget) in the certificate mode --target-mode names (env
	// GAUNTLET_TARGET_MODE, default its first declared one), and hands it to the scenarios
	// through TargetFrom.
	Targets bool
	// Features are the scenarios. Features labelled certmode=<mode> run only when Release is
	// installed in one of those modes.
	Features []types.Feature
}

// Suite runs one Spec. Create it with New, call Run from TestMain and Test from the suite's
// only test function.
type Suite struct {
	spec     Spec
	opts     options
	progress *progress
	env      types.Environment
	cfg      *envconf.Config
	recorder *report.Recorder

	cluster    *Cluster
	reused     bool
	release    *chart.Release
	target     *target.Target
	targetMode string
	rendered   *rendered // the target's chart, rendered before the cluster is made
	// noDelayProxy says why the cluster runs no DelayProxyImage ("": it does).
	noDelayProxy string
	// chainsaw is the Chainsaw binary that runs the target's Chainsaw tests; chainsawErr why
	// there is none (its build failed).
	chainsaw    string
	chainsawErr error
	setupErr    error
	// creation is the cluster's creation while it runs (nil before and after): an interrupt
	// stops it and waits for it to end (deleteClusterOnInterrupt).
	creation *creation
	// stress are the --stress workers, nil without them.
	stress *stress
	// stopRecordingPodLogs ends the recording of pod logs (recordPodLogs), nil when none runs.
	stopRecordingPodLogs func()

	mu sync.Mutex
}

// creation is a cluster creation in progress: cancel stops it, ended is closed when it returned.
type creation struct {
	cancel context.CancelFunc
	ended  chan struct{}
}

// New registers the suite's flags (--provider, --kubernetes-version, --keep-cluster,
// --operator-version, --e2e-output, --cluster-name, --cover-dir, --stress, besides e2e-framework's --labels & co.).
// Call it once, before flags are parsed (from TestMain or a package variable).
func New(spec Spec) *Suite {
	s := &Suite{spec: spec, progress: newProgress(os.Stderr)}
	s.opts.register(flag.CommandLine)
	return s
}

// Run is the suite's TestMain body: os.Exit(s.Run(m)).
func (s *Suite) Run(m *testing.M) int {
	cfg, err := envconf.NewFromFlags()
	if err != nil {
		fmt.Fprintf(os.Stderr, "suite %s: %v\n", s.spec.Name, err)
		return 2
	}
	s.cfg = cfg
	if s.opts.name != "" {
		s.spec.Name = s.opts.name
	}
	if s.spec.Targets {
		if s.target, s.targetMode, err = loadTarget(s.opts.target, s.opts.targetMode); err != nil {
			fmt.Fprintf(os.Stderr, "suite %s: %v\n", s.spec.Name, err)
			return 2
		}
		chainsawFeatures, err := s.chainsawFeatures()
		if err != nil {
			fmt.Fprintf(os.Stderr, "suite %s: target %s: %v\n", s.spec.Name, s.target.Name, err)
			return 2
		}
		s.spec.Features = slices.Concat(s.spec.Features, chainsawFeatures)
	}
	if err := s.opts.complete(s.spec.Name); err != nil {
		fmt.Fprintf(os.Stderr, "suite %s: %v\n", s.spec.Name, err)
		return 2
	}
	if err := checkIDs(s.spec.Features); err != nil {
		fmt.Fprintf(os.Stderr, "suite %s: %v\n", s.spec.Name, err)
		return 2
	}
	// Only TestInParallel reads it: the features of a LabelAtOnce group run at once, all
	// others one after another.
	s.env = env.NewWithConfig(cfg.WithParallelTestEnabled())
	if f := flag.Lookup("test.list"); cfg.DryRunMode() || (f != nil && f.Value.String() != "") {
		// `go test -list` and --dry-run only name the scenarios: no cluster, no report.
		return m.Run()
	}
	// A report or artifact left from an earlier run must not be mistaken for this run's.
	if err := clearOutputDir(s.outputDir(), os.Getenv(RunLogEnv)); err != nil {
		fmt.Fprintf(os.Stderr, "suite %s: removing the previous report: %v\n", s.spec.Name, err)
		return 2
	}
	s.recorder = report.NewRecorder(s.spec.Name, s.opts.provider, s.opts.kubernetesVersion)
	s.recorder.SetStress(s.opts.stress)
	var ids []string
	for _, f := range s.selected() {
		if s.labelsSelect(f) {
			ids = append(ids, scenarioID(f))
		}
	}
	under := "operator " + s.opts.operatorVersion
	if s.target != nil {
		under = fmt.Sprintf("target %s (%s mode)", s.target.Name, s.targetMode)
	}
	s.progress.printf("suite %s: provider %s, Kubernetes %s, %s; scenarios %s; reports in %s",
		s.spec.Name, s.opts.provider, s.opts.kubernetesVersion, under, strings.Join(ids, " "), s.outputDir())

	stopWatching := s.deleteClusterOnInterrupt()
	defer stopWatching()
	// The workers start before the cluster is created, so its setup runs contended too.
	if err := s.startStress(); err != nil {
		s.progress.printf("✗ %v", err)
		return 1
	}
	s.env.Setup(s.setupCluster, s.setupRelease, s.setupTarget)
	code := s.env.Run(m)

	if s.setupErr != nil {
		s.reportSetupFailure()
		code = 1
	}
	// The cluster's logs are exported on every run, green or red: the key-material check
	// below must see every log the operator wrote, not only those of failures.
	if s.stopRecordingPodLogs != nil {
		s.stopRecordingPodLogs()
	}
	s.exportClusterLogs()
	s.checkNoPrivateKeys()
	// S1 was the last check; writing the report and deleting the cluster need no contention.
	if err := s.stopStress(); err != nil {
		s.progress.printf("✗ %v", err)
		code = 1
	}
	if err := s.recorder.WriteFiles(s.outputDir()); err != nil {
		s.progress.printf("✗ writing the report: %v", err)
		code = 1
	}
	s.printSummary()
	if err := s.teardownCluster(); err != nil {
		s.progress.printf("✗ %v", err)
		code = 1
	}
	// Last, so that the deletion of the cluster is in it too.
	if path, err := s.writeProfile(); err != nil {
		s.progress.printf("✗ writing the profile: %v", err)
		code = 1
	} else {
		s.progress.printf("where the suite's time went: %s", path)
	}
	if code == 0 && s.recorder.Summary().Counts().Failed > 0 {
		code = 1
	}
	return code
}

// Test runs the suite's scenarios in order, those of a LabelAtOnce group at once; call it from
// the suite's only test function.
func (s *Suite) Test(t *testing.T) {
	t.Helper()
	for _, group := range atOnceGroups(s.selected()) {
		atOnce := len(group) > 1
		wrapped := make([]types.Feature, len(group))
		for i, f := range group {
			wrapped[i] = &recordedFeature{inner: f, suite: s, atOnce: atOnce}
		}
		if atOnce {
			s.env.TestInParallel(t, wrapped...)
		} else {
			s.env.Test(t, wrapped...)
		}
		// --fail-fast stops at the first failed feature; each Test call checks only its own.
		if s.cfg.FailFast() && t.Failed() {
			return
		}
	}
}

// atOnceGroups splits feats, in order, into the features that run at once: each run of
// neighbours with the same LabelAtOnce value is one group, every other feature one of its own.
func atOnceGroups(feats []types.Feature) [][]types.Feature {
	var groups [][]types.Feature
	last := ""
	for _, f := range feats {
		label := atOnceLabel(f)
		if label != "" && label == last {
			groups[len(groups)-1] = append(groups[len(groups)-1], f)
			continue
		}
		groups = append(groups, []types.Feature{f})
		last = label
	}
	return groups
}

func atOnceLabel(f types.Feature) string {
	if v := f.Labels()[LabelAtOnce]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (s *Suite) outputDir() string             { return filepath.Join(s.opts.output, s.spec.Name) }
func (s *Suite) artifactsDir(of string) string { return ArtifactsDir(s.outputDir(), of) }

// Artifact directories other than a scenario's (ArtifactsDir's of).
const (
	// SetupArtifacts holds what a suite whose cluster or release never came up collected.
	SetupArtifacts = "setup"
	// ClusterArtifacts holds the cluster's logs, exported on every run.
	ClusterArtifacts = "cluster"
)

// ArtifactsDir is where a suite reporting into dir (--e2e-output/<its name>) puts what it
// collected of one failed scenario (of is its ID), of its failed setup (SetupArtifacts) or of
// its cluster (ClusterArtifacts).
func ArtifactsDir(dir, of string) string {
	return filepath.Join(dir, "artifacts", of)
}

// suiteMode is the certificate mode scenarios are filtered by ("" without a release).
func (s *Suite) suiteMode() string {
	if s.target != nil {
		return s.targetMode
	}
	if s.spec.Release == nil {
		return ""
	}
	m := s.spec.Release.Mode
	if m == "" {
		m = chart.Automatic
	}
	return string(m)
}

// selected are the features for this suite's certificate mode.
func (s *Suite) selected() []types.Feature {
	var out []types.Feature
	for _, f := range s.spec.Features {
		modes := f.Labels()[LabelCertMode]
		if len(modes) == 0 || slices.Contains(modes, s.suiteMode()) {
			out = append(out, f)
		}
	}
	return out
}

func scenarioID(f types.Feature) string {
	if ids := f.Labels()[LabelScenario]; len(ids) > 0 {
		return ids[0]
	}
	return ""
}

// checkIDs rejects features without a scenario label and duplicate IDs before anything runs.
func checkIDs(feats []types.Feature) error {
	seen := map[string]bool{}
	for _, f := range feats {
		id := scenarioID(f)
		if id == "" {
			return fmt.Errorf("feature %q has no %s label: label it with its CATALOG.md ID", f.Name(), LabelScenario)
		}
		if seen[id] {
			return fmt.Errorf("scenario %s appears twice in the suite", id)
		}
		seen[id] = true
	}
	return nil
}

func (s *Suite) setupCluster(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	req, err := s.clusterRequest(ctx)
	if err != nil {
		s.setupErr = err
		return ctx, err
	}
	// The creation's own context: an interrupt cancels it, and the provider deletes the
	// cluster it could not finish. Processes of a finished cluster do not depend on it.
	createCtx, cancel := context.WithCancel(ctx)
	cr := &creation{cancel: cancel, ended: make(chan struct{})}
	s.mu.Lock()
	s.creation = cr
	s.mu.Unlock()
	var (
		c      *Cluster
		reused bool
	)
	// The provider prints the creation's steps itself; the profile counts the whole of it.
	err = s.progress.phase(fmt.Sprintf("Bringing up %s cluster %s", s.opts.provider, s.opts.clusterName), func() (err error) {
		c, reused, err = startCluster(createCtx, s.opts, req, s.progress)
		return err
	})
	s.mu.Lock()
	s.cluster, s.reused, s.creation = c, reused, nil
	s.mu.Unlock()
	close(cr.ended)
	if err != nil {
		cancel()
		s.setupErr = err
		return ctx, err
	}
	s.recorder.SetKubernetesVersion(c.KubernetesVersion())
	cfg.WithKubeconfigFile(c.KubeconfigPath())
	if p, err := cluster.Lookup(s.opts.provider); err == nil && !p.KeepsPodLogs {
		targetNamespace := ""
		if s.target != nil {
			targetNamespace = s.target.Chart.Namespace
		}
		s.stopRecordingPodLogs = recordPodLogs(c.Kube(), filepath.Join(s.artifactsDir(ClusterArtifacts), PodLogsDir),
			logsWorthRecording(targetNamespace), s.progress.printf)
	}
	if reused {
		if err := s.progress.step("Cleaning the kept cluster (releases, Dynamo CRDs, suite namespaces)", func() error { return s.clean(ctx) }); err != nil {
			s.setupErr = err
			return ctx, err
		}
	}
	ctx = context.WithValue(ctx, suiteKey{}, s)
	return context.WithValue(ctx, clusterKey{}, c), nil
}

func (s *Suite) setupRelease(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	if s.spec.Release == nil {
		return ctx, nil
	}
	r := *s.spec.Release
	if s.spec.BeforeInstall != nil {
		if err := s.progress.step("Preparing the release", func() error { return s.spec.BeforeInstall(ctx, s.cluster, &r) }); err != nil {
			s.setupErr = err
			return ctx, err
		}
	}
	c := s.cluster
	err := s.progress.step(fmt.Sprintf("Installing charts/dynamo-operator (%s mode)", s.suiteMode()), func() error {
		if err := c.Installer().Install(ctx, &r); err != nil {
			return err
		}
		return release.WaitDeploymentAvailable(ctx, c.Kube(), r.Namespace, r.DeploymentName(), releaseReadyTimeout)
	})
	if err != nil {
		s.setupErr = err
		return ctx, err
	}
	// An operator that is Available but whose webhooks do not answer (say, a caBundle never
	// injected) is exactly what the scenarios are there to explain, each in its own words; so
	// this wait only warns; it is a phase that prints its own outcome, not a step that fails.
	if err := s.progress.phase("Waiting for the webhooks to answer through the API server", func() error {
		return release.WaitAdmission(ctx, c.Dynamic(), &r, admissionWarnAfter)
	}); err != nil {
		s.progress.printf("⚠ the operator is Available but its webhooks do not answer; the scenarios will show why: %v", err)
	} else {
		s.progress.printf("✓ the webhooks of %s answer through the API server", &r)
	}
	s.release = &r
	return context.WithValue(ctx, releaseKey{}, &r), nil
}

// clean removes what an earlier run left on a kept cluster: the Dynamo CRDs and objects, every
// release of the chart with its namespace, and the namespaces scenarios created.
func (s *Suite) clean(ctx context.Context) error {
	return s.cluster.Installer().RemoveAll(ctx, LabelSuite)
}

// RunLogEnv names the file, if any, that the suite's own output is being written to by whoever
// runs it (`make e2e` writes <suite output>/go-test.log): clearing an earlier run's report
// keeps that file, which is this run's.
const RunLogEnv = "GAUNTLET_SUITE_LOG"

// clearOutputDir removes everything in dir but the file runLog, when runLog is in dir.
func clearOutputDir(dir, runLog string) error {
	if runLog == "" || !sameDir(filepath.Dir(runLog), dir) {
		return os.RemoveAll(dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == filepath.Base(runLog) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// sameDir reports whether a and b are one existing directory, however each is spelled (make's
// $(CURDIR) and Go's working directory may differ by a symbolic link).
func sameDir(a, b string) bool {
	sa, errA := os.Stat(a) //nolint:gosec // G703: the suite's own output directory and the log make named for it
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// SetupFailedPrefix starts the message of every scenario of a suite whose setup failed.
const SetupFailedPrefix = "suite setup failed, scenario not run: "

// reportSetupFailure records every scenario that would have run as failed, so a suite whose
// cluster or release never came up cannot look green in the combined table.
func (s *Suite) reportSetupFailure() {
	for _, f := range s.selected() {
		if !s.labelsSelect(f) {
			continue
		}
		id := scenarioID(f)
		_ = s.recorder.Start(id, f.Name())
		_ = s.recorder.Finish(id, report.Failed, map[string]any{report.MessageKey: SetupFailedPrefix + s.setupErr.Error()})
	}
	if s.cluster != nil {
		dir := s.artifactsDir(SetupArtifacts)
		ctx, cancel := context.WithTimeout(context.Background(), artifactsTimeout)
		defer cancel()
		if err := collectArtifacts(ctx, s.cluster, dir); err != nil {
			s.progress.printf("collecting setup artifacts: %v", err)
		}
		s.progress.printf("setup artifacts: %s", dir)
	}
}

// labelsSelect applies e2e-framework's --feature, --labels and --skip-labels the way it does.
func (s *Suite) labelsSelect(f types.Feature) bool {
	if re := s.cfg.FeatureRegex(); re != nil && !re.MatchString(f.Name()) {
		return false
	}
	if re := s.cfg.SkipFeatureRegex(); re != nil && re.MatchString(f.Name()) {
		return false
	}
	labels := f.Labels()
	matches := 0
	for key, vals := range s.cfg.Labels() {
		for _, v := range vals {
			if labels.Contains(key, v) {
				matches++
			}
		}
	}
	if matches != len(s.cfg.Labels()) {
		return false
	}
	for key, vals := range s.cfg.SkipLabels() {
		for _, v := range vals {
			if labels.Contains(key, v) {
				return false
			}
		}
	}
	return true
}

func (s *Suite) exportClusterLogs() {
	if s.cluster == nil {
		return
	}
	dir := s.artifactsDir(ClusterArtifacts)
	ctx, cancel := context.WithTimeout(context.Background(), artifactsTimeout)
	defer cancel()
	if err := s.cluster.ExportLogs(ctx, dir); err != nil {
		s.progress.printf("exporting the cluster's logs: %v", err)
	}
	s.progress.printf("cluster logs: %s", dir)
}

// KeyScanID is the suite-wide check every suite ends with: no PEM private-key block in
// anything the suite collected (its reports, every failure's artifacts, the cluster's logs).
const KeyScanID = "S1"

func (s *Suite) checkNoPrivateKeys() {
	const title = "no private key material in collected logs and artifacts"
	if err := s.recorder.Start(KeyScanID, title); err != nil {
		s.progress.printf("✗ %v", err)
		return
	}
	// What the logs could hold depends on how verbose the operator was: the report says.
	details := map[string]any{}
	if s.release != nil {
		level, err := s.release.LogLevel()
		if err != nil {
			level = err.Error()
		}
		details["operatorLogLevel"] = level
	}
	found, err := scanForPrivateKeys(s.outputDir())
	if msg := keyScanVerdict(s.outputDir(), found, err); msg != "" {
		s.progress.printf("✗ %s %s: %s", KeyScanID, title, msg)
		details[report.MessageKey] = msg
		_ = s.recorder.Finish(KeyScanID, report.Failed, details)
		return
	}
	_ = s.recorder.Finish(KeyScanID, report.Passed, details)
}

func (s *Suite) printSummary() {
	sum := s.recorder.Summary()
	var b strings.Builder
	if err := report.RenderText(&b, []report.Summary{sum}); err == nil {
		s.progress.printf("%s", b.String())
	}
	c := sum.Counts()
	s.progress.printf("suite %s: %d passed, %d failed, %d skipped in %.1fs → %s/{%s,%s}",
		s.spec.Name, c.Passed, c.Failed, c.Skipped, sum.Seconds, s.outputDir(), report.SummaryFile, report.JUnitFile)
}

// deleteClusterOnInterrupt makes Ctrl-C (or SIGTERM) end the run the way its end would: the
// suite's cluster is deleted (unless kept) before the process exits, so an interrupted `make
// e2e` leaves nothing running. Interrupted while the cluster is being created, it cancels the
// creation and waits (up to creationStopTimeout) for the provider to delete what it had made;
// should that not end, it says how to delete the cluster. The returned func stops watching.
func (s *Suite) deleteClusterOnInterrupt() (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			s.progress.printf("✗ interrupted (%s)", sig)
			if err := s.stopStress(); err != nil {
				s.progress.printf("✗ %v", err)
			}
			s.mu.Lock()
			c, cr := s.cluster, s.creation
			s.mu.Unlock()
			if cr != nil {
				s.progress.printf("stopping the creation of cluster %s; its provider deletes what it had made …", s.opts.clusterName)
				cr.cancel()
				select {
				case <-cr.ended:
				case <-time.After(creationStopTimeout):
					s.progress.printf("the cluster %s may be half made: delete it with `make cluster-down PROVIDER=%s CLUSTER=%s`", s.opts.clusterName, s.opts.provider, s.opts.clusterName)
					os.Exit(130)
				}
				s.mu.Lock()
				c = s.cluster // made after all, when the interrupt came as it ended
				s.mu.Unlock()
			}
			if c == nil {
				s.progress.printf("cluster %s: its creation stopped; the provider deleted what it had made", s.opts.clusterName)
			} else if err := s.teardownCluster(); err != nil {
				s.progress.printf("✗ %v", err)
			}
			os.Exit(130)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

// startStress starts the --stress workers and says so once, with their process IDs.
func (s *Suite) startStress() error {
	if s.opts.stress == 0 {
		return nil
	}
	st, err := startStress(s.opts.stress)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.stress = st
	s.mu.Unlock()
	pids := make([]string, 0, s.opts.stress)
	for _, p := range st.pids() {
		pids = append(pids, strconv.Itoa(p))
	}
	s.progress.printf("%s beside the suite (%s, pids %s), from before the cluster's creation to the suite's last check",
		report.StressLine(s.opts.stress), StressWorkerName, strings.Join(pids, " "))
	return nil
}

// stopStress ends the --stress workers, if any still run, and says so.
func (s *Suite) stopStress() error {
	s.mu.Lock()
	st := s.stress
	s.stress = nil
	s.mu.Unlock()
	if st == nil {
		return nil
	}
	n := len(st.pids())
	if err := st.stop(); err != nil {
		return err
	}
	s.progress.printf("stress workers stopped (%d)", n)
	return nil
}

// creationStopTimeout bounds the wait for a cancelled cluster creation to end.
const creationStopTimeout = 2 * time.Minute

func (s *Suite) teardownCluster() error {
	if s.cluster == nil {
		return nil
	}
	if s.opts.keepCluster {
		s.progress.printf("keeping cluster %s (KEEP_CLUSTER=1): kubectl --kubeconfig %s get pods -A", s.cluster.Name(), s.cluster.KubeconfigPath())
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return s.progress.step("Deleting cluster "+s.cluster.Name(), func() error { return s.cluster.backend.Destroy(ctx) })
}

type (
	suiteKey   struct{}
	clusterKey struct{}
	releaseKey struct{}
	targetKey  struct{}
)

// ClusterFrom returns the cluster under test; it stops the test if the context has none (the
// step was not run by a suite).
func ClusterFrom(ctx context.Context, t testing.TB) *Cluster {
	t.Helper()
	c, ok := ctx.Value(clusterKey{}).(*Cluster)
	if !ok {
		t.Fatal("no cluster in the context: run scenarios through a suite (suite.New(...).Test)")
	}
	return c
}

// ReleaseFrom returns the release the suite installed; it stops the test if there is none.
func ReleaseFrom(ctx context.Context, t testing.TB) *chart.Release {
	t.Helper()
	r, ok := ctx.Value(releaseKey{}).(*chart.Release)
	if !ok {
		t.Fatal("no release in the context: this scenario needs a suite that installs the operator (Spec.Release)")
	}
	return r
}

// ReleaseStep is a scenario step (Setup, Assess or Teardown) for a suite that installs the
// operator: it hands step the cluster under test and the release (ClusterFrom, ReleaseFrom).
func ReleaseStep(step func(ctx context.Context, t *testing.T, c *Cluster, r *chart.Release) context.Context) features.Func {
	return func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
		return step(ctx, t, ClusterFrom(ctx, t), ReleaseFrom(ctx, t))
	}
}

// TargetFrom returns the target the suite installed; it stops the test if there is none.
func TargetFrom(ctx context.Context, t testing.TB) *target.Installed {
	t.Helper()
	it, ok := ctx.Value(targetKey{}).(*target.Installed)
	if !ok {
		t.Fatal("no target in the context: this scenario needs a suite that installs a target (Spec.Target)")
	}
	return it
}

// Note adds a measurement or count to the running scenario's details in summary.json.
func Note(ctx context.Context, t testing.TB, key string, value any) {
	t.Helper()
	s, ok := ctx.Value(suiteKey{}).(*Suite)
	if !ok {
		t.Fatal("no suite in the context")
	}
	id := s.scenarioOf(t.Name())
	if id == "" {
		t.Fatalf("noting %s: test %s belongs to no running scenario", key, t.Name())
	}
	if err := s.recorder.Note(id, key, value); err != nil {
		t.Fatal(err)
	}
}

var running sync.Map // feature test name → scenario ID

func (s *Suite) scenarioOf(testName string) string {
	var id string
	running.Range(func(k, v any) bool {
		name := k.(string)
		if testName == name || strings.HasPrefix(testName, name+"/") {
			id = v.(string)
			return false
		}
		return true
	})
	return id
}

// Namespace creates a namespace for one scenario (prefix plus a random suffix), labelled so a
// kept cluster's next run removes it, and deletes it when t ends.
func Namespace(ctx context.Context, t testing.TB, prefix string) string {
	t.Helper()
	c := ClusterFrom(ctx, t)
	s, _ := ctx.Value(suiteKey{}).(*Suite)
	suiteName := "unknown"
	if s != nil {
		suiteName = s.spec.Name
	}
	name := prefix + "-" + rand.String(5)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelSuite: suiteName}}}
	if _, err := c.Kube().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		expect.Fatalf(t, "creating Namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		err := c.Kube().CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
		if err != nil {
			t.Logf("deleting Namespace %s: %v", name, err)
		}
	})
	return name
}

// NamespaceSetup is the Setup step of a scenario that needs only its namespace: it creates one
// (Namespace) and stores its name in *ns for the steps after it.
func NamespaceSetup(ns *string, prefix string) features.Func {
	return func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
		*ns = Namespace(ctx, t, prefix)
		return ctx
	}
}

var idPrefix = regexp.MustCompile(`^[A-Z][0-9]+\b`)
