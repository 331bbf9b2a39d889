//! Integration tests, one file per area.

mod bounds;
mod cli;
mod daemon;
mod docker;
mod escape;
mod host;
mod mcp;
mod output;
mod private;
mod ready;
mod recovery;
mod safety;
mod tui;
