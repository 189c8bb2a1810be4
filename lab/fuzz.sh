#!/bin/bash
# Runs every fuzz target of the module for FUZZTIME each (default 60s) and
# prints the exec count of each. New interesting inputs stay in the package's
# testdata/fuzz corpus (commit them).
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-60s}
fail=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for f in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)\(' "$dir"/*_test.go 2>/dev/null | sed -E 's/func (Fuzz[A-Za-z0-9_]+)\(/\1/' | sort -u); do
    echo "== $pkg $f ($t)"
    if out=$(go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" "$pkg" 2>&1); then
      echo "$out" | grep -E 'fuzz: elapsed' | tail -1
    else
      echo "$out" | tail -30; fail=1
    fi
  done
done
exit $fail
