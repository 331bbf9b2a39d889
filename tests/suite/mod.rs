//! Integration tests, one file per area.

mod cli;
mod host;
mod output;
mod ready;
