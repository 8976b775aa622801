package target

import (
	"context"
	"fmt"
	"strings"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/gomodule"
)

// Version is the module version the target is built from ("" when it is built from a source
// directory or runs prebuilt images).
func (t *Target) Version() string {
	if t.Source.Module == nil {
		return ""
	}
	return t.Source.Module.Version
}

// AtVersion is the description at another version of its module: the same chart path, values,
// setup objects and probes, with its binaries built from, and its chart rendered out of,
// module@version. The module is fetched from the Go module proxy into the module cache (when it
// is not there yet), so a version the proxy does not serve fails here, before anything is built,
// with the versions it does serve (gomodule.Resolve). An image reference whose tag is the
// description's own version takes the new one, as that version's chart renders it
// (openpolicyagent/gatekeeper:v3.23.1 → …:v3.17.0).
func (t *Target) AtVersion(ctx context.Context, version string) (*Target, error) {
	at, err := t.atVersion(version)
	if err != nil {
		return nil, err
	}
	m := at.Source.Module
	if _, err := gomodule.Resolve(ctx, m.Path, m.Version); err != nil {
		return nil, fmt.Errorf("target %s at %s: %w", t.Name, version, err)
	}
	return at, nil
}

// atVersion is AtVersion without fetching the module.
func (t *Target) atVersion(version string) (*Target, error) {
	m := t.Source.Module
	if m == nil {
		return nil, fmt.Errorf("target %s is not built from a Go module version (source.module), so it has no other version to build", t.Name)
	}
	at := *t
	at.Source.Module = &Module{Path: m.Path, Version: version}
	at.Source.Binaries = make([]Binary, len(t.Source.Binaries))
	for i, b := range t.Source.Binaries {
		b.Image = retag(b.Image, m.Version, version)
		at.Source.Binaries[i] = b
	}
	at.Source.StandIns = make([]StandIn, len(t.Source.StandIns))
	for i, s := range t.Source.StandIns {
		s.Image = retag(s.Image, m.Version, version)
		at.Source.StandIns[i] = s
	}
	if t.Description != "" {
		at.Description = strings.ReplaceAll(t.Description, m.Version, version)
	}
	return &at, nil
}

// retag replaces image's tag with to when it is from.
func retag(image, from, to string) string {
	if repo, ok := strings.CutSuffix(image, ":"+from); ok {
		return repo + ":" + to
	}
	return image
}
