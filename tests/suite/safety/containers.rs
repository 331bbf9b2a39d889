//! Container hardening as a job meets it: no capabilities, no new
//! privileges, nothing written outside the workspace mount reaches the host,
//! checked from inside the container and by `docker inspect`; and the opt-in
//! read-only root file system and `network: none`.

use std::path::Path;
use std::time::Duration;

use berth::JobSpec;

use super::{docker, host};
use crate::common::manager;

/// A container job's own view of its privileges.
const PROBE: &str = "grep -E '^(CapEff|NoNewPrivs):' /proc/self/status";

#[tokio::test]
async fn containers_run_without_capabilities_or_new_privileges_and_cannot_leave_the_mount() {
    let t = manager();
    let escaped = t.dir.path().join("escaped");
    let spec = docker(JobSpec::shell(format!(
        "{PROBE}; touch /tmp/escaped-{pid} && echo wrote; touch ../escaped /escaped-{pid} 2>/dev/null; echo done; sleep 30",
        pid = std::process::id()
    )))
    .with_port(8080)
    .background();
    let job = t.manager.start(spec).await.unwrap();
    let job2 = job.clone();
    crate::common::eventually(Duration::from_secs(30), "the probe ran", move || {
        job2.logs(&Default::default())
            .map(|p| p.lines.iter().any(|l| l.text == "done"))
            .unwrap_or(false)
    })
    .await;
    let text: Vec<String> = job.output_lines().unwrap();
    assert!(
        text.contains(&"CapEff:\t0000000000000000".to_string()),
        "{text:?}"
    );
    assert!(text.contains(&"NoNewPrivs:\t1".to_string()), "{text:?}");
    assert!(
        text.contains(&"wrote".to_string()),
        "it wrote inside the container: {text:?}"
    );
    assert!(
        !escaped.exists(),
        "a file written outside the mount is not on the host"
    );
    let pid = std::process::id();
    assert!(!Path::new(&format!("/escaped-{pid}")).exists());
    assert!(!Path::new(&format!("/tmp/escaped-{pid}")).exists());

    let cid = job.info().unwrap().container_id.unwrap();
    let c = inspect(&cid);
    let hc = &c["HostConfig"];
    assert_eq!(hc["CapDrop"], serde_json::json!(["ALL"]));
    assert!(
        hc["CapAdd"].is_null() || hc["CapAdd"] == serde_json::json!([]),
        "{}",
        hc["CapAdd"]
    );
    assert!(hc["SecurityOpt"].to_string().contains("no-new-privileges"));
    assert_eq!(hc["Privileged"], false);
    assert!(hc["PidsLimit"].as_i64().unwrap() > 0);
    assert_eq!(hc["Memory"], hc["MemorySwap"]);
    assert_eq!(hc["ReadonlyRootfs"], false, "read-only is opt-in");
    // berth forwards the port from 127.0.0.1: the engine publishes nothing.
    assert!(hc["PortBindings"].as_object().is_none_or(|b| b.is_empty()));
    // The workspace, and the job's own /etc files read-only: nothing else.
    let mounts = c["Mounts"].as_array().unwrap();
    let ws = std::fs::canonicalize(t.workspace()).unwrap();
    let (workspace, etc): (Vec<_>, Vec<_>) = mounts.iter().partition(|m| m["Source"] == ws.to_str().unwrap());
    assert_eq!(workspace.len(), 1, "the workspace: {mounts:?}");
    for m in &etc {
        let target = m["Destination"].as_str().unwrap();
        assert!(
            ["/etc/hosts", "/etc/hostname", "/etc/resolv.conf"].contains(&target),
            "{m}"
        );
        assert_eq!(m["RW"], false, "{m}");
    }
    assert!(
        !c.to_string().contains("docker.sock"),
        "no engine socket inside a job"
    );
    job.kill().await.unwrap();
}

/// `docker inspect` of a container that must exist.
fn inspect(id: &str) -> serde_json::Value {
    let o = std::process::Command::new("docker")
        .args(["inspect", id])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()[0].clone()
}

#[tokio::test]
async fn read_only_root_and_no_network_are_opt_in() {
    let t = manager();
    let mut spec = docker(JobSpec::shell(
        "touch /x 2>/dev/null && echo root-writable; touch /tmp/x && echo tmp-writable; \
         touch ws-file && echo ws-writable; cat /proc/net/dev | tail -n +3 | cut -d: -f1; \
         grep ' /tmp ' /proc/mounts; sleep 30",
    ))
    .background();
    spec.read_only = true;
    spec.network = Some(berth::model::Network::None);
    let job = t.manager.start(spec).await.unwrap();
    let job2 = job.clone();
    crate::common::eventually(Duration::from_secs(30), "the checks ran", move || {
        job2.logs(&Default::default())
            .map(|p| p.lines.iter().any(|l| l.text.contains(" /tmp ")))
            .unwrap_or(false)
    })
    .await;
    let text: Vec<String> = job
        .logs(&Default::default())
        .unwrap()
        .lines
        .into_iter()
        .map(|l| l.text.trim().to_string())
        .collect();
    assert!(!text.contains(&"root-writable".to_string()), "{text:?}");
    assert!(text.contains(&"tmp-writable".to_string()), "{text:?}");
    assert!(text.contains(&"ws-writable".to_string()), "{text:?}");
    assert!(text.contains(&"lo".to_string()), "{text:?}");
    assert!(
        !text.iter().any(|l| l.starts_with("eth")),
        "no network but loopback: {text:?}"
    );
    assert!(
        text.iter()
            .any(|l| l.contains("tmpfs /tmp") && l.contains("nosuid")),
        "{text:?}"
    );
    let c = inspect(&job.info().unwrap().container_id.unwrap());
    assert_eq!(c["HostConfig"]["ReadonlyRootfs"], true);
    assert_eq!(c["HostConfig"]["NetworkMode"], "none");
    assert_eq!(c["HostConfig"]["Tmpfs"]["/tmp"], "rw,nosuid,nodev,size=64m");
    job.kill().await.unwrap();

    // What cannot hold is refused before anything starts.
    let mut ports = docker(JobSpec::shell("true")).with_port(80);
    ports.network = Some(berth::model::Network::None);
    let err = t.manager.start(ports).await.unwrap_err();
    assert!(err.to_string().contains("cannot publish ports"), "{err}");
    // A network berth does not offer cannot be asked for: the request is
    // refused as it is read, naming the networks there are.
    let odd = serde_json::json!({"shell": "true", "ready": [], "network": "host"});
    let err = serde_json::from_value::<JobSpec>(odd).unwrap_err();
    assert!(
        err.to_string()
            .contains("unknown variant `host`, expected one of `isolated`, `bridge`, `none`"),
        "{err}"
    );
    let mut on_host = host(JobSpec::shell("true"));
    on_host.read_only = true;
    assert!(
        t.manager.start(on_host).await.is_err(),
        "the host runner cannot enforce it"
    );
}
