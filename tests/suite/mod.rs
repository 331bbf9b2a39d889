//! Integration tests, one file per area.

mod cli;
mod daemon;
mod host;
mod output;
mod ready;
