//! Jobs on a three-node swarm (`scripts/swarm.sh`, made and removed here;
//! root), each beside its baselines in the same run, in turns: the same
//! job on the local engine, and the floor done by hand through the
//! manager's API: `docker service create` of the same one-replica service,
//! its task polled every 20 ms until it ended (start-to-exit) or until it
//! runs and its host-mode port answers HTTP (start-to-ready). berth's
//! figures include its client's start and the workspace it sends.

use std::process::Command;
use std::time::{Duration, Instant};

use berth::runner::docker::DockerClient;
use bollard::models::{
    EndpointPortConfig, EndpointPortConfigPublishModeEnum, EndpointSpec, NetworkAttachmentConfig,
    NetworkCreateRequest, ServiceSpec, ServiceSpecMode, ServiceSpecModeReplicated, TaskSpec,
    TaskSpecContainerSpec, TaskSpecRestartPolicy, TaskSpecRestartPolicyConditionEnum, TaskState,
};

use super::{Daemon, SANDBOX, d_run, interleaved, row};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/swarm.sh");
const POLL: Duration = Duration::from_millis(20);

/// The swarm, taken down when dropped.
struct Cluster {
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl Cluster {
    fn up() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let o = Command::new("bash")
            .arg(SCRIPT)
            .arg("up")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "swarm.sh up: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let env = String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let st = Command::new("bash")
            .arg(SCRIPT)
            .arg("load")
            .arg(dir.path())
            .arg(SANDBOX)
            .status();
        assert!(st.unwrap().success(), "swarm.sh load");
        Cluster { dir, env }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(SCRIPT)
            .arg("down")
            .arg(self.dir.path())
            .status();
    }
}

/// One replica of `argv`, never restarted, `port` published in host mode,
/// on `network` (an internal overlay, as berth's job without ports) or none.
fn service(argv: &[&str], port: Option<u16>, network: Option<&str>) -> ServiceSpec {
    ServiceSpec {
        task_template: Some(TaskSpec {
            container_spec: Some(TaskSpecContainerSpec {
                image: Some(SANDBOX.into()),
                command: Some(argv.iter().map(|a| a.to_string()).collect()),
                init: Some(true),
                ..Default::default()
            }),
            restart_policy: Some(TaskSpecRestartPolicy {
                condition: Some(TaskSpecRestartPolicyConditionEnum::NONE),
                ..Default::default()
            }),
            networks: network.map(|n| {
                vec![NetworkAttachmentConfig {
                    target: Some(n.to_string()),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }),
        mode: Some(ServiceSpecMode {
            replicated: Some(ServiceSpecModeReplicated { replicas: Some(1) }),
            ..Default::default()
        }),
        endpoint_spec: port.map(|p| EndpointSpec {
            ports: Some(vec![EndpointPortConfig {
                target_port: Some(i64::from(p)),
                publish_mode: Some(EndpointPortConfigPublishModeEnum::HOST),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// By hand: create, poll until the task ended; the service removed after (untimed).
async fn by_hand_exit(docker: &DockerClient, network: Option<&str>) -> Duration {
    let t = Instant::now();
    let id = docker
        .create_service(service(&["true"], None, network))
        .await
        .unwrap();
    loop {
        let tasks = docker.service_tasks(&id).await.unwrap();
        let state = tasks
            .first()
            .and_then(|t| t.status.as_ref())
            .and_then(|s| s.state);
        if matches!(
            state,
            Some(TaskState::COMPLETE | TaskState::FAILED | TaskState::REJECTED)
        ) {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    let took = t.elapsed();
    let _ = docker.remove_service(&id).await;
    took
}

/// By hand: create an httpd, poll until its task runs with its port, then
/// until that port answers HTTP.
async fn by_hand_ready(docker: &DockerClient) -> Duration {
    let t = Instant::now();
    let argv = ["httpd", "-f", "-p", "8080", "-h", "/www"];
    let id = docker
        .create_service(service(&argv, Some(8080), None))
        .await
        .unwrap();
    let addr = loop {
        let tasks = docker.service_tasks(&id).await.unwrap();
        let task = tasks.first();
        let status = task.and_then(|t| t.status.as_ref());
        let port = status
            .and_then(|s| s.port_status.as_ref())
            .and_then(|p| p.ports.as_ref())
            .and_then(|p| p.first())
            .and_then(|p| p.published_port);
        if let (Some(TaskState::RUNNING), Some(port), Some(node)) = (
            status.and_then(|s| s.state),
            port,
            task.and_then(|t| t.node_id.clone()),
        ) {
            let node = docker.inspect_node(&node).await.unwrap();
            let ip = node.status.and_then(|s| s.addr).unwrap();
            break format!("{ip}:{port}");
        }
        tokio::time::sleep(POLL).await;
    };
    while !http_ok(&addr) {
        tokio::time::sleep(POLL).await;
    }
    let took = t.elapsed();
    let _ = docker.remove_service(&id).await;
    took
}

fn http_ok(addr: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.write_all(b"GET / HTTP/1.0\r\n\r\n");
    let mut head = [0u8; 12];
    // `HTTP/1.x 200`: busybox's httpd answers 1.1 to a 1.0 request.
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.") && &head[9..12] == b"200"
}

/// berth's start-to-ready of the same httpd, then a kill (untimed).
fn berth_ready(d: &Daemon, runner: &str) -> Duration {
    let t = Instant::now();
    let v = d.json(&[
        "run",
        "-d",
        "--runner",
        runner,
        "--image",
        SANDBOX,
        "-p",
        "8080",
        "--ready-http",
        "/",
        "--",
        "httpd",
        "-f",
        "-p",
        "8080",
        "-h",
        "/www",
    ]);
    let took = t.elapsed();
    assert_eq!(v["ready"]["outcome"], "ready", "{v}");
    let id = v["job"]["id"].as_str().unwrap().to_string();
    let _ = d.cli(&["kill", &id, "--grace", "0"]).status();
    took
}

pub fn bench_swarm(local: &Daemon) {
    let n = 10;
    let cluster = Cluster::up();
    let env: Vec<(&str, &str)> = cluster
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let d = Daemon::start_with("bench-swarm", &env);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let lookup = |k: &str| cluster.env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let endpoint = berth::runner::docker::endpoint::resolve(lookup, None);
    let docker = rt
        .block_on(DockerClient::connect(&endpoint, Duration::from_secs(10)))
        .unwrap();
    // berth's job without ports is on an internal overlay: the by-hand
    // floor is measured on one too, and with no network at all.
    let overlay = NetworkCreateRequest {
        name: "bench-internal".into(),
        driver: Some("overlay".into()),
        internal: Some(true),
        ..Default::default()
    };
    let net = rt.block_on(docker.create_network(overlay)).unwrap().id;
    let on_swarm = ["run", "--runner", "swarm", "--image", SANDBOX, "--", "true"];
    let on_local = ["run", "--runner", "docker", "--image", SANDBOX, "--", "true"];
    let _warm = (d_run(&d, &on_swarm), d_run(local, &on_local));
    let _warm = rt.block_on(by_hand_exit(&docker, Some(&net)));
    let mut s = || d_run(&d, &on_swarm);
    let mut l = || d_run(local, &on_local);
    let mut h = || rt.block_on(by_hand_exit(&docker, Some(&net)));
    let mut p = || rt.block_on(by_hand_exit(&docker, None));
    let [s, l, h, p] = interleaved(n, [&mut s, &mut l, &mut h, &mut p]);
    let what = "swarm start-to-exit of `true`, `run --runner swarm` (p50 / p95 ms)";
    row(
        what,
        s,
        h,
        "service create + polling by hand, on an internal overlay",
    );
    row(what, s, p, "the same by hand with no network");
    row(what, s, l, "same job on the local engine");
    let _ = rt.block_on(docker.remove_network(&net));

    let mut s = || berth_ready(&d, "swarm");
    let mut l = || berth_ready(local, "docker");
    let mut h = || rt.block_on(by_hand_ready(&docker));
    let [s, l, h] = interleaved(n, [&mut s, &mut l, &mut h]);
    row(
        "swarm httpd start-to-ready with a port (p50 / p95 ms)",
        s,
        h,
        "service create + polling + GET by hand",
    );
    row(
        "swarm httpd start-to-ready with a port (p50 / p95 ms)",
        s,
        l,
        "same job on the local engine",
    );
}
