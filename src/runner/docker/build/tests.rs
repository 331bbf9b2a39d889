//! Builds against the real engine: a context that changes while it is
//! sent, and a step found over its process limit when the limit lands.

use super::*;

async fn engine() -> DockerClient {
    let limit = std::time::Duration::from_secs(5);
    DockerClient::connect(super::super::Endpoint::current(), limit)
        .await
        .expect("a Docker engine (see runner/docker/tests.rs)")
}

/// A context file that shrank between the walk and the send: the build
/// fails in berth's words (not the engine's about a request cut short)
/// and leaves no tag. Talks to the real engine.
#[tokio::test]
async fn a_context_changed_while_sent_is_said_in_berths_words() {
    let docker = engine().await;
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::write(
        ws.join("Dockerfile"),
        "FROM berth/sandbox:latest\nCOPY a.txt /a.txt\n",
    )
    .unwrap();
    std::fs::write(ws.join("a.txt"), vec![b'x'; 600 << 10]).unwrap();
    let build = ProjectBuild {
        dockerfile: ws.join("Dockerfile"),
        context: ws.to_path_buf(),
        args: Default::default(),
        declared_in: ws.join("berth.toml"),
    };
    let ctx = walk(ws, &build).await.unwrap();
    std::fs::write(ws.join("a.txt"), "short").unwrap();
    let tag = format!("berth-project/changed-{}:test", std::process::id());
    let confined = Confined {
        network: "none".into(),
        memory: None,
        cpu_quota: None,
        pids: None,
        proxy_args: Vec::new(),
        proxy: None,
    };
    let quiet: BuildProgressFn = Arc::new(|_| {});
    let labels = labels(WORKSPACE_LABEL, ws, &ctx.hash);
    let err = run_build(&docker, &build, ctx, &tag, labels, &quiet, &confined)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("changed while berth read it"), "{err}");
    assert!(err.contains("a.txt") && !err.contains("hyper"), "{err}");
    assert!(!present(&docker, &tag).await.unwrap(), "no tag is left");
}

/// A container (standing in for a build step) holding `n` processes
/// once it printed `forked`; removed when dropped.
struct Step(String);

impl Step {
    fn holding(n: u32) -> Step {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let script = format!("i=0; while [ $i -lt {n} ]; do sleep 300 & i=$((i+1)); done; echo forked; wait");
        let out = Command::new("docker")
            .args(["run", "-d", "--label", "berth.test=build-step"])
            .args(["berth/sandbox:latest", "sh", "-c", &script])
            .output()
            .expect("docker");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let step = Step(String::from_utf8_lossy(&out.stdout).trim().to_string());
        let mut logs = Command::new("docker")
            .args(["logs", "-f", &step.0])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(logs.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "forked");
        let _ = logs.kill();
        let _ = logs.wait();
        step
    }

    fn running(&self) -> bool {
        let out = std::process::Command::new("docker")
            .args(["inspect", "-f", "{{.State.Running}}", &self.0])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "true"
    }
}

impl Drop for Step {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker")
            .args(["rm", "-f", &self.0])
            .output();
    }
}

/// The limit lands after a step started: a step already over it then
/// (a fork loop that outran berth) is killed and counted; one under it
/// keeps running, limited. Talks to the real engine.
#[tokio::test]
async fn a_step_already_over_its_process_limit_is_stopped_and_one_under_it_is_not() {
    let docker = engine().await;
    let (over, under) = (Step::holding(100), Step::holding(10));
    let counted = limit_step(&docker, &over.0, 64).await;
    assert!(counted.is_some_and(|n| n > 100), "{counted:?}");
    let code = docker.wait_container(&over.0, Default::default()).next().await;
    assert_eq!(code.map(|c| c.unwrap()), Some(137), "killed");
    assert_eq!(limit_step(&docker, &under.0, 64).await, None);
    assert!(under.running());
    let pids = docker
        .inspect_container(&under.0)
        .await
        .unwrap()
        .host_config
        .unwrap();
    assert_eq!(pids.pids_limit, Some(64));
}
