#!/usr/bin/env bash
# Filters `go test -v` output down to what a person reads: every test and subtest result,
# package results, and the lines that explain a failure (file:line messages, testify blocks,
# panics, and an e2e suite's own account, which it prints on stderr as "[ elapsed] …" lines:
# its ✗ lines, its FAILURES section — each failed scenario with what was expected and seen —
# and its count line). The unfiltered log is kept by the caller.
awk '
  {
    suite = match($0, /^\[ *[0-9.]+s\] /)
    line = suite ? substr($0, RLENGTH + 1) : $0
  }
  suite && line == "FAILURES"   { failures = 1; print; next }
  failures && (!suite || line == "NOTES" || line ~ /^suite .*: [0-9]+ passed, [0-9]+ failed/) { failures = 0 }
  failures                      { print; next }
  suite && line ~ /^(✗|suite .*: [0-9]+ passed, [0-9]+ failed)/ { print; next }
  /^=== (RUN|PAUSE|CONT|NAME)/ { next }
  /^ *--- (PASS|FAIL|SKIP)/     { print; next }
  /^(ok|FAIL|PASS|panic:|\?)/   { print; next }
  /_test\.go:[0-9]+:/           { print; next }
  /^[ \t]+(Error Trace|Error|Test|Messages|expected|actual):/ { print; next }
'
