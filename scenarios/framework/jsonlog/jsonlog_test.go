package jsonlog_test

import (
	"bufio"
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/jsonlog"
)

type entry struct {
	Msg   string `json:"msg"`
	Error string `json:"error"`
}

func read(t *testing.T, log string) []entry {
	t.Helper()
	var got []entry
	require.NoError(t, jsonlog.Read(strings.NewReader(log), func(e entry) { got = append(got, e) }))
	return got
}

func TestReadKeepsTheJSONLinesInOrder(t *testing.T) {
	log := strings.Join([]string{
		`{"level":"info","msg":"validate create"}`,
		`panic: something`,
		``,
		`goroutine 1 [running]:`,
		`  {"msg":"indented, still a JSON line"}`,
		`{"msg":"cut off`,
		`{"level":"error","msg":"cert-controller: failed","error":"secrets is forbidden"}`,
	}, "\n")
	assert.Equal(t, []entry{
		{Msg: "validate create"},
		{Msg: "indented, still a JSON line"},
		{Msg: "cert-controller: failed", Error: "secrets is forbidden"},
	}, read(t, log))
}

func TestReadSaysWhyItStopped(t *testing.T) {
	broken := errors.New("stream reset")
	var got []entry
	err := jsonlog.Read(iotest.TimeoutReader(strings.NewReader(`{"msg":"first"}`+"\n")), func(e entry) { got = append(got, e) })
	require.ErrorIs(t, err, iotest.ErrTimeout, "a reader's error must come back to the caller")
	assert.Equal(t, []entry{{Msg: "first"}}, got, "the lines before the error are handed on")

	err = jsonlog.Read(iotest.ErrReader(broken), func(entry) {})
	require.ErrorIs(t, err, broken)

	long := `{"msg":"` + strings.Repeat("x", jsonlog.MaxLine) + `"}`
	err = jsonlog.Read(strings.NewReader(long), func(entry) {})
	require.ErrorIs(t, err, bufio.ErrTooLong)
}
