//! Integration tests, one file per area.

mod architecture;
mod boundary;
mod bounds;
mod cap;
mod cli;
mod context;
mod daemon;
mod docker;
mod escape;
mod exits;
mod host;
mod images;
mod inert;
mod mcp;
mod network;
mod output;
mod private;
mod project_image;
mod ready;
mod recovery;
mod retention;
mod safety;
mod scoped;
mod secrets;
mod trust;
mod tui;
