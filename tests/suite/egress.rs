//! What a job reaches outside and what it shares with later jobs, against
//! the real engine: under `egress = "proxy"` (the default) a job reaches an
//! allowed host through berth's proxy (plain HTTP and CONNECT) and not
//! another (denied in the security log and as an event), and nothing
//! directly; under `none` not even the proxy; a job cannot ask for looser
//! egress than its project's; and a job joined to a pause container has
//! its own `/etc/hosts`, which no later job on that network sees.

use std::time::Duration;

use berth::model::Egress;
use berth::{EventKind, JobSpec};

use crate::common::lan::LanHost;
use crate::common::{eventually, manager_with};

/// The image with curl (the sandbox's busybox has no proxy-aware client with CONNECT).
const DEV: &str = "berth/dev:latest";

fn in_dev(spec: JobSpec) -> JobSpec {
    spec.with_runner(berth::RunnerChoice::Docker).with_image(DEV)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_proxy_egress_a_job_reaches_an_allowed_host_and_not_another() {
    let mut allowed = LanHost::new();
    allowed.serve_http(80, "the allowed page");
    let mut other = LanHost::new();
    other.serve_http(80, "the other page");
    let (a, b) = (allowed.addr, other.addr);
    let t = manager_with(|mut c| {
        c.egress_allow = vec!["defaults".into(), a.to_string()];
        c
    });
    assert_eq!(t.manager.config().egress, Egress::Proxy, "the default");
    let script = format!(
        "curl -s -m 10 http://{a}/; echo; \
         curl -s -m 10 --proxytunnel http://{a}/; echo; \
         curl -s -m 10 -o /dev/null -w '%{{http_code}}\\n' http://{b}/; \
         curl -s -m 10 -o /dev/null -w '%{{http_connect}}\\n' --proxytunnel http://{b}/; \
         if curl -s -m 3 --noproxy '*' http://{a}/ >/dev/null; then echo DIRECT REACHED; else echo DIRECT BLOCKED; fi"
    );
    let job = t.manager.start(in_dev(JobSpec::shell(script))).await.unwrap();
    let end = job.wait_end().await.unwrap();
    assert_eq!(end.exit_code, Some(0), "{:?}", job.output_lines());
    assert_eq!(
        job.output_lines().unwrap(),
        [
            "the allowed page",
            "the allowed page",
            "403",
            "403",
            "DIRECT BLOCKED"
        ]
    );
    assert_eq!(end.limits.egress.as_deref(), Some("proxy"));

    // Both denials are in the security log, in the filter's shape.
    let log = std::fs::read_to_string(t.manager.config().instance_dir().join("security.log")).unwrap();
    let denied: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &serde_json::Value| v["kind"] == "egress")
        .collect();
    let requests: Vec<&str> = denied.iter().map(|v| v["matched"].as_str().unwrap()).collect();
    assert_eq!(requests, [format!("GET {b}:80"), format!("CONNECT {b}:80")]);
    assert_eq!(denied[0]["blocked"], true);
    assert_eq!(denied[0]["client"], job.id.as_str());
    assert!(
        denied[0]["reason"]
            .as_str()
            .unwrap()
            .contains("not in egress_allow"),
        "{}",
        denied[0]
    );
    // And events the agent sees.
    let events: Vec<String> = t
        .manager
        .events(0, 1000)
        .into_iter()
        .filter(|e| e.job == job.id)
        .filter_map(|e| match e.kind {
            EventKind::EgressDenied { request, .. } => Some(request),
            _ => None,
        })
        .collect();
    assert_eq!(events, [format!("GET {b}:80"), format!("CONNECT {b}:80")]);
    t.manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn egress_none_reaches_nothing_and_a_job_cannot_loosen_its_projects_egress() {
    let mut lan = LanHost::new();
    lan.serve_http(80, "page");
    let a = lan.addr;
    let t = manager_with(|mut c| {
        c.egress_allow = vec![a.to_string()];
        c
    });
    // A job may tighten: no proxy, no way out.
    let mut spec = in_dev(JobSpec::shell(format!(
        "echo \"proxy=${{http_proxy:-unset}}\"; if curl -s -m 3 --noproxy '*' http://{a}/ >/dev/null; then echo REACHED; else echo BLOCKED; fi"
    )));
    spec.egress = Some(Egress::None);
    let job = t.manager.start(spec).await.unwrap();
    job.wait_end().await.unwrap();
    assert_eq!(job.output_lines().unwrap(), ["proxy=unset", "BLOCKED"]);
    // Never loosen: refused with one line, nothing started.
    let mut loose = in_dev(JobSpec::argv(["true"]));
    loose.egress = Some(Egress::All);
    let err = t.manager.start(loose).await.err().unwrap().to_string();
    assert!(
        err.contains("looser than this project's `proxy`") && !err.contains('\n'),
        "{err}"
    );
    t.manager.shutdown().await;
}

/// The red team's poisoning, played as root (as they did): a job joined to
/// a pause container appends to `/etc/hosts`; the next job joined to the
/// same pause (same network, any project) must not see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_job_never_sees_an_earlier_jobs_hosts_entry() {
    let t = manager_with(|mut c| {
        c.user = Some("root".into());
        c
    });
    t.manager.keep_warm();
    let sandbox = |s: JobSpec| crate::common::in_sandbox(s);
    let first = t.manager.start(sandbox(JobSpec::argv(["true"]))).await.unwrap();
    first.wait_end().await.unwrap();
    let state = berth::runner::docker::state_hash(&t.manager.config().state_dir);
    let pause = || {
        let o = std::process::Command::new("docker")
            .args(["ps", "-q", "--no-trunc", "--filter", "label=berth.pause"])
            .args(["--filter", &format!("label=berth.state={state}")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    eventually(Duration::from_secs(30), "a pause", || !pause().is_empty()).await;
    let joined_mode = |job: &berth::JobHandle| {
        let cid = job.info().unwrap().container_id.unwrap();
        crate::common::docker_inspect("container", &cid).unwrap()["HostConfig"]["NetworkMode"].clone()
    };
    let poison = t
        .manager
        .start(sandbox(JobSpec::shell(
            "(echo '7.7.7.7 poisoned.example' >> /etc/hosts) 2>/dev/null && echo WROTE || echo REFUSED; sleep 1",
        )))
        .await
        .unwrap();
    let mode = joined_mode(&poison);
    poison.wait_end().await.unwrap();
    assert_eq!(poison.output_lines().unwrap(), ["REFUSED"]);
    assert!(mode.as_str().unwrap().starts_with("container:"), "{mode}");

    eventually(Duration::from_secs(30), "the pause again", || !pause().is_empty()).await;
    let reader = t
        .manager
        .start(sandbox(JobSpec::shell(
            "sleep 1; cat /etc/hosts; echo \"name=$(cat /etc/hostname) HOSTNAME=$HOSTNAME kernel=$(hostname)\"",
        )))
        .await
        .unwrap();
    assert_eq!(joined_mode(&reader), mode, "the same pause's namespace");
    reader.wait_end().await.unwrap();
    let lines = reader.output_lines().unwrap();
    assert!(!lines.iter().any(|l| l.contains("poisoned")), "{lines:?}");
    let id = reader.id.as_str();
    assert!(
        lines.iter().any(|l| l.ends_with(&format!("\t{id}"))),
        "its own name: {lines:?}"
    );
    assert_eq!(
        lines.last().unwrap(),
        &format!("name={id} HOSTNAME={id} kernel=berth-job")
    );
    t.manager.shutdown().await;
}

/// A job that asks its proxy for a forbidden host thousands of times gets
/// its first denials logged whole and the rest counted per destination, so
/// the flood cannot rotate an earlier refusal out of the security log, and
/// every denial is still accounted for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_flood_is_counted_not_logged_line_by_line() {
    let t = manager_with(|c| c);
    let refused = t.manager.start(JobSpec::shell("sudo id")).await;
    assert!(refused.is_err(), "sudo is blocked");
    let log_path = t.manager.config().instance_dir().join("security.log");
    let flood = "curl -s -m 60 -o /dev/null 'http://192.0.2.7/[1-3000]'; echo done";
    let job = t.manager.start(in_dev(JobSpec::shell(flood))).await.unwrap();
    job.wait_end().await.unwrap();
    assert_eq!(job.output_lines().unwrap(), ["done"]);
    let counted = || {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        let egress: Vec<serde_json::Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|v: &serde_json::Value| v["kind"] == "egress")
            .collect();
        let total: u64 = egress
            .iter()
            .map(|v| {
                let m = v["matched"].as_str().unwrap_or_default();
                m.split(" more denied")
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(1)
            })
            .sum();
        (log, egress.len(), total)
    };
    eventually(Duration::from_secs(20), "every denial counted", || {
        counted().2 == 3000
    })
    .await;
    let (log, lines, _) = counted();
    assert!(lines <= 30, "{lines} egress lines for 3000 denials");
    assert!(
        log.contains("\"command\":\"sudo id\""),
        "the earlier refusal is kept"
    );
    t.manager.shutdown().await;
}
