package mutate

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/report/coverage"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/suite"
)

// Suites are the e2e suites a mutant may run against, cheapest first: a mutant runs the
// suites that reach it in this order and stops at the first that kills it.
var Suites = []string{"hostile", "certmanager", "externalcert", "troubleshooting", "multioperator", "autocert"}

// GoTargets are the directories whose Go files are mutated: the webhook server and rules,
// certificates, lease coordination, and the operator's main.
var GoTargets = []string{
	"operator/internal/webhook",
	"operator/internal/webhook/defaulting",
	"operator/internal/webhook/validation",
	"operator/internal/certs",
	"operator/internal/namespacescope",
	"operator/cmd/dynamo-operator",
}

// TemplateTargets are the chart template directories whose lines are dropped.
var TemplateTargets = []string{"charts/dynamo-operator/templates"}

// Options of a mutation run.
type Options struct {
	// Root is the workspace; Out the report directory (its workspace/ is the scratch copy).
	Root, Out string
	// Mutants is how many mutants that compile to judge; Seed picks them.
	Mutants int
	Seed    uint64
	// Coverage is a directory of per-suite counter directories (make e2e COVER=1 writes
	// _output/coverage/e2e) from the same sources; when it lacks a suite, that suite's baseline
	// runs first.
	Coverage string
	// Jobs is how many mutants are judged at once (at least 1), each in its own scratch copy
	// (Out/workspace/<job>) with its own clusters.
	Jobs int
	// Only, when set, names the mutants to judge (Mutant.ID, as the report and -list give them),
	// instead of Mutants picked by Seed: to see whether a new scenario kills a survivor.
	Only []string
	// Log receives progress lines.
	Log io.Writer
}

// Outcome of one mutant.
type Outcome struct {
	Mutant Mutant `json:"mutant"`
	// Killed is true when a suite failed against the mutant.
	Killed bool `json:"killed"`
	// By is what failed first ("" when survived): a scenario ID, "setup" or "suite"; Suite is
	// the suite it failed in and Message the failure's first line.
	By      string `json:"by,omitempty"`
	Suite   string `json:"suite,omitempty"`
	Message string `json:"message,omitempty"`
	// Suites are the suites run against it; none when no suite reaches its line.
	Suites []string `json:"suites"`
	// NotRepeated are the failures that did not kill it because they did not repeat
	// (mustRepeat): "P3 (certmanager): expected 0 failed admissions …".
	NotRepeated []string `json:"notRepeated,omitempty"`
	Seconds     float64  `json:"seconds"`
	// order is the mutant's place among the shuffled candidates: the report's order.
	order int
}

// killWidth bounds the one line a kill quotes of the failure (its first line).
const killWidth = 200

// Run generates the mutants, judges Mutants of them that compile, and writes the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	start := time.Now()
	var logMu sync.Mutex // the jobs log at once
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		_, _ = fmt.Fprintf(o.Log, "[%6.0fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	candidates, err := Candidates(o.Root)
	if err != nil {
		return nil, err
	}
	var equivalent []Mutant
	if len(o.Only) > 0 {
		if candidates, err = only(candidates, o.Only); err != nil {
			return nil, err
		}
		o.Mutants = len(candidates)
		logf("judging the %d mutants named", len(candidates))
	} else {
		eqs, err := Equivalents()
		if err != nil {
			return nil, err
		}
		candidates, equivalent = withoutEquivalents(candidates, eqs)
		logf("%d candidate mutants in %s and %s, and %d known equivalent (%s) not judged; judging %d (seed %d)", len(candidates),
			strings.Join(GoTargets, ", "), strings.Join(TemplateTargets, ", "), len(equivalent), EquivalentFile, o.Mutants, o.Seed)
	}
	jobs := make([]job, max(1, o.Jobs))
	for i := range jobs {
		jobs[i] = job{n: i + 1, scratch: filepath.Join(o.Out, "workspace", strconv.Itoa(i+1))}
		if err := copyWorkspace(ctx, o.Root, jobs[i].scratch); err != nil {
			return nil, err
		}
	}
	reach, err := suiteCoverage(ctx, o, jobs, logf)
	if err != nil {
		return nil, err
	}
	if len(o.Only) == 0 {
		rng := rand.New(rand.NewPCG(o.Seed, 0x6d7574616e74)) //nolint:gosec // G404: a reproducible sample, not a secret
		rng.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
	}

	r := &Report{Seed: o.Seed, Candidates: len(candidates), Equivalent: len(equivalent), Jobs: len(jobs)}
	judged := 0
	r.NotViable, err = judgeInOrder(ctx, candidates, o.Mutants, jobs, func(ctx context.Context, j job, m Mutant) (Outcome, bool, error) {
		return judge(ctx, o, j, m, reach, logf)
	}, func(out Outcome) {
		judged++
		verdict := "survived"
		if out.Killed {
			verdict = fmt.Sprintf("killed by %s (%s)", out.By, out.Suite)
		}
		logf("mutant %d/%d %s %s: %s", judged, o.Mutants, out.Mutant.ID(), out.Mutant.Change, verdict)
		r.Outcomes = append(r.Outcomes, out)
	})
	// An interrupted run keeps what it judged: the report is written however the loop ended,
	// in the candidates' order whatever order the jobs finished in.
	slices.SortStableFunc(r.Outcomes, func(a, b Outcome) int { return a.order - b.order })
	r.Seconds = time.Since(start).Seconds()
	return r, errors.Join(err, r.Write(o.Out))
}

// only are the candidates with the given IDs, in the order named; an ID no candidate has is an
// error that says where to find them.
func only(candidates []Mutant, ids []string) ([]Mutant, error) {
	var out []Mutant
	for _, id := range ids {
		n := len(out)
		for _, m := range candidates {
			if m.ID() == id {
				out = append(out, m)
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("no candidate mutant is %q: the report and `go run ./scenarios/tools/cmd/gauntlet-mutate -list` give their IDs (file:line:operator)", id)
		}
	}
	return out, nil
}

// job is one of the run's parallel lanes: its number (clusters and logs carry it) and its
// scratch copy of the workspace.
type job struct {
	n       int
	scratch string
}

// judgeFunc judges one mutant in a job's scratch copy; viable is false when it does not compile.
type judgeFunc func(ctx context.Context, j job, m Mutant) (out Outcome, viable bool, err error)

// judgeInOrder judges the first `want` viable candidates, in order, on len(jobs) jobs at once:
// a job takes the next candidate while the viable ones judged and in progress are fewer than
// want, so the set judged is the same whatever the number of jobs. done gets every viable
// outcome (Outcome.order: its place among the candidates) as it ends, on the caller's
// goroutine. It returns how many candidates did not compile; the first error (or the
// context's) stops it from starting more, and it returns once the jobs in progress ended.
func judgeInOrder(ctx context.Context, candidates []Mutant, want int, jobs []job, judgeOne judgeFunc, done func(Outcome)) (notViable int, err error) {
	type ended struct {
		job    job
		out    Outcome
		viable bool
		err    error
	}
	results := make(chan ended)
	idle := slices.Clone(jobs)
	next, viable, running := 0, 0, 0
	for {
		for err == nil && ctx.Err() == nil && len(idle) > 0 && next < len(candidates) && viable+running < want {
			j, i := idle[0], next
			idle, next = idle[1:], next+1
			running++
			go func() {
				out, ok, jerr := judgeOne(ctx, j, candidates[i])
				out.order = i
				results <- ended{job: j, out: out, viable: ok, err: jerr}
			}()
		}
		if running == 0 {
			return notViable, errors.Join(err, ctx.Err())
		}
		e := <-results
		running--
		idle = append(idle, e.job)
		switch {
		case e.err != nil:
			err = errors.Join(err, e.err)
		case !e.viable:
			notViable++
		default:
			viable++
			done(e.out)
		}
	}
}

// Candidates are every mutant of the targets, in a stable order.
func Candidates(root string) ([]Mutant, error) {
	var all []Mutant
	for _, dir := range GoTargets {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			rel, _ := filepath.Rel(root, f) // f is under root
			ms, err := GoMutants(root, rel)
			if err != nil {
				return nil, err
			}
			all = append(all, ms...)
		}
	}
	for _, dir := range TemplateTargets {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.yaml"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			rel, _ := filepath.Rel(root, f) // f is under root
			ms, err := TemplateMutants(root, rel)
			if err != nil {
				return nil, err
			}
			all = append(all, ms...)
		}
	}
	slices.SortStableFunc(all, func(a, b Mutant) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		return a.Start - b.Start
	})
	return all, nil
}

// judge applies m in the scratch copy, builds the operator, and runs the suites that reach
// m's line until one fails. viable is false when the mutant does not compile.
func judge(ctx context.Context, o Options, j job, m Mutant, reach coverageMap, logf func(string, ...any)) (out Outcome, viable bool, err error) {
	out.Mutant = m
	scratch := j.scratch
	path := filepath.Join(scratch, m.File)
	orig, err := os.ReadFile(path) //nolint:gosec // G304: the scratch copy's file
	if err != nil {
		return out, false, err
	}
	mutated, err := m.Apply(orig)
	if err != nil {
		return out, false, err
	}
	if err := os.WriteFile(path, mutated, 0o600); err != nil { //nolint:gosec // G703: a file of the scratch copy this run made
		return out, false, err
	}
	defer func() {
		if werr := os.WriteFile(path, orig, 0o600); werr != nil && err == nil { //nolint:gosec // G703: a file of the scratch copy this run made
			err = fmt.Errorf("restoring %s in the scratch copy: %w", m.File, werr)
		}
	}()
	start := time.Now()
	if strings.HasSuffix(m.File, ".go") {
		if msg, berr := command(ctx, scratch, nil, "go", "build", "-o", os.DevNull, "./operator/cmd/dynamo-operator"); berr != nil {
			logf("mutant %s does not compile, not counted: %s", m.ID(), report.FirstLine(msg, killWidth))
			return out, false, nil
		}
	}
	suites := Suites
	if strings.HasSuffix(m.File, ".go") {
		suites = reach.suitesReaching(m.File, m.Line)
	}
	if len(suites) == 0 {
		logf("mutant %s %s: no suite reaches line %d", m.ID(), m.Change, m.Line)
	}
	dir := filepath.Join(o.Out, "runs", strings.NewReplacer("/", "_", ":", "_").Replace(m.ID()))
	run := func(r suiteRun) (bool, string, string, error) { return runSuite(ctx, j, r) }
	if err := runUntilKilled(&out, suites, dir, run, func(format string, args ...any) {
		logf("job %d: mutant %s: "+format, append([]any{j.n, m.ID()}, args...)...)
	}); err != nil {
		return out, false, err
	}
	out.Seconds = time.Since(start).Seconds()
	return out, true, nil
}

// suiteRunner runs one suite run against a mutant (runSuite in a job's scratch copy).
type suiteRunner func(r suiteRun) (killed bool, by, msg string, err error)

// runUntilKilled runs suites in order against out's mutant, reports into dir, until one kills
// it; a failure that must repeat (mustRepeat) and does not is noted in out.NotRepeated, and
// the next suite runs.
func runUntilKilled(out *Outcome, suites []string, dir string, run suiteRunner, logf func(string, ...any)) error {
	for _, s := range suites {
		logf("%s: suite %s …", out.Mutant.Change, s)
		out.Suites = append(out.Suites, s)
		killed, by, msg, err := run(suiteRun{suite: s, out: dir})
		if err == nil && killed && mustRepeat(by) {
			logf("%s failed (%s); it measures under load, so it runs again alone …", by, msg)
			if killed, _, _, err = run(suiteRun{suite: s, out: filepath.Join(dir, "again"), scenario: by}); err == nil && !killed {
				logf("%s passed when run again: not a kill", by)
				out.NotRepeated = append(out.NotRepeated, fmt.Sprintf("%s (%s): %s", by, s, msg))
			}
		}
		if err != nil {
			return err
		}
		if killed {
			out.Killed, out.By, out.Suite, out.Message = true, by, s, msg
			return nil
		}
	}
	return nil
}

// mustRepeat says whether a failure of scenario id kills a mutant only when it repeats. The P
// scenarios (CATALOG.md §P) count failed admissions under constant load for a minute or more,
// and on a shared 2-core machine a stall fails them now and then whatever the operator: in the
// fourth run P3 failed against a mutant of a denial's cause type (316 of 3,479 admissions
// failed with `server closed idle connection` at a load average of 8). Such a failure kills
// only when the scenario, run again alone against the same mutant, fails again.
func mustRepeat(id string) bool { return strings.HasPrefix(id, "P") }

// suiteRun is one run of a suite: its reports go to out/<suite>; with cover set, the
// operator's coverage to cover/<suite>; with scenario set, only that scenario runs.
type suiteRun struct {
	suite, out, cover, scenario string
}

// suiteArgs are the `go test` arguments of run r for job j, with a cluster and an operator
// version of the job's own (the operator stamps its version on what it admits, so a job's
// objects name it). Each job's operator binary is its own too: BuildOperator builds into a
// directory per workspace, and each job has its scratch copy.
func suiteArgs(j job, r suiteRun) []string {
	args := []string{"test", "-count=1", "-timeout", "30m", "./e2e/" + r.suite, "-args",
		"--provider=local", "--fail-fast", fmt.Sprintf("--operator-version=mutant-%d", j.n), "--e2e-output=" + r.out,
		fmt.Sprintf("--cluster-name=mutate-%d-%s", j.n, r.suite)}
	if r.cover != "" {
		args = append(args, "--cover-dir="+r.cover)
	}
	if r.scenario != "" {
		args = append(args, "--labels="+suite.LabelScenario+"="+r.scenario)
	}
	return args
}

// runSuite runs r from job j's scratch copy with --fail-fast, with an operator and a cluster
// of the job's own; killed is true when a scenario failed (by: its ID, or "setup" when the
// suite's setup failed, or "suite" when it wrote no report; msg: the failure's first line).
func runSuite(ctx context.Context, j job, r suiteRun) (killed bool, by, msg string, err error) {
	env := []string{"GAUNTLET_ROOT=" + j.scratch, "GAUNTLET_FAILOVER_PLAN=quick"}
	log, runErr := command(ctx, j.scratch, env, "go", suiteArgs(j, r)...)
	if ctx.Err() != nil {
		return false, "", "", ctx.Err()
	}
	sum, rerr := report.ReadSummary(filepath.Join(r.out, r.suite, report.SummaryFile))
	if rerr != nil {
		if runErr != nil {
			// No summary at all: the suite did not get as far as reporting (the mutant broke
			// the build of the harness or crashed it): that is a kill, by the suite itself.
			return true, "suite", report.FirstLine(lastLines(log, 3), killWidth), nil
		}
		return false, "", "", rerr
	}
	for _, sc := range sum.Scenarios {
		if sc.Result != report.Failed {
			continue
		}
		if msg, ok := strings.CutPrefix(sc.Message(), suite.SetupFailedPrefix); ok {
			// The suite's setup failed (install, first admission): every scenario is marked
			// failed with this message; the setup is what killed the mutant.
			return true, "setup", report.FirstLine(msg, killWidth), nil
		}
		return true, sc.ID, report.FirstLine(sc.Message(), killWidth), nil
	}
	if runErr != nil {
		return true, "suite", report.FirstLine(lastLines(log, 3), killWidth), nil
	}
	return false, "", "", nil
}

// suiteCoverage maps lines to the suites that execute them, from o.Coverage where it has a
// suite's counters and from a coverage baseline run of the unmutated scratch copies otherwise,
// the jobs running those suites at once. A baseline suite that fails stops the run: a red
// suite kills every mutant.
func suiteCoverage(ctx context.Context, o Options, jobs []job, logf func(string, ...any)) (coverageMap, error) {
	baseline := filepath.Join(o.Out, "baseline")
	if err := os.MkdirAll(baseline, 0o750); err != nil {
		return nil, err
	}
	dirs := make(map[string]string, len(Suites))
	var missing []string
	for _, s := range Suites {
		dir := filepath.Join(o.Coverage, s)
		if _, err := coverage.CounterDirs(dir); err != nil || o.Coverage == "" {
			logf("baseline: suite %s runs with coverage first (no counters of it in %q)", s, o.Coverage)
			missing = append(missing, s)
			dir = filepath.Join(baseline, "coverage", s)
		} else {
			logf("baseline: suite %s's coverage from %s", s, dir)
		}
		dirs[s] = dir
	}
	if err := runBaselines(ctx, missing, jobs, baseline, logf); err != nil {
		return nil, err
	}
	m := coverageMap{}
	for _, s := range Suites {
		profile := filepath.Join(baseline, s+".out")
		if msg, err := command(ctx, o.Root, nil, "go", "tool", "covdata", "textfmt", "-i="+dirs[s], "-o="+profile); err != nil {
			return nil, fmt.Errorf("go tool covdata textfmt -i=%s: %w: %s", dirs[s], err, msg)
		}
		if err := m.add(s, profile); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// runBaselines runs each of suites with coverage on the unmutated scratch copies, as many at
// once as there are jobs, and fails when one of them fails.
func runBaselines(ctx context.Context, suites []string, jobs []job, baseline string, logf func(string, ...any)) error {
	errs := make([]error, len(suites))
	lanes := make(chan job, len(jobs))
	for _, j := range jobs {
		lanes <- j
	}
	var wg sync.WaitGroup
	for i, s := range suites {
		j := <-lanes
		wg.Add(1)
		go func() {
			defer func() { lanes <- j; wg.Done() }()
			logf("job %d: baseline suite %s with coverage …", j.n, s)
			start := time.Now()
			killed, by, msg, err := runSuite(ctx, j, suiteRun{suite: s, out: baseline, cover: filepath.Join(baseline, "coverage")})
			if err == nil && killed {
				err = fmt.Errorf("suite %s fails without any mutant (%s: %s): fix it before mutation testing", s, by, msg)
			}
			if err == nil {
				logf("job %d: baseline suite %s ✓ in %s", j.n, s, time.Since(start).Round(time.Second))
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// coverageMap is, per workspace file, the blocks of each suite's profile, executed or not.
type coverageMap map[string][]block

type block struct {
	suite              string
	startLine, endLine int
	executed           bool
}

const modulePath = "github.com/gauntlet-dev/gauntlet/"

// add reads a text coverage profile ("<pkg>/<file>:<l>.<c>,<l>.<c> <stmts> <count>").
func (m coverageMap) add(suite, profile string) error {
	f, err := os.Open(profile) //nolint:gosec // G304: the profile this run wrote
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // read only
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "mode:") {
			continue
		}
		file, rest, ok := strings.Cut(line, ":")
		fields := strings.Fields(rest)
		if !ok || len(fields) != 3 {
			return fmt.Errorf("%s: unexpected line %q", profile, line)
		}
		span := strings.Split(fields[0], ",")
		startLine, err1 := strconv.Atoi(strings.Split(span[0], ".")[0])
		endLine, err2 := strconv.Atoi(strings.Split(span[len(span)-1], ".")[0])
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("%s: %q: %w", profile, line, err)
		}
		rel := strings.TrimPrefix(file, modulePath)
		m[rel] = append(m[rel], block{suite: suite, startLine: startLine, endLine: endLine, executed: fields[2] != "0"})
	}
	return sc.Err()
}

// suitesReaching are the suites that executed file:line, in Suites order: those that executed a
// block holding the line or, for a line no block holds — the rest of a statement after a
// function literal in it, which the cover tool counts in no block (`srv := &http.Server{
// BaseContext: func…, ReadHeaderTimeout: 32 * time.Second}`) — a block ending last before it:
// the statement's start or the literal's body.
func (m coverageMap) suitesReaching(file string, line int) []string {
	holds := func(b block) bool { return b.startLine <= line && line <= b.endLine }
	if !slices.ContainsFunc(m[file], holds) {
		end := 0
		for _, b := range m[file] {
			if b.endLine <= line && b.endLine > end {
				end = b.endLine
			}
		}
		holds = func(b block) bool { return b.endLine == end }
	}
	var out []string
	for _, s := range Suites {
		if slices.ContainsFunc(m[file], func(b block) bool { return b.suite == s && b.executed && holds(b) }) {
			out = append(out, s)
		}
	}
	return out
}

// copyWorkspace copies the workspace's files that git knows of or would (tracked and
// untracked, not ignored) into dst, afresh.
func copyWorkspace(ctx context.Context, root, dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	list, err := command(ctx, root, nil, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return fmt.Errorf("listing the workspace's files: %w: %s", err, list)
	}
	for _, rel := range strings.Split(strings.TrimRight(list, "\x00"), "\x00") {
		src := filepath.Join(root, rel)
		info, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		raw, err := os.ReadFile(src) //nolint:gosec // G304: the workspace's own files
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
			return err
		}
		if err := os.WriteFile(target, raw, info.Mode().Perm()); err != nil { //nolint:gosec // G306: keeps the file's own mode (scripts stay executable)
			return err
		}
	}
	return nil
}

// command runs name in dir and returns its output; cancelled, it interrupts the command's
// process group (suite.InterruptibleCommand).
func command(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := suite.InterruptibleCommand(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}
