//! `network = "project"`: the container jobs of one project share one
//! network namespace (a pod, `runner/docker/pod/`), so a CLI job reaches a
//! sibling's server by its label; a job of the project on its own
//! network (`isolated`) reaches neither its localhost nor that label; the
//! pod goes with its last job.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{Daemon, eventually};

const DOCKER_DEV: &[(&str, &str)] = &[("BERTH_RUNNER", "docker"), ("BERTH_IMAGE", "berth/dev:latest")];

/// `berth ARGS` on `d`'s instance, as docker jobs from berth/dev.
fn berth(d: &Daemon, args: &[&str]) -> (i32, String) {
    let o = d
        .cli()
        .envs(DOCKER_DEV.iter().copied())
        .args(args)
        .output()
        .expect("run berth");
    let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    (o.status.code().unwrap_or(-1), text)
}

fn pod_pauses(instance: &str) -> usize {
    let o = Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=berth.instance={instance}"),
        ])
        .args(["--filter", "label=berth.pod"])
        .output()
        .expect("docker CLI");
    String::from_utf8_lossy(&o.stdout).lines().count()
}

#[tokio::test]
async fn a_projects_jobs_reach_each_other_by_label_on_network_project() {
    let d = Daemon::start_with(DOCKER_DEV);
    let (code, out) = berth(
        &d,
        &[
            "run",
            "--json",
            "-d",
            "--network",
            "project",
            "--label",
            "web",
            "--",
            "python3",
            "-m",
            "http.server",
            "8000",
        ],
    );
    assert_eq!(code, 0, "{out}");
    let web: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let id = web["job"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{out}"))
        .to_string();
    assert_eq!(pod_pauses(&d.instance), 1);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, out) = berth(
            &d,
            &["run", "--network", "project", "--", "curl", "-sf", "web:8000"],
        );
        if code == 0 && out.contains("Directory listing") {
            break;
        }
        assert!(Instant::now() < deadline, "web:8000 never answered: {out}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The project's job on a network of its own reaches neither.
    for target in ["localhost:8000", "web:8000"] {
        let (_, out) = berth(
            &d,
            &[
                "run",
                "--",
                "curl",
                "-s",
                "--noproxy",
                "*",
                "--max-time",
                "3",
                target,
            ],
        );
        assert!(
            !out.contains("Directory listing"),
            "an isolated job reached {target}: {out}"
        );
    }
    // The pod goes with its last job.
    let (code, out) = berth(&d, &["kill", &id]);
    assert_eq!(code, 0, "{out}");
    let instance = d.instance.clone();
    eventually(Duration::from_secs(15), "the project's pod is gone", || {
        pod_pauses(&instance) == 0
    })
    .await;
}
