package admission

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// Where the rules live, relative to the workspace root. The scenarios module cannot import the
// operator's internal packages (nor should it: it tests the operator as users meet it), so the
// test reads the validation package's source and the CRDs the chart installs.
const (
	validationDir = "operator/internal/webhook/validation"
	crdDir        = "charts/dynamo-operator/files/crds"
)

// rule is one admission rule as its source declares it: the kind, the field path it reports
// (a pattern: [*] is any key or index, .* any property), and what a refused probe's cause
// must say about it.
type rule struct {
	kind, version string // version "" : every version the scenarios write
	judge         judge  // who refuses it
	path          string
	problem       string   // "Required value", "Unsupported value", …
	fragments     []string // text the cause must contain (the detail's constant parts)
	immutable     bool     // webhook: a changed immutable field
	enum          []string // OpenAPI enum: every value must be admitted
	minimum       *float64 // OpenAPI minimum: refused min-1, admitted min
	where         string   // file:line or CRD path, for messages
}

func (r rule) String() string {
	return fmt.Sprintf("%s %s: %s %q (%s)", r.kind, r.path, r.problem, r.fragments, r.where)
}

// matches says whether cause ("<field>: <problem>…") reports r.
func (r rule) matches(cause string) bool {
	p := regexp.QuoteMeta(r.path)
	p = strings.ReplaceAll(p, `\[\*\]`, `\[[^\]]+\]`)
	p = strings.ReplaceAll(p, `\.\*`, `\.[^.\[]+`)
	if !regexp.MustCompile(`^` + p + `: ` + regexp.QuoteMeta(r.problem) + `\b`).MatchString(cause) {
		return false
	}
	for _, f := range r.fragments {
		if !strings.Contains(cause, f) {
			return false
		}
	}
	return true
}

// coveredBy says whether row b probes r on its refused side. A webhook rule on an immutable
// field the CRD's CEL rule also guards is answered by the CEL rule (schema validation runs
// first), whose message names the field: "<field> is immutable".
func (r rule) coveredBy(b boundary) bool {
	answeredByCEL := r.immutable && b.judge == byCEL
	if b.kind.name != r.kind || (r.version != "" && b.kind.gvr.Version != r.version) || (b.judge != r.judge && !answeredByCEL) {
		return false
	}
	for _, p := range b.refused {
		for _, c := range p.causes {
			if r.matches(c) {
				return true
			}
			field := r.path[strings.LastIndex(r.path, ".")+1:]
			if b.judge != r.judge && strings.Contains(c, "Invalid value: "+field+" is immutable") {
				return true
			}
		}
	}
	return false
}

// TestBoundariesHaveBothSides: every row refuses something and admits its neighbour.
func TestBoundariesHaveBothSides(t *testing.T) {
	for _, b := range boundaries() {
		if len(b.refused) == 0 || len(b.admitted) == 0 {
			t.Errorf("rule %q (%s %s): expected at least one refused and one admitted probe, saw %d refused and %d admitted",
				b.rule, b.scenario, b.kind.name, len(b.refused), len(b.admitted))
		}
		for _, p := range b.refused {
			if len(p.causes) == 0 {
				t.Errorf("rule %q: a refused probe (spec %v) names no causes", b.rule, p.spec)
			}
		}
		for _, p := range b.admitted {
			if p.causes != nil {
				t.Errorf("rule %q: an admitted probe (spec %v) names causes %q", b.rule, p.spec, p.causes)
			}
		}
	}
}

// TestBoundariesCoverTheWebhookRules: every field error the validation package can return is
// the refused side of a row judged by the webhook (or, for an immutable field the CRD also
// guards, by CEL), and every webhook row's causes are field errors the package returns.
func TestBoundariesCoverTheWebhookRules(t *testing.T) {
	rules := webhookRules(t)
	if len(rules) < 20 {
		t.Fatalf("found %d rules in %s, expected the 20-odd of CATALOG.md A1–A6: %v", len(rules), validationDir, rules)
	}
	expectCovered(t, rules)
}

// TestBoundariesCoverTheSchemaRules: the same for the rules the CRDs carry — OpenAPI enum,
// minimum, required and pattern under spec, and the CEL rules — with both sides of an enum
// (every value admitted) and of a minimum (min-1 refused, min admitted) checked from the rows.
func TestBoundariesCoverTheSchemaRules(t *testing.T) {
	rules := schemaRules(t)
	for _, m := range maskedByDefaulter {
		if !slices.ContainsFunc(rules, func(r rule) bool { return r.kind == graphDeployments.name && r.path+" "+r.problem == m }) {
			t.Errorf("maskedByDefaulter lists %q, expected a DynamoGraphDeployment schema rule of that path and problem, saw none: remove it", m)
		}
	}
	expectCovered(t, rules)
	for _, r := range rules {
		var admitted, refused []any
		for _, b := range boundaries() {
			if !r.coveredBy(b) {
				continue
			}
			for _, p := range b.admitted {
				admitted = append(admitted, valuesAt(p.spec, r.path)...)
			}
			for _, p := range b.refused {
				refused = append(refused, valuesAt(p.spec, r.path)...)
			}
		}
		for _, v := range r.enum {
			if !slices.Contains(admitted, any(v)) {
				t.Errorf("%s: expected every enum value admitted by a row, saw %q never admitted (admitted: %v)", r, v, admitted)
			}
		}
		if r.minimum != nil {
			if !slices.Contains(admitted, any(int64(*r.minimum))) || !slices.Contains(refused, any(int64(*r.minimum-1))) {
				t.Errorf("%s: expected %g admitted and %g refused, saw admitted %v, refused %v", r, *r.minimum, *r.minimum-1, admitted, refused)
			}
		}
	}
}

// expectCovered checks rules against the rows: each rule is covered, and each cause of a row
// its judges refuse is some rule's.
func expectCovered(t *testing.T, rules []rule) {
	t.Helper()
	rows := boundaries()
	for _, r := range rules {
		if r.kind == graphDeployments.name && slices.Contains(maskedByDefaulter, r.path+" "+r.problem) {
			continue
		}
		if !slices.ContainsFunc(rows, r.coveredBy) {
			t.Errorf("rule %s: expected a boundary row refusing it (with its closest admitted value), saw none", r)
		}
	}
	for _, b := range rows {
		if !slices.ContainsFunc(rules, func(r rule) bool { return r.judge == b.judge }) {
			continue
		}
		for _, p := range b.refused {
			for _, c := range p.causes {
				if c == celSkipped {
					continue
				}
				if !slices.ContainsFunc(rules, func(r rule) bool { return r.kind == b.kind.name && r.judge == b.judge && r.matches(c) }) {
					t.Errorf("row %q (%s): expected its cause %q to be a rule of the source, saw none that reports it", b.rule, b.kind.name, c)
				}
			}
		}
	}
}

// valuesAt are the values at path (a rule's pattern, "spec." first) in spec.
func valuesAt(spec map[string]any, path string) []any {
	path = strings.ReplaceAll(strings.TrimPrefix(path, "spec."), "[*]", ".[*]")
	vals := []any{spec}
	for _, seg := range strings.Split(path, ".") {
		var next []any
		for _, v := range vals {
			switch v := v.(type) {
			case map[string]any:
				if seg == "*" {
					for _, x := range v {
						next = append(next, x)
					}
				} else if x, ok := v[seg]; ok {
					next = append(next, x)
				}
			case []any:
				if seg == "[*]" {
					next = append(next, v...)
				}
			}
		}
		vals = next
	}
	return vals
}

func root(t *testing.T, dir string) string {
	t.Helper()
	r, err := workspace.Root()
	if err != nil {
		t.Fatalf("finding the workspace: %v", err)
	}
	return filepath.Join(r, filepath.FromSlash(dir))
}

// schemaRules are the OpenAPI and CEL rules of the chart's CRDs under spec (status is the
// controllers' to write), per version.
func schemaRules(t *testing.T) []rule {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root(t, crdDir), "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("listing the CRDs in %s: expected YAML files, saw %v (%v)", crdDir, files, err)
	}
	var rules []rule
	for _, f := range files {
		data, err := os.ReadFile(f) //nolint:gosec // G304: the chart's own CRD files, listed above
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("decoding %s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			s := v.Schema.OpenAPIV3Schema
			add := func(r rule) {
				if r.judge == byWebhook {
					r.judge = byOpenAPI
				}
				r.kind, r.version, r.where = crd.Spec.Names.Kind, v.Name, filepath.Base(f)+" "+v.Name+" "+r.path
				rules = append(rules, r)
			}
			for _, x := range s.XValidations {
				add(rule{judge: byCEL, path: "<nil>", problem: "Invalid value", fragments: []string{x.Message}})
			}
			if spec, ok := s.Properties["spec"]; ok {
				walkSchema(&spec, "spec", add)
			}
		}
	}
	return rules
}

func walkSchema(s *apiextensionsv1.JSONSchemaProps, path string, add func(rule)) {
	if len(s.Enum) > 0 {
		r := rule{path: path, problem: "Unsupported value"}
		for _, e := range s.Enum {
			var v string
			_ = yaml.Unmarshal(e.Raw, &v)
			r.enum = append(r.enum, v)
		}
		add(r)
	}
	if s.Minimum != nil {
		add(rule{path: path, problem: "Invalid value", fragments: []string{fmt.Sprintf("should be greater than or equal to %g", *s.Minimum)}, minimum: s.Minimum})
	}
	if s.Pattern != "" {
		add(rule{path: path, problem: "Invalid value", fragments: []string{"should match '" + s.Pattern + "'"}})
	}
	for _, req := range s.Required {
		add(rule{path: path + "." + req, problem: "Required value"})
	}
	for _, x := range s.XValidations {
		add(rule{judge: byCEL, path: path, problem: "Invalid value", fragments: []string{x.Message}})
	}
	for name, p := range s.Properties {
		walkSchema(&p, path+"."+name, add)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walkSchema(s.Items.Schema, path+"[*]", add)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walkSchema(s.AdditionalProperties.Schema, path+".*", add)
	}
}

// problems are the field error constructors of k8s.io/apimachinery/pkg/util/validation/field
// (and apimachinery's validation helpers) the validation package uses, with the problem each
// error's message states, and the argument holding its detail (-1: none).
var problems = map[string]struct {
	problem   string
	pathArg   int
	detailArg int
}{
	"field.Required":     {"Required value", 0, 1},
	"field.Forbidden":    {"Forbidden", 0, 1},
	"field.Invalid":      {"Invalid value", 0, 2},
	"field.NotSupported": {"Unsupported value", 0, -1},
	"field.Duplicate":    {"Duplicate value", 0, -1},
	"field.TooLong":      {"Too long", 0, -1},
	"field.TooMany":      {"Too many", 0, -1},
	"apimachineryvalidation.ValidateNonnegativeField": {"Invalid value", 1, -1},
}

// errorTypes are the field.ErrorType constants a &field.Error{Type: …} literal may use.
var errorTypes = map[string]string{
	"ErrorTypeRequired": "Required value", "ErrorTypeInvalid": "Invalid value", "ErrorTypeNotSupported": "Unsupported value",
	"ErrorTypeForbidden": "Forbidden", "ErrorTypeDuplicate": "Duplicate value", "ErrorTypeTooLong": "Too long",
}

// webhookRules reads the validation package: from each exported validator (the function that
// names its kind with WithKind), every field error it can reach, following calls into the
// package with their arguments, so that a path built as field.NewPath("spec").Child("x") or
// passed down as a parameter is known.
func webhookRules(t *testing.T) []rule {
	t.Helper()
	dir := root(t, validationDir)
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(names) == 0 {
		t.Fatalf("listing %s: expected Go files, saw %v (%v)", dir, names, err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatalf("parsing %s: %v", name, err)
		}
		files = append(files, f)
	}
	// Imports are not resolved: only the package's own identifiers matter here.
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: emptyImporter{}, Error: func(error) {}}
	_, _ = conf.Check("validation", fset, files, info)

	s := &scanner{t: t, fset: fset, info: info, funcs: map[types.Object]*ast.FuncDecl{}, values: map[types.Object]ast.Expr{}, seen: map[string]bool{}}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				s.funcs[info.Defs[n.Name]] = n
			case *ast.AssignStmt:
				if len(n.Lhs) == len(n.Rhs) {
					for i, l := range n.Lhs {
						if id, ok := l.(*ast.Ident); ok {
							if obj := objectOf(info, id); obj != nil {
								s.values[obj] = n.Rhs[i]
							}
						}
					}
				}
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if i < len(n.Values) {
						s.values[info.Defs[id]] = n.Values[i]
					}
				}
			}
			return true
		})
	}
	for _, fn := range s.funcs {
		if !fn.Name.IsExported() {
			continue
		}
		if kind := kindOf(fn); kind != "" {
			s.kind = kind
			s.walk(fn.Body, nil, 0)
		}
	}
	return s.rules
}

type emptyImporter struct{}

func (emptyImporter) Import(path string) (*types.Package, error) {
	return nil, fmt.Errorf("%s not loaded", path)
}

func objectOf(info *types.Info, id *ast.Ident) types.Object {
	if o := info.Defs[id]; o != nil {
		return o
	}
	return info.Uses[id]
}

// kindOf is the kind fn's validator names: the argument of its WithKind call.
func kindOf(fn *ast.FuncDecl) string {
	kind := ""
	ast.Inspect(fn, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok && selectorName(c.Fun) == "WithKind" && len(c.Args) == 1 {
			kind = stringLit(c.Args[0])
		}
		return kind == ""
	})
	return kind
}

// binding is a parameter's argument, in the environment of its call.
type binding struct {
	expr ast.Expr
	env  env
}

type env map[types.Object]binding

type scanner struct {
	t      *testing.T
	fset   *token.FileSet
	info   *types.Info
	funcs  map[types.Object]*ast.FuncDecl
	values map[types.Object]ast.Expr // local variables and constants: their (last) value
	kind   string
	rules  []rule
	seen   map[string]bool
}

func (s *scanner) walk(body ast.Node, e env, depth int) {
	if depth > 10 {
		s.t.Fatalf("%s: calls nest deeper than 10", s.fset.Position(body.Pos()))
	}
	calls := map[*ast.Ident]bool{}    // identifiers called (not passed as values)
	immutables := map[ast.Node]bool{} // field errors marked WithOrigin(originImmutable)
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "WithOrigin" {
				immutables[sel.X] = true
			}
			name := qualifiedName(n.Fun)
			if p, ok := problems[name]; ok {
				var detail ast.Expr
				if p.detailArg >= 0 {
					detail = n.Args[p.detailArg]
				}
				s.add(n, s.path(n.Args[p.pathArg], e), p.problem, s.fragments(detail, e), immutables[n])
				return true
			}
			if id, ok := n.Fun.(*ast.Ident); ok {
				calls[id] = true
				if fn := s.funcs[objectOf(s.info, id)]; fn != nil {
					s.walk(fn.Body, s.bind(fn, n.Args, e), depth+1)
				}
			}
		case *ast.CompositeLit:
			if qualifiedName(n.Type) == "field.Error" {
				var path, detail ast.Expr
				problem := ""
				for _, el := range n.Elts {
					kv := el.(*ast.KeyValueExpr)
					switch kv.Key.(*ast.Ident).Name {
					case "Field":
						path = kv.Value.(*ast.CallExpr).Fun.(*ast.SelectorExpr).X // path.String()
					case "Type":
						problem = errorTypes[selectorName(kv.Value)]
					case "Detail":
						detail = kv.Value
					}
				}
				s.add(n, s.path(path, e), problem, s.fragments(detail, e), false)
			}
		case *ast.Ident:
			// A function passed as a value (create: validateGraphDeployment) runs with its own
			// arguments, none of them a path.
			if fn := s.funcs[s.info.Uses[n]]; fn != nil && !calls[n] {
				s.walk(fn.Body, nil, depth+1)
			}
		}
		return true
	})
}

func (s *scanner) bind(fn *ast.FuncDecl, args []ast.Expr, caller env) env {
	e := env{}
	i := 0
	for _, field := range fn.Type.Params.List {
		for _, name := range field.Names {
			if i < len(args) {
				e[s.info.Defs[name]] = binding{args[i], caller}
			}
			i++
		}
	}
	return e
}

func (s *scanner) add(at ast.Node, path, problem string, fragments []string, immutable bool) {
	r := rule{kind: s.kind, path: path, problem: problem, fragments: fragments, immutable: immutable, where: s.fset.Position(at.Pos()).String()}
	key := fmt.Sprint(r.kind, r.path, r.problem, r.fragments, r.immutable)
	if !s.seen[key] {
		s.seen[key] = true
		s.rules = append(s.rules, r)
	}
}

// resolve follows an identifier to its value: a parameter's argument, a variable's or
// constant's value.
func (s *scanner) resolve(id *ast.Ident, e env) (ast.Expr, env, bool) {
	obj := s.info.Uses[id]
	if b, ok := e[obj]; ok {
		return b.expr, b.env, true
	}
	if v, ok := s.values[obj]; ok {
		return v, e, true
	}
	return nil, nil, false
}

// path evaluates a *field.Path expression to its pattern.
func (s *scanner) path(x ast.Expr, e env) string {
	switch x := x.(type) {
	case *ast.ParenExpr:
		return s.path(x.X, e)
	case *ast.Ident:
		if v, ve, ok := s.resolve(x, e); ok {
			return s.path(v, ve)
		}
	case *ast.CallExpr:
		sel, ok := x.Fun.(*ast.SelectorExpr)
		if !ok {
			break
		}
		var parts []string
		for _, a := range x.Args {
			parts = append(parts, stringLit(a))
		}
		switch sel.Sel.Name {
		case "NewPath":
			return strings.Join(parts, ".")
		case "Child":
			return s.path(sel.X, e) + "." + strings.Join(parts, ".")
		case "Key", "Index":
			return s.path(sel.X, e) + "[*]"
		}
	}
	s.t.Fatalf("%s: cannot follow the field path %T to field.NewPath; teach webhookRules this form", s.fset.Position(x.Pos()), x)
	return ""
}

// fragments are the constant parts of a detail: a string literal, or the text of a
// fmt.Sprintf format between its verbs.
func (s *scanner) fragments(x ast.Expr, e env) []string {
	switch x := x.(type) {
	case *ast.BasicLit:
		if v := stringLit(x); x.Kind == token.STRING && v != "" {
			return []string{v}
		}
	case *ast.Ident:
		if v, ve, ok := s.resolve(x, e); ok {
			return s.fragments(v, ve)
		}
	case *ast.CallExpr:
		if qualifiedName(x.Fun) == "fmt.Sprintf" {
			var out []string
			for _, f := range regexp.MustCompile(`%[-+# 0-9.\[\]]*[a-zA-Z%]`).Split(stringLit(x.Args[0]), -1) {
				if f != "" {
					out = append(out, f)
				}
			}
			return out
		}
	}
	return nil
}

func qualifiedName(x ast.Expr) string {
	if sel, ok := x.(*ast.SelectorExpr); ok {
		if pkg, ok := sel.X.(*ast.Ident); ok {
			return pkg.Name + "." + sel.Sel.Name
		}
	}
	return ""
}

func selectorName(x ast.Expr) string {
	if sel, ok := x.(*ast.SelectorExpr); ok {
		return sel.Sel.Name
	}
	return ""
}

func stringLit(x ast.Expr) string {
	if lit, ok := x.(*ast.BasicLit); ok && lit.Kind == token.STRING {
		v, err := strconv.Unquote(lit.Value)
		if err == nil {
			return v
		}
	}
	return "*"
}
