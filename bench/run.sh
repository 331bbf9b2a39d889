#!/usr/bin/env bash
# Benchmarks with baselines measured in the same run; prints a markdown table.
#   bash bench/run.sh                 # everything (ingest moves 4 × 1 GiB)
#   bash bench/run.sh start spawn     # a subset: start network ready detect spawn ingest memory ps
#   BERTH_BENCH_BYTES=268435456 bash bench/run.sh ingest
#   bash bench/run.sh finished output  # output rows beside raw redirections and pueue
#   bash bench/run.sh start ready      # containers beside docker run --rm, testcontainers-rs
#   BERTH_BENCH_BURN=2 bash bench/run.sh relay   # the relay beside docker-proxy, two busy threads
#   BERTH_BENCH_BEFORE=/path/to/older/berth bash bench/run.sh start   # adds that build's row
#   bash bench/run.sh warm             # warm_pool: a spare taken, beside docker run --rm and cold
#   bash bench/run.sh calls            # engine requests per container job, beside docker run --rm
# pueue: taken from BERTH_BENCH_PUEUE_DIR or PATH; BERTH_BENCH_INSTALL_PUEUE=1
# installs it into a temporary root first (`cargo install pueue`); without it
# the pueue rows print a note instead.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${BERTH_BENCH_INSTALL_PUEUE:-}" = 1 ] && [ -z "${BERTH_BENCH_PUEUE_DIR:-}" ]; then
    pueue_root=$(mktemp -d)
    trap 'rm -rf "$pueue_root"' EXIT
    cargo install --quiet pueue --root "$pueue_root"
    export BERTH_BENCH_PUEUE_DIR="$pueue_root/bin"
fi
bash images/build.sh >/dev/null
cargo build --release --quiet
echo "# $(date -u +%Y-%m-%dT%H:%MZ) · $(nproc) cores · $(free -g | awk '/Mem:/{print $2}') GiB · engine $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})')"
cargo bench --quiet --bench berth -- "$@"
