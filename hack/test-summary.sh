#!/usr/bin/env bash
# Filters `go test -v` output down to what a person reads: every test and subtest result,
# package results, and the lines that explain a failure (file:line messages, testify blocks,
# panics). The unfiltered log is kept by the caller.
awk '
  /^=== (RUN|PAUSE|CONT|NAME)/ { next }
  /^ *--- (PASS|FAIL|SKIP)/     { print; next }
  /^(ok|FAIL|PASS|panic:|\?)/   { print; next }
  /_test\.go:[0-9]+:/           { print; next }
  /^\s+(Error Trace|Error|Test|Messages|expected|actual):/ { print; next }
'
