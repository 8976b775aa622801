package chainsaw

import (
	"bytes"
	"errors"
	"io"
	"os"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"
)

var (
	// yamlLine is where a YAML parser's message points ("yaml: line 7: …").
	yamlLine = regexp.MustCompile(`line (\d+)`)
	// fieldPath is a field path in a schema validation message, e.g.
	// spec.steps[0].try[0].creat: Invalid value: …
	fieldPath = regexp.MustCompile(`\b(?:apiVersion|kind|metadata|spec)(?:\.[A-Za-z0-9_$-]+|\[[0-9]+\])*`)
	// pathPart is one step of a field path: a key or an index.
	pathPart = regexp.MustCompile(`([^.\[\]]+)|\[([0-9]+)\]`)
)

// Locate is the line of file that Chainsaw's message msg on it points at, 0 when it cannot
// tell. Chainsaw parses each YAML document of a file on its own, so a line it names counts
// from its document; and its schema errors name a field path, not a line. So the file is parsed
// again here: a syntax error's line is the parser's (from the file's start), a field path's the
// line of the deepest field of the path the file holds (an unknown field's own line, a missing
// field's parent's).
func Locate(file, msg string) int {
	data, err := os.ReadFile(file) //nolint:gosec // G304: a test file of the target's directory
	if err != nil {
		return 0
	}
	var docs []*yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
				line, _ := strconv.Atoi(m[1])
				return line
			}
			return 0
		}
		if len(doc.Content) > 0 {
			docs = append(docs, doc.Content[0])
		}
	}
	best, bestDepth := 0, 0
	for _, path := range fieldPath.FindAllString(msg, -1) {
		for _, doc := range docs {
			if line, depth := walk(doc, path); depth > bestDepth {
				best, bestDepth = line, depth
			}
		}
	}
	return best
}

// walk follows path (a.b[0].c) from n as far as the YAML holds it: the line of the last field
// or item reached, and how many steps that took.
func walk(n *yaml.Node, path string) (line, depth int) {
	for _, m := range pathPart.FindAllStringSubmatch(path, -1) {
		var next *yaml.Node
		switch {
		case m[1] != "" && n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == m[1] {
					line, next = n.Content[i].Line, n.Content[i+1]
					break
				}
			}
		case m[2] != "" && n.Kind == yaml.SequenceNode:
			if i, _ := strconv.Atoi(m[2]); i < len(n.Content) {
				next = n.Content[i]
				line = next.Line
			}
		}
		if next == nil {
			return line, depth
		}
		n, depth = next, depth+1
	}
	return line, depth
}
