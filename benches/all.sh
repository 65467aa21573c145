#!/usr/bin/env bash
# Every figure of BENCHMARKS.md: runs each benchmark (release build) and prints its tables
# in Markdown, each headed by the command, date, commit and number of runs.
#
#   bash benches/all.sh [--runs N]      # default 3 runs per figure
set -euo pipefail
cd "$(dirname "$0")/.."
for bench in scheduler launch panels sessions_list subscriptions export hardening; do
  echo "### $bench"
  echo
  cargo bench --locked --quiet --bench "$bench" -- "$@"
  echo
done
