// Package expect holds the assertions scenarios use. Each failure says what was expected and
// what was seen, fails the test like t.Errorf/t.Fatalf, and is remembered by test name, so the
// suite can put the same sentence into summary.json and junit.xml (Messages). A plain t.Fatalf
// still fails the scenario; its report then only names the failed step.
package expect

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/poll"
)

var recorded struct {
	mu   sync.Mutex
	msgs map[string][]string // test name → messages, in order
}

func record(t testing.TB, msg string) {
	recorded.mu.Lock()
	defer recorded.mu.Unlock()
	if recorded.msgs == nil {
		recorded.msgs = map[string][]string{}
	}
	recorded.msgs[t.Name()] = append(recorded.msgs[t.Name()], msg)
}

// Messages returns, in order, the failure and skip messages recorded for the test named name
// and its subtests.
func Messages(name string) []string {
	recorded.mu.Lock()
	defer recorded.mu.Unlock()
	var out []string
	for n, msgs := range recorded.msgs {
		if n == name || strings.HasPrefix(n, name+"/") {
			out = append(out, msgs...)
		}
	}
	return out
}

// Errorf records the message and marks the test failed; the test goes on.
func Errorf(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	record(t, msg)
	t.Error(msg)
}

// Fatalf records the message and stops the test.
func Fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	record(t, msg)
	t.Fatal(msg)
}

// Skipf records why the test does not apply and skips it.
func Skipf(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	record(t, msg)
	t.Skip(msg)
}

// NoError stops the test when err is not nil; doing says what was being done
// ("creating Secret ns/name").
func NoError(t testing.TB, err error, doing string, args ...any) {
	t.Helper()
	if err != nil {
		Fatalf(t, "%s: %v", fmt.Sprintf(doing, args...), err)
	}
}

// Equal fails the test (and goes on) unless got equals want; what names the value
// ("type of Secret dynamo-system/webhook-server-cert").
func Equal[T any](t testing.TB, what string, want, got T) bool {
	t.Helper()
	if reflect.DeepEqual(want, got) {
		return true
	}
	Errorf(t, "%s: expected %v, saw %v", what, want, got)
	return false
}

// Eventually polls cond (poll.Until) until it holds, then returns. After timeout it stops the
// test with "waited <d> for <what>; last seen: <state>", where the state is the last string
// cond gave. An error from cond stops the test at once.
func Eventually(ctx context.Context, t testing.TB, what string, timeout time.Duration, cond poll.Condition) {
	t.Helper()
	poll.Helper()
	if err := poll.Until(ctx, what, timeout, cond); err != nil {
		Fatalf(t, "%v", err)
	}
}
