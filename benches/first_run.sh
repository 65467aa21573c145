#!/usr/bin/env bash
# The README's first command on a fresh clone: `cargo run --release -- serve --demo` until
# `/healthz` answers. Clones this checkout's HEAD into a temporary directory (crates come
# from Cargo's download cache; nothing is built beforehand), prints the seconds to a
# serving demo and cargo's own `Finished` line, then stops the server. Nothing else should
# run meanwhile: the figure is the machine's.
#
#   bash benches/first_run.sh
set -euo pipefail
dir=$(mktemp -d)
trap 'pkill -f "$dir/sessiond/target/release/sessiond" || true; rm -rf "$dir"' EXIT
git clone -q "$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)" "$dir/sessiond"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cd "$dir/sessiond"
start=$(date +%s.%N)
cargo run --release -- serve --demo --bind "127.0.0.1:$port" > "$dir/serve.log" 2>&1 &
until curl -sf "http://127.0.0.1:$port/healthz" > /dev/null; do
  kill -0 $! 2> /dev/null || { cat "$dir/serve.log"; exit 1; }
  sleep 0.2
done
end=$(date +%s.%N)
echo "commit $(git rev-parse --short HEAD): $(python3 -c "print(round($end - $start, 1))") s to a serving demo"
grep -E "Finished" "$dir/serve.log"
