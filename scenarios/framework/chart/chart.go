// Package chart loads and renders the dynamo-operator Helm chart (charts/dynamo-operator) with
// the Helm SDK, exactly as `helm install` would, and describes a release of it (Release: name,
// namespace, certificate mode, values) as the chart values it installs with and the names the
// chart derives from them, so scenarios and tests work with the deployed shape the chart defines
// instead of re-creating its objects by hand.
package chart

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"helm.sh/helm/v3/pkg/action"
	helmchart "helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Path is the chart's directory relative to the repository root.
const Path = "charts/dynamo-operator"

// Dir returns the absolute path of the chart directory. It walks up from the working
// directory to the first directory that holds Path/Chart.yaml, so it works from any package
// of the workspace (go test runs in the package directory).
func Dir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("locating chart %s: %w", Path, err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		candidate := filepath.Join(dir, Path)
		if _, err := os.Stat(filepath.Join(candidate, "Chart.yaml")); err == nil {
			return candidate, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("locating chart: no %s/Chart.yaml in %s or any parent directory", Path, wd)
		}
	}
}

// Load loads the dynamo-operator chart from Dir.
func Load() (*helmchart.Chart, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", dir, err)
	}
	return ch, nil
}

// Render loads the chart and renders it for a release; see RenderChart.
func Render(releaseName, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	ch, err := Load()
	if err != nil {
		return nil, err
	}
	return RenderChart(ch, releaseName, namespace, values)
}

// RenderChart renders ch as release releaseName in namespace with values (merged over the
// chart's values.yaml) and returns the objects in manifest order. It runs Helm's install action
// client-side, like `helm template`: values are checked against values.schema.json, templates
// may `fail`, and `lookup` finds nothing. Errors carry Helm's message (the schema violation or
// the template's fail text).
func RenderChart(ch *helmchart.Chart, releaseName, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	return RenderChartFor(ch, releaseName, namespace, values, "")
}

// RenderChartFor is RenderChart for a cluster of Kubernetes kubeVersion (e.g. v1.37.2; "" for
// the Helm SDK's default, v1.20.0): what .Capabilities.KubeVersion says and what the chart's
// kubeVersion constraint is checked against, as `helm template --kube-version` and as an
// install into that cluster would. A chart requiring a newer Kubernetes than v1.20 (Kyverno's:
// >=1.25.0-0) renders only so.
func RenderChartFor(ch *helmchart.Chart, releaseName, namespace string, values map[string]any, kubeVersion string) ([]*unstructured.Unstructured, error) {
	client := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	if kubeVersion != "" {
		kv, err := chartutil.ParseKubeVersion(kubeVersion)
		if err != nil {
			return nil, fmt.Errorf("rendering chart %s for Kubernetes %q: %w", ch.Name(), kubeVersion, err)
		}
		client.KubeVersion = kv
	}
	client.ReleaseName = releaseName
	client.Namespace = namespace
	client.DryRun = true
	client.DryRunOption = "client"
	client.ClientOnly = true
	client.Replace = true // no release storage to check names against

	if values == nil {
		values = map[string]any{}
	}
	rel, err := client.Run(ch, values)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s as release %s/%s: %w", ch.Name(), namespace, releaseName, err)
	}
	objs, err := DecodeManifest(rel.Manifest)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s as release %s/%s: %w", ch.Name(), namespace, releaseName, err)
	}
	return objs, nil
}

// CRDs are the CRDs of ch's crds/ directory, which Helm installs before the templates and
// RenderChart leaves out.
func CRDs(ch *helmchart.Chart) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, crd := range ch.CRDObjects() {
		decoded, err := DecodeManifest(string(crd.File.Data))
		if err != nil {
			return nil, fmt.Errorf("chart %s: %s: %w", ch.Name(), crd.Filename, err)
		}
		objs = append(objs, decoded...)
	}
	return objs, nil
}

// DecodeManifest splits a multi-document YAML manifest (as Helm produces it) into objects,
// skipping empty documents.
func DecodeManifest(manifest string) ([]*unstructured.Unstructured, error) {
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(manifest), 4096)
	var objs []*unstructured.Unstructured
	for i := 0; ; i++ {
		var raw json.RawMessage
		if err := decoder.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decoding manifest document %d: %w", i, err)
		}
		if trimmed := bytes.TrimSpace(raw); len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
			continue
		}
		// Unstructured's own JSON decoding keeps integers as int64, which the typed converters need.
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("decoding manifest document %d: %w", i, err)
		}
		objs = append(objs, obj)
	}
}
