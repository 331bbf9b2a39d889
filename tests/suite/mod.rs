//! Integration tests, one file per area.

mod cap;
mod cli;
mod daemon;
mod docker;
mod exits;
mod host;
mod mcp;
mod output;
mod ready;
mod recovery;
mod safety;
mod tui;
