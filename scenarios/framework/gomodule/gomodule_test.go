package gomodule

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goCall is one call of the go command a fake answers: its arguments and environment.
type goCall struct {
	dir  string
	env  []string
	args []string
}

// fakeGo replaces the go command with answer for the test's duration and returns the calls
// made. Tests that use it must not run in parallel: goCommand is one variable.
func fakeGo(t *testing.T, answer func(c goCall) ([]byte, error)) *[]goCall {
	t.Helper()
	var calls []goCall
	saved := goCommand
	goCommand = func(_ context.Context, dir string, env []string, args ...string) ([]byte, error) {
		c := goCall{dir: dir, env: env, args: args}
		calls = append(calls, c)
		return answer(c)
	}
	t.Cleanup(func() { goCommand = saved })
	return &calls
}

func (c goCall) is(prefix ...string) bool {
	return len(c.args) >= len(prefix) && strings.Join(c.args[:len(prefix)], " ") == strings.Join(prefix, " ")
}

const gatekeeper = "github.com/open-policy-agent/gatekeeper/v3"

// proxy answers as the Go module proxy would when it serves the versions given of gatekeeper
// only, each unpacked in moduleDir.
func proxy(moduleDir string, served ...string) func(c goCall) ([]byte, error) {
	return func(c goCall) ([]byte, error) {
		switch {
		case c.is("mod", "download", "-json"):
			path, version, _ := strings.Cut(c.args[3], "@")
			if path == gatekeeper && strings.Contains(" "+strings.Join(served, " ")+" ", " "+version+" ") {
				return fmt.Appendf(nil, `{"Path": %q, "Version": %q, "Dir": %q}`, path, version, moduleDir), nil
			}
			return fmt.Appendf(nil, `{"Path": %q, "Version": %q, "Error": "%s@%s: reading proxy: 403 Forbidden"}`, path, version, path, version),
				errors.New("go mod download: exit status 1")
		case c.is("list", "-m", "-versions", "-json"):
			if c.args[4] != gatekeeper {
				return nil, errors.New("go list: exit status 1\ngo: module " + c.args[4] + ": reading proxy: 403 Forbidden")
			}
			return fmt.Appendf(nil, `{"Path": %q, "Versions": ["%s"]}`, gatekeeper, strings.Join(served, `", "`)), nil
		}
		return nil, fmt.Errorf("unexpected go %s", strings.Join(c.args, " "))
	}
}

func TestResolveReturnsTheModuleCacheDirectory(t *testing.T) {
	calls := fakeGo(t, proxy("/mod/gatekeeper/v3@v3.23.1", "v3.17.0", "v3.23.1"))
	dir, err := Resolve(context.Background(), gatekeeper, "v3.23.1")
	require.NoError(t, err)
	assert.Equal(t, "/mod/gatekeeper/v3@v3.23.1", dir)
	require.Len(t, *calls, 1)
	assert.Contains(t, (*calls)[0].env, "GOFLAGS=-mod=mod")
	assert.NotEmpty(t, (*calls)[0].dir, "run in a directory of its own, outside the caller's module")
}

func TestResolveListsTheVersionsServedWhenOneIsNot(t *testing.T) {
	fakeGo(t, proxy("/unused", "v3.17.0", "v3.23.1"))
	_, err := Resolve(context.Background(), gatekeeper, "v3.99.0")
	require.Error(t, err)
	assert.Equal(t, "downloading Go module "+gatekeeper+"@v3.99.0: the Go module proxy does not serve version v3.99.0 of "+gatekeeper+"; it serves v3.17.0, v3.23.1", err.Error())
}

func TestResolveSaysWhenTheModuleIsUnknown(t *testing.T) {
	fakeGo(t, proxy("/unused", "v3.23.1"))
	_, err := Resolve(context.Background(), "github.com/open-policy-agent/gatekeepr/v3", "v3.23.1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the Go module proxy does not know module github.com/open-policy-agent/gatekeepr/v3 (it lists no version of it)")
	assert.Contains(t, err.Error(), "403 Forbidden", "and the proxy's own answer")
}

func TestResolveReportsOtherFailuresAsTheyAre(t *testing.T) {
	fakeGo(t, func(c goCall) ([]byte, error) {
		if c.is("mod", "download") {
			return []byte(`{"Error": "verifying module: checksum mismatch"}`), errors.New("exit status 1")
		}
		return proxy("/unused", "v3.23.1")(c)
	})
	_, err := Resolve(context.Background(), gatekeeper, "v3.23.1")
	require.Error(t, err)
	assert.Equal(t, "downloading Go module "+gatekeeper+"@v3.23.1: verifying module: checksum mismatch", err.Error(),
		"a version the proxy serves that fails to download is not called missing")
}

func TestResolveRefusesWhatNoProxyCouldServe(t *testing.T) {
	calls := fakeGo(t, proxy("/unused", "v3.23.1"))
	for version, want := range map[string]string{
		"latest":  "a target names one exact version",
		"3.23.1":  "a target names one exact version",
		"v2.0.0":  "invalid version",
		"v3.23.1": "",
	} {
		_, err := Resolve(context.Background(), gatekeeper, version)
		if want == "" {
			require.NoError(t, err, "%s", version)
			continue
		}
		require.ErrorContains(t, err, want, "%s", version)
		assert.Contains(t, err.Error(), gatekeeper+"@"+version)
	}
	_, err := Resolve(context.Background(), "not a module path", "v1.0.0")
	require.ErrorContains(t, err, "module not a module path@v1.0.0: malformed module path")
	assert.Len(t, *calls, 1, "only the valid version reached the go command")
}

func TestListVersionsNamesTheNewest(t *testing.T) {
	var served []string
	for i := range 20 {
		served = append(served, fmt.Sprintf("v0.%d.0", i))
	}
	assert.Equal(t, "v0.5.0, v0.6.0, v0.7.0, v0.8.0, v0.9.0, v0.10.0, v0.11.0, v0.12.0, v0.13.0, v0.14.0, v0.15.0, v0.16.0, v0.17.0, v0.18.0, v0.19.0 (and 5 older)",
		listVersions(served))
	assert.Equal(t, "v0.0.0, v0.1.0", listVersions(served[:2]))
}
