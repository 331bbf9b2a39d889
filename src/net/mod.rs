//! How container jobs talk to the world, beside the engine: berth's port
//! forwarder (`forward.rs`: 127.0.0.1 → the job, TCP through `relay.rs`'s
//! in-kernel splice, UDP in `udp.rs`), the egress proxy (`proxy/`) and its
//! allowlist (`allow.rs`). Depends only on `model` and `error`, so every runner can
//! use it.

pub mod allow;
pub mod bound;
pub mod forward;
pub mod proxy;
pub mod relay;
mod udp;

pub use allow::{Allowlist, DEFAULT_EGRESS_ALLOW};
pub use forward::{BoundPorts, Forwarder, Upstream, Want};
pub use proxy::{Denial, DenialFn, Policy, Proxy};

/// The runtime of berth's forwarders and proxies: one thread. A relay
/// hands its bytes to the kernel (`splice`), so the thread mostly waits;
/// a second worker bought little (two 1 GiB downloads at once: 1.52–1.56
/// GB/s with one, 1.54–1.69 with two) and cost wake-ups between the two
/// when the cores are busy (requests a second beside two CPU burners:
/// 0.45–0.98× of docker-proxy with two workers, 0.68–1.28× with one).
pub fn runtime() -> crate::error::Result<&'static tokio::runtime::Handle> {
    static RUNTIME: std::sync::OnceLock<std::result::Result<tokio::runtime::Runtime, String>> =
        std::sync::OnceLock::new();
    let made = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("berth-net")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    });
    match made {
        Ok(rt) => Ok(rt.handle()),
        Err(e) => Err(crate::error::Error::Listen {
            what: "berth's network threads".into(),
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            source: std::io::Error::other(e.clone()),
        }),
    }
}
