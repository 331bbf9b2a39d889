#!/usr/bin/env bash
# Benchmarks with baselines measured in the same run; prints a markdown table.
#   bash bench/run.sh                 # everything (ingest moves 4 × 1 GiB)
#   bash bench/run.sh start spawn     # a subset: start network ready detect spawn ingest memory ps
#   BERTH_BENCH_BYTES=268435456 bash bench/run.sh ingest
set -euo pipefail
cd "$(dirname "$0")/.."
bash images/build.sh >/dev/null
cargo build --release --quiet
echo "# $(date -u +%Y-%m-%dT%H:%MZ) · $(nproc) cores · $(free -g | awk '/Mem:/{print $2}') GiB · engine $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})')"
cargo bench --quiet --bench berth -- "$@"
