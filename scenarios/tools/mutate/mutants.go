// Package mutate is mutation testing of the operator and its chart through the e2e suites
// (`make mutate`): it makes small deterministic changes (mutants) to the webhook, certificate
// and lease code and to the chart's templates, runs the suites that reach each change against
// it, and reports which scenario killed it — or that it survived.
package mutate

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Mutant is one small change to one file of the workspace: the bytes [Start, End) of File
// replaced by Replacement.
type Mutant struct {
	// File is relative to the workspace root.
	File        string `json:"file"`
	Line        int    `json:"line"`
	Operator    string `json:"operator"`
	Start       int    `json:"start"`
	End         int    `json:"end"`
	Replacement string `json:"replacement"`
	// Change describes the edit for the report: "`a < b` → `a <= b`".
	Change string `json:"change"`
	// Source is the mutated line before the change, trimmed (equivalent.yaml matches on it).
	Source string `json:"source"`
}

// ID names the mutant in reports: file:line:operator.
func (m Mutant) ID() string { return fmt.Sprintf("%s:%d:%s", m.File, m.Line, m.Operator) }

// Apply returns src with the mutation made.
func (m Mutant) Apply(src []byte) ([]byte, error) {
	if m.Start < 0 || m.End > len(src) || m.Start > m.End {
		return nil, fmt.Errorf("mutant %s: range [%d,%d) outside the file's %d bytes", m.ID(), m.Start, m.End, len(src))
	}
	out := make([]byte, 0, len(src)+len(m.Replacement))
	out = append(out, src[:m.Start]...)
	out = append(out, m.Replacement...)
	return append(out, src[m.End:]...), nil
}

// Operators of Go mutants.
const (
	OpNegateCondition = "negate-condition" // if c → if !(c)
	OpFlipComparison  = "flip-comparison"  // < ↔ <=, > ↔ >=, == ↔ !=
	OpFlipLogical     = "flip-logical"     // && ↔ ||
	OpDropCall        = "drop-call"        // a call statement removed
	OpZeroConstant    = "zero-constant"    // an integer literal n ≠ 0 → 0
	OpDropTemplateKey = "drop-template-line"
)

var flippedComparison = map[token.Token]token.Token{
	token.LSS: token.LEQ, token.LEQ: token.LSS,
	token.GTR: token.GEQ, token.GEQ: token.GTR,
	token.EQL: token.NEQ, token.NEQ: token.EQL,
	token.LAND: token.LOR, token.LOR: token.LAND,
}

// loggingCalls are method names whose call statements only log: dropping one changes no
// behavior the suites can judge except a log line, so they are not mutated.
var loggingCalls = []string{"Info", "Error", "V", "Infof", "Errorf", "Printf", "Println", "Logf", "WithValues"}

// GoMutants are the mutants of one Go source file (path relative to root). Test files and
// generated files are never mutated.
func GoMutants(root, rel string) ([]Mutant, error) {
	src, err := os.ReadFile(filepath.Join(root, rel)) //nolint:gosec // G304: a workspace file the caller lists
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	if ast.IsGenerated(f) {
		return nil, nil
	}
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	line := func(p token.Pos) int { return fset.Position(p).Line }
	text := func(n ast.Node) string { return string(src[off(n.Pos()):off(n.End())]) }
	lines := strings.Split(string(src), "\n")
	var out []Mutant
	add := func(m Mutant) {
		m.File, m.Source = rel, strings.TrimSpace(lines[m.Line-1])
		out = append(out, m)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt:
			c := text(n.Cond)
			add(Mutant{Line: line(n.Cond.Pos()), Operator: OpNegateCondition, Start: off(n.Cond.Pos()), End: off(n.Cond.End()),
				Replacement: "!(" + c + ")", Change: fmt.Sprintf("`if %s` → `if !(%s)`", short(c), short(c))})
		case *ast.BinaryExpr:
			to, ok := flippedComparison[n.Op]
			if !ok || isNil(n.X) || isNil(n.Y) {
				// `err != nil` flipped is `if err != nil` negated: one mutant, not two.
				return true
			}
			op := OpFlipComparison
			if n.Op == token.LAND || n.Op == token.LOR {
				op = OpFlipLogical
			}
			add(Mutant{Line: line(n.OpPos), Operator: op, Start: off(n.OpPos), End: off(n.OpPos) + len(n.Op.String()),
				Replacement: to.String(), Change: fmt.Sprintf("`%s` → `%s` in `%s`", n.Op, to, short(text(n)))})
		case *ast.ExprStmt:
			call, ok := n.X.(*ast.CallExpr)
			if !ok || isLogging(call) {
				return true
			}
			add(Mutant{Line: line(n.Pos()), Operator: OpDropCall, Start: off(n.Pos()), End: off(n.End()),
				Replacement: "_ = 0", Change: fmt.Sprintf("`%s` removed", short(text(n)))})
		case *ast.BasicLit:
			if n.Kind != token.INT || n.Value == "0" {
				return true
			}
			add(Mutant{Line: line(n.Pos()), Operator: OpZeroConstant, Start: off(n.Pos()), End: off(n.End()),
				Replacement: "0", Change: fmt.Sprintf("`%s` → `0`", n.Value)})
		case *ast.GenDecl:
			// Constants in declarations feed types and array sizes; mutating them mostly
			// breaks the build. Literals in function bodies are what matter.
			return n.Tok != token.CONST
		}
		return true
	})
	return out, nil
}

func isNil(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "nil"
}

func isLogging(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && slices.Contains(loggingCalls, sel.Sel.Name)
}

// short keeps a code excerpt on one line and bounded for the report.
func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 60 {
		return s[:57] + "…"
	}
	return s
}

// TemplateMutants drop one line each of a chart template (path relative to root): a line
// that sets a key of the rendered object (`key: value` or `- item`), not template control.
func TemplateMutants(root, rel string) ([]Mutant, error) {
	src, err := os.ReadFile(filepath.Join(root, rel)) //nolint:gosec // G304: a workspace file the caller lists
	if err != nil {
		return nil, err
	}
	var out []Mutant
	sc := bufio.NewScanner(bytes.NewReader(src))
	offset := 0
	inComment := false // inside a template comment, {{/* … */}}: nothing rendered, no mutant
	for n := 1; sc.Scan(); n++ {
		raw := sc.Text()
		l := strings.TrimSpace(raw)
		start := offset
		offset += len(raw) + 1
		if opens := strings.Contains(l, "{{/*") || strings.Contains(l, "{{- /*"); inComment || opens {
			inComment = !strings.Contains(l, "*/}}") && !strings.Contains(l, "*/ -}}")
			continue
		}
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "{{") || l == "---" ||
			strings.HasPrefix(l, "apiVersion:") || strings.HasPrefix(l, "kind:") || strings.HasPrefix(l, "name:") ||
			strings.HasPrefix(l, "namespace:") || strings.HasSuffix(l, ":") {
			continue
		}
		if !strings.Contains(l, ": ") && !strings.HasPrefix(l, "- ") {
			continue
		}
		end := min(offset, len(src))
		out = append(out, Mutant{File: rel, Line: n, Operator: OpDropTemplateKey, Start: start, End: end,
			Replacement: "", Change: fmt.Sprintf("line `%s` removed", short(l)), Source: l})
	}
	return out, sc.Err()
}
