#!/usr/bin/env bash
# Mutation testing of the pure cores: the scheduler, slot arithmetic and resource requests,
# status transitions, the strictest-limit rule and visibility's decisions. Each mutant is
# a small change to one function; a mutant the unit tests do not notice "survives".
#
#   bash benches/mutants.sh            # installs cargo-mutants when missing
#
# Not part of CI: every mutant is a rebuild of the library's tests (tens of minutes on two
# cores). Results land in mutants.out/ (outcomes.json, caught.txt, missed.txt); the share
# caught and the survivors are recorded in BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-mutants >/dev/null || cargo install --locked cargo-mutants
files=(
  src/domain/scheduler.rs
  src/domain/slots.rs
  src/domain/status.rs
  src/domain/panels.rs
  src/domain/visibility.rs
  src/domain/auth.rs
)
args=()
for f in "${files[@]}"; do args+=(--file "$f"); done
# Only the pure decisions: functions that take no database (the others are exercised by
# the integration tests on both databases, which are too slow to run per mutant).
re='scheduler\.rs|slots\.rs|status\.rs|strictest|group_figures|group_layer|may_see_session|administers_domain|hash_token'
exclude='in (session_scope|visible_session|visible_launch_group|resource_panel)\b'
# Without debug info each mutant builds in about half the time.
export CARGO_PROFILE_DEV_DEBUG=0
exec cargo mutants "${args[@]}" --re "$re" --exclude-re "$exclude" --timeout 120 "$@" -- --lib
