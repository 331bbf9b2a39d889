//! Integration tests, one file per area.

mod cli;
mod daemon;
mod docker;
mod host;
mod output;
mod ready;
