//! How container jobs talk to the world, beside the engine: the egress
//! allowlist (`allow.rs`). Depends only on `model` and `error`, so every
//! runner can use it.

pub mod allow;

pub use allow::{Allowlist, DEFAULT_EGRESS_ALLOW};
