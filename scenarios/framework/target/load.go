package target

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// FileName is the description's file name in a target's directory.
const FileName = "target.yaml"

// Problem is one thing wrong with a description, at a line of its file.
type Problem struct {
	File  string
	Line  int
	Field string // dotted path, e.g. chart.values or probes[1].denied.message
	Msg   string
}

func (p Problem) Error() string {
	return fmt.Sprintf("%s:%d: field %s: %s", p.File, p.Line, p.Field, p.Msg)
}

// Load reads and validates the description at path (a target.yaml, or the directory holding
// one). Every problem is reported, each as file:line: field …: …, joined in one error.
func Load(path string) (*Target, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, FileName)
	}
	data, err := os.ReadFile(path) //nolint:gosec // G304: the description the user names
	if err != nil {
		return nil, fmt.Errorf("read target description: %w", err)
	}
	return Parse(path, data)
}

// Parse validates data, the description read from file (paths in it are relative to file's
// directory), and decodes it.
func Parse(file string, data []byte) (*Target, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if doc.Kind == 0 {
		return nil, Problem{File: file, Line: 1, Field: "name", Msg: "the file is empty: a description starts with `name:`"}
	}
	v := &validator{file: file, lines: map[string]int{}}
	v.walk(doc.Content[0], reflect.TypeFor[Target](), "", 1)
	if len(v.problems) > 0 {
		return nil, v.err()
	}
	var t Target
	if err := doc.Decode(&t); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	t.dir, t.file, t.lines = filepath.Dir(file), file, v.lines
	v.rules(&t, t.dir)
	if len(v.problems) > 0 {
		return nil, v.err()
	}
	return &t, nil
}

type validator struct {
	file     string
	lines    map[string]int // field path → line, for the rules that look at several fields
	problems []Problem
}

func (v *validator) add(line int, field, format string, args ...any) {
	v.problems = append(v.problems, Problem{File: v.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// at adds a problem at the line of field (or of its closest recorded parent).
func (v *validator) at(field, format string, args ...any) {
	v.add(lineOf(v.lines, field), field, format, args...)
}

// lineOf is the line of field, or of its closest recorded parent.
func lineOf(lines map[string]int, field string) int {
	for p := field; ; {
		if line, ok := lines[p]; ok {
			return line
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return 1
		}
		p = p[:i]
	}
}

// problem is a problem with field found after Load (by a build), at the field's line.
func (t *Target) problem(field, format string, args ...any) Problem {
	return Problem{File: t.file, Line: lineOf(t.lines, field), Field: field, Msg: fmt.Sprintf(format, args...)}
}

func (v *validator) err() error {
	slices.SortStableFunc(v.problems, func(a, b Problem) int { return a.Line - b.Line })
	errs := make([]error, len(v.problems))
	for i, p := range v.problems {
		errs[i] = p
	}
	return errors.Join(errs...)
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// walk checks node against the Go type t: known fields, required fields, the kinds of values,
// enums and patterns. line is where the field is named (its key's line), where problems with
// the field as a whole are reported.
func (v *validator) walk(n *yaml.Node, t reflect.Type, path string, line int) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	v.lines[path] = line
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			v.add(line, path, "want a mapping of %s, got %s", strings.Join(fieldNames(t), ", "), describe(n))
			return
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			f, ok := fieldByName(t, key.Value)
			if !ok {
				v.add(key.Line, join(path, key.Value), "unknown field; a %s has %s", strings.ToLower(t.Name()), strings.Join(fieldNames(t), ", "))
				continue
			}
			seen[key.Value] = true
			v.walk(val, f.Type, join(path, key.Value), key.Line)
			v.scalarRules(val, f, join(path, key.Value))
		}
		for _, f := range described(t) {
			name, optional := tagOf(f)
			if !optional && !seen[name] {
				v.add(line, join(path, name), "required: %s", f.Tag.Get("doc"))
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			v.add(line, path, "want a list, got %s", describe(n))
			return
		}
		for i, item := range n.Content {
			v.walk(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), item.Line)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			v.add(line, path, "want a mapping, got %s", describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			v.walk(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), n.Content[i].Line)
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			v.add(line, path, "want a string, got %s", describe(n))
		}
	case reflect.Interface: // any: chart values, checked by the chart's own schema
	}
}

// scalarRules checks a string field's (or a list of strings') enum and pattern.
func (v *validator) scalarRules(n *yaml.Node, f reflect.StructField, path string) {
	enum, pattern := f.Tag.Get("enum"), f.Tag.Get("pattern")
	if enum == "" && pattern == "" {
		return
	}
	values := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		values = n.Content
	}
	for _, s := range values {
		if s.Kind != yaml.ScalarNode || s.Tag != "!!str" {
			continue // walk said so
		}
		if enum != "" && !slices.Contains(strings.Split(enum, ","), s.Value) {
			v.add(s.Line, path, "%q is not one of %s", s.Value, strings.ReplaceAll(enum, ",", ", "))
		}
		if pattern != "" && !regexp.MustCompile(pattern).MatchString(s.Value) {
			v.add(s.Line, path, "%q does not match %s", s.Value, pattern)
		}
	}
}

// rules checks what one field's type cannot say: which fields go together, and the files the
// description names.
func (v *validator) rules(t *Target, dir string) {
	s := t.Source
	switch sources := countSet(s.Module != nil, s.Dir != "", len(s.Images) > 0); {
	case sources != 1:
		v.at("source", "give exactly one of module (a Go module version), dir (a source directory) and images (prebuilt images); it has %d", sources)
	case s.Images != nil && len(s.Binaries) > 0:
		v.at("source.binaries", "prebuilt images are not built: leave binaries out with images")
	case s.Images == nil && len(s.Binaries) == 0:
		v.at("source.binaries", "required with module or dir: the image each main package is built into")
	}
	if s.Images != nil && len(s.StandIns) > 0 {
		v.at("source.standIns", "prebuilt images are not built: leave standIns out with images")
	}
	if s.Dir != "" {
		v.dirExists("source.dir", dir, s.Dir)
	}
	v.imageRules(s, dir)
	if s.Dir != "" || s.Images != nil {
		v.dirExists("chart.path", dir, t.Chart.Path)
	}

	modes := t.CertModes.Declared()
	if len(modes) == 0 {
		v.at("certModes", "declare at least one of selfManaged, certManager and external")
	}
	for _, m := range []string{SelfManaged, CertManager, External} {
		reason, hasReason := t.CertModes.NotApplicable[m]
		switch {
		case slices.Contains(modes, m) && hasReason:
			v.at("certModes.notApplicable."+m, "%s is declared above: a mode is either supported or not applicable", m)
		case !slices.Contains(modes, m) && strings.TrimSpace(reason) == "":
			v.at("certModes", "%s is neither declared nor in notApplicable: say why the target does not support it, the report shows the reason", m)
		}
	}
	for k := range t.CertModes.NotApplicable {
		if !slices.Contains([]string{SelfManaged, CertManager, External}, k) {
			v.at("certModes.notApplicable."+k, "unknown mode; the modes are selfManaged, certManager and external")
		}
	}
	for _, m := range modes {
		mode := t.CertModes.Mode(m)
		if r := mode.Rotation; r != nil && (r.Values == nil) == (r.Procedure == "") {
			v.at("certModes."+m+".rotation", "give exactly one of values and procedure")
		}
		if r := mode.Repair; r != nil {
			v.repairRules("certModes."+m+".repair", r)
		}
		if r := mode.Rotation; r != nil && r.WithinDuration() <= 0 {
			v.at("certModes."+m+".rotation.within", "%q: a rotation takes some time; give how long the target documents", r.Within)
		}
		for i, f := range mode.Setup {
			v.fileExists(fmt.Sprintf("certModes.%s.setup[%d]", m, i), dir, f)
		}
	}

	for i, f := range t.Setup {
		v.fileExists(fmt.Sprintf("setup[%d]", i), dir, f)
	}
	if len(t.Probes) == 0 {
		v.at("probes", "give a probe for every webhook the chart renders")
	}
	for i, p := range t.Probes {
		path := fmt.Sprintf("probes[%d]", i)
		v.fileExists(path+".admitted", dir, p.Admitted)
		if p.Denied != nil {
			v.fileExists(path+".denied.object", dir, p.Denied.Object)
		}
		if p.Patch != "" {
			var ops []map[string]any
			if err := json.Unmarshal([]byte(p.Patch), &ops); err != nil {
				v.at(path+".patch", "not a JSON patch (a list of operations): %v", err)
			}
		}
		if p.Denied == nil && p.Patch == "" {
			v.at(path, "a probe checks a denial (denied) or a patch (patch); it has neither")
		}
	}
	for i, d := range t.Divergences {
		for j, m := range d.Modes {
			if !slices.Contains(modes, m) {
				v.at(fmt.Sprintf("divergences[%d].modes[%d]", i, j), "%s is not a mode the target declares (%s)", m, strings.Join(modes, ", "))
			}
		}
	}
}

// imageRules checks the images the source builds: one entry per image; what each holds at
// clean absolute paths, one thing at a path; the files it carries exist (a module's, once it is
// fetched for the build); a stand-in says what it replaces and why.
func (v *validator) imageRules(s Source, dir string) {
	entries := map[string]string{}
	entry := func(field, image string) {
		if first, ok := entries[image]; ok {
			v.at(field+".image", "image %s has an entry already (%s): give one entry per image, with every program and file it holds", image, first)
			return
		}
		entries[image] = field
	}
	for i, b := range s.Binaries {
		field := fmt.Sprintf("source.binaries[%d]", i)
		entry(field, b.Image)
		paths := map[string]string{}
		held := func(f, p string) {
			if !path.IsAbs(p) || path.Clean(p) != p {
				v.at(f, "%q is no path in an image: give a clean absolute path, as a container's command names it (e.g. /crd-apply)", p)
				return
			}
			if first, ok := paths[p]; ok {
				v.at(f, "image %s holds %s already (%s): an image holds one thing at a path", b.Image, p, first)
				return
			}
			paths[p] = f
		}
		if b.Path != "" {
			held(field+".path", b.Path)
		}
		for j, p := range b.Programs {
			held(fmt.Sprintf("%s.programs[%d].path", field, j), p.Path)
		}
		for j, f := range b.Files {
			from := fmt.Sprintf("%s.files[%d].from", field, j)
			held(fmt.Sprintf("%s.files[%d].path", field, j), f.Path)
			switch {
			case s.Module != nil && !filepath.IsLocal(f.From):
				v.at(from, "%q is not inside the module: give a path relative to the module's root (e.g. config/crd/bases)", f.From)
			case s.Module == nil:
				if _, err := os.Stat(filepath.Join(dir, f.From)); err != nil {
					v.at(from, "%s does not exist (paths are relative to the description's directory %s)", f.From, dir)
				}
			}
		}
	}
	for i, si := range s.StandIns {
		field := fmt.Sprintf("source.standIns[%d]", i)
		entry(field, si.Image)
		if strings.TrimSpace(si.Replaces) == "" {
			v.at(field+".replaces", "say what the image's containers do that the stand-in does not: the report lists it")
		}
		if strings.TrimSpace(si.Why) == "" {
			v.at(field+".why", "say why the image cannot run here and why the checks do not need it: the report lists it")
		}
	}
}

// repairRules checks a mode's repair: it names a fault, and each time is longer than nothing.
func (v *validator) repairRules(field string, r *Repair) {
	if r.Secret == "" && r.CABundle == "" {
		v.at(field, "names no fault: give secret, caBundle or both, or leave repair out when the target repairs neither in this mode")
	}
	for _, f := range []struct{ name, d string }{{"secret", r.Secret}, {"caBundle", r.CABundle}} {
		if _, ok := within(f.d); f.d != "" && !ok {
			v.at(field+"."+f.name, "%q is no time to repair in: give a Go duration longer than 0 (e.g. 30s)", f.d)
		}
	}
}

func (v *validator) fileExists(field, dir, rel string) {
	if fi, err := os.Stat(filepath.Join(dir, rel)); err != nil || fi.IsDir() {
		v.at(field, "%s is not a file (paths are relative to the description's directory %s)", rel, dir)
	}
}

func (v *validator) dirExists(field, dir, rel string) {
	if fi, err := os.Stat(filepath.Join(dir, rel)); err != nil || !fi.IsDir() {
		v.at(field, "%s is not a directory (paths are relative to the description's directory %s)", rel, dir)
	}
}

// Declared lists the modes the target supports, in the W catalog's order.
func (c CertModes) Declared() []string {
	var modes []string
	for _, m := range []string{SelfManaged, CertManager, External} {
		if c.Mode(m) != nil {
			modes = append(modes, m)
		}
	}
	return modes
}

// Mode is the named mode's values, or nil when the target does not support it.
func (c CertModes) Mode(name string) *CertMode {
	switch name {
	case SelfManaged:
		return c.SelfManaged
	case CertManager:
		return c.CertManager
	case External:
		return c.External
	}
	return nil
}

func countSet(set ...bool) int {
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	return n
}

// tagOf is a field's YAML name and whether it may be left out.
func tagOf(f reflect.StructField) (name string, optional bool) {
	name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name, opts == "omitempty"
}

// described are the fields of t a description gives: the exported ones.
func described(t reflect.Type) []reflect.StructField {
	var fields []reflect.StructField
	for i := range t.NumField() {
		if t.Field(i).IsExported() {
			fields = append(fields, t.Field(i))
		}
	}
	return fields
}

func fieldByName(t reflect.Type, name string) (reflect.StructField, bool) {
	for _, f := range described(t) {
		if n, _ := tagOf(f); n == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func fieldNames(t reflect.Type) []string {
	var names []string
	for _, f := range described(t) {
		n, _ := tagOf(f)
		names = append(names, n)
	}
	return names
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%s %q", strings.TrimPrefix(n.Tag, "!!"), n.Value)
	}
	return "something else"
}
