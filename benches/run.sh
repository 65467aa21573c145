#!/usr/bin/env bash
# Every figure of BENCHMARKS.md: runs each benchmark (release build) and prints its tables
# in Markdown, each headed by the command, date, commit and number of runs. `versus` puts
# sessiond beside PostGraphile and the floor (it needs Node and npm, and starts its own
# PostgreSQL like the tests), `local_runtime` runs real sandboxes (it needs bubblewrap), and
# `slurm` a real Slurm cluster (root, slurm-wlm, slurmrestd, munge), `images` Debian's
# docker-registry, skopeo, umoci and busybox-static, `apps` nginx, `folders` nginx, curl
# and root (folder images). `versus` then sets each
# document the Sessions page sends (read from web/src) beside PostGraphile's, and
# `page_events` its live events; the whole run takes about two hours.
#
#   bash benches/run.sh [--runs N]      # default 3 runs per figure
set -euo pipefail
cd "$(dirname "$0")/.."
# Every benchmark binary first, two at a time (each links the whole server with LTO).
cargo bench --locked --quiet --no-run
for bench in scheduler launch panels sessions_list subscriptions export hardening versus local_runtime slurm web_page images apps folders; do
  echo "### $bench"
  echo
  cargo bench --locked --quiet --bench "$bench" -- "$@"
  echo
done
for page in page viewer panel detail; do
  echo "### versus --page $page"
  echo
  cargo bench --locked --quiet --bench versus -- --page "$page" "$@"
  echo
done
echo "### page_events"
echo
cargo bench --locked --quiet --bench page_events -- "$@"

