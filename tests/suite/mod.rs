//! Integration tests, one file per area.

mod boundary;
mod cli;
mod daemon;
mod docker;
mod host;
mod mcp;
mod output;
mod ready;
mod recovery;
mod safety;
mod tui;
