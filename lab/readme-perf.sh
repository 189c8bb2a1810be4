#!/bin/bash
# Copies the table lab/bench.sh wrote (docs/performance.md) into the README's
# "Performance" section, between the perf markers, so `make bench` refreshes both.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-docs/performance.md}
[ -s "$src" ] || { echo "readme-perf: $src missing" >&2; exit 1; }
python3 - "$src" <<'PY'
import sys, re
src = open(sys.argv[1]).read()
body = src.split('\n', 1)[1].strip()          # drop the "# Performance" title
body = re.sub(r'^#', '###', body, flags=re.M)  # keep sub-headings below the README's level
readme = open('README.md').read()
begin, end = '<!-- perf:begin (lab/readme-perf.sh) -->', '<!-- perf:end -->'
i, j = readme.index(begin) + len(begin), readme.index(end)
open('README.md', 'w').write(readme[:i] + '\n' + body + '\n' + readme[j:])
PY
echo "README.md: Performance section refreshed from $src"
