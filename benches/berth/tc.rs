//! testcontainers-rs as the peer of `berth run -d --ready-http /`: the
//! library a Rust test suite would use to start a server container and wait
//! until it answers HTTP 200. In-process (no client process to start), on a
//! runtime of its own; the container is removed after each run, untimed.

use std::time::{Duration, Instant};

use testcontainers::core::wait::HttpWaitStrategy;
use testcontainers::core::{IntoContainerPort, WaitFor};
use testcontainers::runners::AsyncRunner;
use testcontainers::{GenericImage, ImageExt};

pub struct Peer {
    rt: tokio::runtime::Runtime,
}

impl Peer {
    pub fn new() -> Peer {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        Peer { rt }
    }

    /// Start busybox httpd on 8080 (published on an engine-chosen host
    /// port) and wait for `GET /` → 200, polling every `poll` (the
    /// library's default, 100 ms, when `None`).
    pub fn start_and_wait(&self, poll: Option<Duration>) -> Duration {
        self.rt.block_on(async {
            let mut http = HttpWaitStrategy::new("/")
                .with_port(8080.tcp())
                .with_expected_status_code(200u16);
            if let Some(poll) = poll {
                http = http.with_poll_interval(poll);
            }
            let t = Instant::now();
            let container = GenericImage::new("berth/sandbox", "latest")
                .with_exposed_port(8080.tcp())
                .with_wait_for(WaitFor::http(http))
                .with_cmd(["httpd", "-f", "-p", "8080", "-h", "/www"])
                .start()
                .await
                .expect("testcontainers starts httpd");
            let took = t.elapsed();
            container.rm().await.expect("testcontainers removes it");
            took
        })
    }
}
