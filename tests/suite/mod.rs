//! Integration tests, one file per area.

mod boundary;
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
mod retention;
mod safety;
mod tui;
