//! How container jobs talk to the world, beside the engine: berth's port
//! forwarder (`forward.rs`: 127.0.0.1 → the job, TCP through `relay.rs`'s
//! in-kernel splice, UDP in `udp.rs`), the egress proxy (`proxy/`) and its
//! allowlist (`allow.rs`). Depends only on `model` and `error`, so every runner can
//! use it.

pub mod allow;
pub mod forward;
pub mod proxy;
pub mod relay;
mod udp;

pub use allow::{Allowlist, DEFAULT_EGRESS_ALLOW};
pub use forward::{Bound, Forwarder, Upstream, Want};
pub use proxy::{Denial, DenialFn, Policy, Proxy};
