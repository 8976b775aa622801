package target

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

var update = flag.Bool("update", false, "write Schema() to "+SchemaFile)

func targetsDir(t *testing.T) string {
	t.Helper()
	root, err := workspace.Root()
	require.NoError(t, err)
	return filepath.Join(root, filepath.Dir(SchemaFile))
}

func TestTheWorkspacesTargetsLoad(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(targetsDir(t), "*", FileName))
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	names := map[string]bool{}
	for _, file := range dirs {
		tg, err := Load(filepath.Dir(file))
		if assert.NoError(t, err) {
			assert.Equal(t, filepath.Base(filepath.Dir(file)), tg.Name, "%s: a target's name is its directory's", file)
			names[tg.Name] = true
		}
	}
	assert.True(t, names["gauntlet"] && names["gatekeeper"], "targets gauntlet and gatekeeper: %v", names)
}

func TestTheCommittedSchemaIsTheTypes(t *testing.T) {
	file := filepath.Join(targetsDir(t), filepath.Base(SchemaFile))
	if *update {
		require.NoError(t, os.WriteFile(file, Schema(), 0o644)) //nolint:gosec // G306: a schema in the workspace, read by editors
	}
	committed, err := os.ReadFile(file) //nolint:gosec // G304: the workspace's schema file
	require.NoError(t, err)
	assert.Equal(t, string(Schema()), string(committed),
		"%s is not what the types say: go test ./scenarios/framework/target -run TestTheCommittedSchemaIsTheTypes -update", SchemaFile)
}

// valid is a description every test case below breaks in one place; its files exist in dir.
const valid = `name: demo
source:
  module: {path: example.com/demo, version: v1.2.3}
  binaries:
    - {image: "demo:v1.2.3", package: ./cmd/demo}
chart:
  path: charts/demo
  release: demo
  namespace: demo-system
certModes:
  selfManaged:
    rotation: {procedure: deleteSecret, within: 2m}
    repair: {caBundle: 30s}
  notApplicable:
    certManager: no chart values for it
    external: no chart values for it
probes:
  - webhook: validate.demo.example.com
    admitted: ok.yaml
    denied: {object: bad.yaml, message: denied}
`

func TestAValidDescriptionLoads(t *testing.T) {
	dir := probeDir(t)
	tg, err := Parse(filepath.Join(dir, FileName), []byte(valid))
	require.NoError(t, err)
	assert.Equal(t, "demo", tg.Name)
	assert.Equal(t, []string{SelfManaged}, tg.CertModes.Declared())
	assert.Equal(t, "2m", tg.CertModes.Mode(SelfManaged).Rotation.Within)
}

func TestARepairLeftOutIsOneTheTargetDoesNotMake(t *testing.T) {
	tg, err := Parse(filepath.Join(probeDir(t), FileName), []byte(valid))
	require.NoError(t, err)
	repair := tg.CertModes.Mode(SelfManaged).Repair
	d, ok := repair.CABundleEmptied()
	assert.True(t, ok && d == 30*time.Second, "caBundle: 30s: expected a repair within 30s, saw %s, %t", d, ok)
	d, ok = repair.SecretDeleted()
	assert.False(t, ok, "secret left out: expected no repair, saw one within %s", d)
	var none *Repair
	_, ok = none.SecretDeleted()
	assert.False(t, ok, "repair left out: expected no repair of the Secret")
}

func probeDir(t *testing.T) string {
	dir := t.TempDir()
	for _, f := range []string{"ok.yaml", "bad.yaml"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("kind: ConfigMap\n"), 0o600))
	}
	return dir
}

func TestEveryProblemIsReportedByFileAndLine(t *testing.T) {
	for _, c := range []struct {
		name, old, new string
		want           []string // each a line of the error, after "<file>:"
	}{
		{"unknown field", "  release: demo\n", "  release: demo\n  valuez: {}\n",
			[]string{"9: field chart.valuez: unknown field; a chart has path, release, namespace, values, overrides, dependencies"}},
		{"missing required field", "  namespace: demo-system\n", "",
			[]string{"6: field chart.namespace: required: The release namespace the target's documentation installs into."}},
		{"a number where a string goes", "version: v1.2.3", "version: 3",
			[]string{`3: field source.module.version: want a string, got int "3"`}},
		{"a string where a mapping goes", "  selfManaged:\n    rotation: {procedure: deleteSecret, within: 2m}\n    repair: {caBundle: 30s}\n", "  selfManaged: yes\n",
			[]string{`11: field certModes.selfManaged: want a mapping of values, setup, overrides, rotation, repair, got str "yes"`}},
		{"a value outside the enum", "procedure: deleteSecret", "procedure: restart",
			[]string{`12: field certModes.selfManaged.rotation.procedure: "restart" is not one of deleteSecret, renewCertificate`}},
		{"a repair time off the pattern", "caBundle: 30s", "caBundle: soon",
			[]string{`13: field certModes.selfManaged.repair.caBundle: "soon" does not match ^[0-9]+(ms|s|m|h)([0-9]+(ms|s|m))*$`}},
		{"a repair in no time", "caBundle: 30s", "caBundle: 0s",
			[]string{`13: field certModes.selfManaged.repair.caBundle: "0s" is no time to repair in: give a Go duration longer than 0 (e.g. 30s)`}},
		{"a repair of nothing", "repair: {caBundle: 30s}", "repair: {}",
			[]string{"13: field certModes.selfManaged.repair: names no fault: give secret, caBundle or both, or leave repair out when the target repairs neither in this mode"}},
		{"a value off the pattern", "name: demo", "name: Demo_Operator",
			[]string{`1: field name: "Demo_Operator" does not match ^[a-z][a-z0-9-]*$`}},
		{"two sources", "  binaries:\n", "  dir: .\n  binaries:\n",
			[]string{"2: field source: give exactly one of module (a Go module version), dir (a source directory) and images (prebuilt images); it has 2",
				"8: field chart.path: charts/demo is not a directory (paths are relative to the description's directory <dir>)"}},
		{"a mode neither supported nor excused", "    external: no chart values for it\n", "",
			[]string{"10: field certModes: external is neither declared nor in notApplicable: say why the target does not support it, the report shows the reason"}},
		{"a missing probe file", "admitted: ok.yaml", "admitted: okay.yaml",
			[]string{"19: field probes[0].admitted: okay.yaml is not a file (paths are relative to the description's directory <dir>)"}},
		{"a probe that checks nothing", "    denied: {object: bad.yaml, message: denied}\n", "",
			[]string{"18: field probes[0]: a probe checks a denial (denied) or a patch (patch); it has neither"}},
		{"a patch that is not JSON", "    denied: {object: bad.yaml, message: denied}\n", "    patch: '[{op: add}]'\n",
			[]string{"20: field probes[0].patch: not a JSON patch (a list of operations): invalid character 'o' looking for beginning of object key string"}},
		{"a divergence in an undeclared mode", "probes:", "divergences:\n  - {check: W3, modes: [external], why: x, link: https://example.com}\nprobes:",
			[]string{"18: field divergences[0].modes[0]: external is not a mode the target declares (selfManaged)"}},
		{"a program at a path that is not clean and absolute", "    - {image: \"demo:v1.2.3\", package: ./cmd/demo}\n", "    - image: \"demo:v1.2.3\"\n      package: ./cmd/demo\n      programs:\n        - {path: crd-apply, package: ./cmd/crd-apply}\n",
			[]string{`8: field source.binaries[0].programs[0].path: "crd-apply" is no path in an image: give a clean absolute path, as a container's command names it (e.g. /crd-apply)`}},
		{"a program at a path that is not clean", "    - {image: \"demo:v1.2.3\", package: ./cmd/demo}\n", "    - image: \"demo:v1.2.3\"\n      package: ./cmd/demo\n      programs:\n        - {path: /bin/../crd-apply, package: ./cmd/crd-apply}\n",
			[]string{`8: field source.binaries[0].programs[0].path: "/bin/../crd-apply" is no path in an image: give a clean absolute path, as a container's command names it (e.g. /crd-apply)`}},
		{"two things at one path of an image", "    - {image: \"demo:v1.2.3\", package: ./cmd/demo}\n", "    - image: \"demo:v1.2.3\"\n      package: ./cmd/demo\n      path: /manager\n      files:\n        - {path: /manager, from: crds}\n",
			[]string{"9: field source.binaries[0].files[0].path: image demo:v1.2.3 holds /manager already (source.binaries[0].path): an image holds one thing at a path"}},
		{"a file outside the module", "    - {image: \"demo:v1.2.3\", package: ./cmd/demo}\n", "    - image: \"demo:v1.2.3\"\n      package: ./cmd/demo\n      files:\n        - {path: /opt/crds, from: ../crds}\n",
			[]string{`8: field source.binaries[0].files[0].from: "../crds" is not inside the module: give a path relative to the module's root (e.g. config/crd/bases)`}},
		{"two entries for one image", "    - {image: \"demo:v1.2.3\", package: ./cmd/demo}\n", "    - {image: \"demo:v1.2.3\", package: ./cmd/demo}\n  standIns:\n    - {image: \"demo:v1.2.3\", replaces: the operator, why: none here, runs: exitAtOnce}\n",
			[]string{"7: field source.standIns[0].image: image demo:v1.2.3 has an entry already (source.binaries[0]): give one entry per image, with every program and file it holds"}},
		{"a stand-in without a reason", "    - {image: \"demo:v1.2.3\", package: ./cmd/demo}\n", "    - {image: \"demo:v1.2.3\", package: ./cmd/demo}\n  standIns:\n    - {image: \"proxy:1\", replaces: the metrics proxy sidecar, why: \" \", runs: untilStopped}\n",
			[]string{"7: field source.standIns[0].why: say why the image cannot run here and why the checks do not need it: the report lists it"}},
		{"a stand-in that runs some other way", "    - {image: \"demo:v1.2.3\", package: ./cmd/demo}\n", "    - {image: \"demo:v1.2.3\", package: ./cmd/demo}\n  standIns:\n    - {image: \"proxy:1\", replaces: the metrics proxy sidecar, why: no image here, runs: forever}\n",
			[]string{`7: field source.standIns[0].runs: "forever" is not one of untilStopped, exitAtOnce`}},
		{"problems on several lines, in line order", "name: demo", "name: demo\nlabels: {}\nsource2: {}",
			[]string{"2: field labels: unknown field; a target has name, description, source, chart, certModes, setup, probes, names, divergences",
				"3: field source2: unknown field; a target has name, description, source, chart, certModes, setup, probes, names, divergences"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Contains(t, valid, c.old)
			dir := probeDir(t)
			file := filepath.Join(dir, FileName)
			_, err := Parse(file, []byte(strings.Replace(valid, c.old, c.new, 1)))
			require.Error(t, err)
			var want []string
			for _, w := range c.want {
				want = append(want, file+":"+strings.ReplaceAll(w, "<dir>", dir))
			}
			assert.Equal(t, strings.Join(want, "\n"), err.Error())
		})
	}
}

func TestAnEmptyFileSaysWhereToStart(t *testing.T) {
	_, err := Parse("t.yaml", nil)
	assert.EqualError(t, err, "t.yaml:1: field name: the file is empty: a description starts with `name:`")
}

func TestLoadNamesAMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nothing-here"))
	assert.ErrorContains(t, err, "read target description: open ")
}

// dirSource is a description of a target built from the source directory beside it: a module
// whose main package is the root, and whose image carries the directory crds.
const dirSource = `name: demo
source:
  dir: src
  binaries:
    - image: "demo:v1"
      package: .
      programs:
        - {path: /crd-apply, package: ./cmd/crd-apply}
      files:
        - {path: /opt/crds, from: src/crds}
chart:
  path: chart
  release: demo
  namespace: demo-system
certModes:
  selfManaged: {}
  notApplicable: {certManager: none, external: none}
probes:
  - webhook: validate.demo.example.com
    admitted: ok.yaml
    denied: {object: bad.yaml, message: denied}
`

// dirSourceDir holds dirSource's files: its probes, its chart directory and its module.
func dirSourceDir(t *testing.T) string {
	dir := probeDir(t)
	for _, d := range []string{"chart", "src/crds"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o750))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "src", "go.mod"), []byte("module example.com/demo\n\ngo 1.24\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "src", "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o600))
	return dir
}

func TestAFileAnImageCarriesMustExist(t *testing.T) {
	dir := dirSourceDir(t)
	file := filepath.Join(dir, FileName)
	_, err := Parse(file, []byte(dirSource))
	require.NoError(t, err)
	_, err = Parse(file, []byte(strings.Replace(dirSource, "from: src/crds", "from: src/crd", 1)))
	assert.EqualError(t, err, file+":10: field source.binaries[0].files[0].from: src/crd does not exist (paths are relative to the description's directory "+dir+")")
}

func TestAProgramThatDoesNotBuildIsNamedByItsField(t *testing.T) {
	t.Setenv("GAUNTLET_CACHE", t.TempDir())
	t.Setenv("GOWORK", "off")
	dir := dirSourceDir(t)
	file := filepath.Join(dir, FileName)
	tg, err := Parse(file, []byte(dirSource))
	require.NoError(t, err)
	_, err = tg.Images(context.Background(), io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), file+":8: field source.binaries[0].programs[0].package: ./cmd/crd-apply does not build: go build ./cmd/crd-apply in "+filepath.Join(dir, "src")+": ")
	assert.Contains(t, err.Error(), "give a main package of the module, relative to its root (. for the root)")
}
