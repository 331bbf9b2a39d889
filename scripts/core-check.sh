#!/usr/bin/env bash
# The core library builds without its faces: `--no-default-features` must
# compile and lint clean, and pull none of the faces' crates (the HTTP
# server, MCP, the terminal UI, the command-line parser and its anyhow, the
# TLS client of remote engines).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo clippy --no-default-features --lib -- -D warnings
faces='^(axum|rmcp|schemars|ratatui|crossterm|clap|clap_complete|clap_mangen|roff|arboard|anyhow|rustls) '
pulled=$(cargo tree --no-default-features -e normal --prefix none | grep -E "$faces" | sort -u || true)
if [ -n "$pulled" ]; then
    echo "scripts/core-check.sh: the core library (--no-default-features) pulls a face's crate:" >&2
    echo "$pulled" >&2
    exit 1
fi
echo "scripts/core-check.sh: the core builds without cli, daemon, mcp, tui, remote-tls"
