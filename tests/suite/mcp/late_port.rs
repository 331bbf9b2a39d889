//! `wait_for_port` on a berth container's published port is not fooled by
//! the engine's proxy: with a server that binds 3 s after the container
//! starts, both the MCP tool and `POST /v1/wait_for_port` answer only once
//! the server inside listens (checked with a real HTTP request right after).

use std::time::{Duration, Instant};

use serde_json::json;

use super::{Mcp, job_in, url_port};
use crate::common::http_get;

#[tokio::test]
async fn wait_for_port_on_a_late_binding_container_answers_after_the_bind_10_of_10() {
    let mcp = Mcp::start("all").await;
    let config = berth::Config::isolated(mcp.dir.path().join("state"), &mcp.instance);
    let api = berth::api::client::Client::connect(&config)
        .await
        .expect("instance socket");
    for round in 1..=10 {
        let t = mcp
            .ok(
                "run",
                json!({"command": "sleep 3; echo binding; exec httpd -f -p 8080 -h /www",
                       "background": true, "ports": ["8080"], "runner": "docker",
                       "image": "berth/sandbox:latest"}),
            )
            .await;
        let (id, port) = (job_in(&t), url_port(&t));
        let started = Instant::now();
        let req = berth::api::WaitForPortRequest {
            host: "127.0.0.1".into(),
            port,
            timeout: Some(30.0),
        };
        let (via_mcp, via_api) = tokio::join!(
            async {
                let a = mcp
                    .ok("wait_for_port", json!({"port": port, "timeout": 30}))
                    .await;
                (a, http_get(port), started.elapsed())
            },
            async {
                let w = api.wait_for_port(&req).await.expect("API wait_for_port");
                (w, http_get(port), started.elapsed())
            }
        );
        let (text, http, after) = via_mcp;
        assert!(
            text.contains("accepts connections") && text.contains(&id),
            "round {round}: {text}"
        );
        assert!(
            http.lines()
                .next()
                .is_some_and(|l| l.starts_with("HTTP/1.") && l.contains(" 200")),
            "round {round}: MCP answered before the bind ({after:?}): {http}"
        );
        let (w, http, after) = via_api;
        assert!(w.outcome.is_ready(), "round {round}: {w:?}");
        assert_eq!(w.job.as_ref().map(|j| j.to_string()), Some(id.clone()));
        assert!(
            http.lines()
                .next()
                .is_some_and(|l| l.starts_with("HTTP/1.") && l.contains(" 200")),
            "round {round}: API answered before the bind ({after:?}): {http}"
        );
        assert!(
            after >= Duration::from_secs(2),
            "round {round}: ready after only {after:?}"
        );
        mcp.ok("kill", json!({"id": id, "grace": 0})).await;
    }
}
