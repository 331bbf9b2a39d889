//! A project build reaches nothing a job of the project could not, on the
//! real engine: an `ADD` of a URL (which the engine would fetch from its own
//! host) is refused before the build unless the user's own config allows
//! it; `RUN` steps get the project's egress (no network under `none`, an
//! internal network and a proxy of the build's own under `proxy`, denials
//! in the security log; a NAT'd one only under a user's `all`), its memory
//! limit and its process limit. Each reach test has a control that shows
//! its canary can be heard at all.

use std::net::Ipv4Addr;
use std::process::Command;

use berth::{Error, JobSpec, RunnerChoice};

use super::{Project, run_cat};
use crate::common::canary::Canary;
use crate::common::lan::LanHost;

/// Put `text` at the top of the project's user config (its `[trust]` table
/// stays below): what the user, not the project, says.
fn user_says(p: &Project, text: &str) {
    let own = std::fs::read_to_string(&p.user).unwrap_or_default();
    std::fs::write(&p.user, format!("{text}{own}")).unwrap();
}

async fn start_err(m: &berth::Manager) -> Error {
    m.start(JobSpec::argv(["true"]).with_runner(RunnerChoice::Docker))
        .await
        .expect_err("the start is refused")
}

#[tokio::test]
async fn an_add_of_a_url_is_refused_before_the_build_and_the_canary_hears_nothing() {
    let canary = Canary::on(Ipv4Addr::LOCALHOST.into());
    let url = format!("http://{}/x", canary.addr);
    let p = Project::new();
    // Even a trusted berth.toml cannot allow it: its Dockerfile is the agent's.
    p.write(
        "berth.toml",
        "build_add_urls = true\n[image]\ndockerfile = \"Dockerfile\"\n",
    );
    p.write(
        "Dockerfile",
        // (A fetched file is 0600: the job's user reads it once it is 0644.)
        &format!(
            "FROM berth/sandbox:latest\n# fetched by the engine itself\nADD {url} /x\nRUN chmod 0644 /x\n"
        ),
    );
    let m = p.manager();
    let err = start_err(&m).await;
    assert!(matches!(err, Error::BuildContext { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("Dockerfile: line 3: `ADD ") && msg.contains(&url) && msg.contains("build_add_urls"),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "one line: {msg}");
    assert_eq!(canary.heard(), Vec::<String>::new(), "the engine fetched the URL");
    assert!(p.images().is_empty(), "{:?}", p.images());
    m.shutdown().await;

    // Control: the user's own config allows it, and the engine does fetch.
    user_says(&p, "build_add_urls = true\n");
    let m = p.manager();
    let (out, _, built, _) = run_cat(&m, &["/x"]).await;
    assert_eq!((out.as_str(), built), ("canary", true));
    assert!(canary.heard()[0].starts_with("GET /x"), "{:?}", canary.heard());
    m.shutdown().await;
}

/// A Dockerfile whose `RUN` tries the canary at `addr:8080` directly (nc)
/// and as plain HTTP (wget: through the proxy when the build has one).
fn reaching(addr: Ipv4Addr) -> String {
    format!(
        "FROM berth/sandbox:latest\n\
         RUN (echo direct | nc -w 3 {addr} 8080 && echo reached || echo unreached) > /direct.txt 2>&1; \
         (wget -q -O- http://{addr}:8080/by-http || echo unreached) > /http.txt 2>&1; true\n"
    )
}

/// Whether `out` has `line` as one of its lines.
fn said(out: &str, line: &str) -> bool {
    out.lines().any(|l| l.trim() == line)
}

#[tokio::test]
async fn a_run_step_reaches_no_lan_host_under_egress_none_or_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let mut lan = LanHost::new();
    let log = dir.path().join("canary.log");
    lan.serve_canary(8080, &log);
    let heard = || std::fs::read_to_string(&log).unwrap_or_default();
    for egress in ["none", "proxy"] {
        let p = Project::new();
        p.write(
            "berth.toml",
            &format!("egress = \"{egress}\"\n[image]\ndockerfile = \"Dockerfile\"\n"),
        );
        p.write("Dockerfile", &reaching(lan.addr));
        let m = p.manager();
        let (out, _, built, _) = run_cat(&m, &["/direct.txt", "/http.txt"]).await;
        assert!(built, "{egress}");
        assert_eq!(heard(), "", "{egress}: the canary heard the build ({out})");
        assert!(!said(&out, "reached"), "{egress}: {out}");
        if egress == "proxy" {
            // The proxy refused it, and said so where a job's denial goes.
            assert!(out.contains("403"), "{out}");
            let records =
                std::fs::read_to_string(m.config().instance_dir().join("security.log")).unwrap_or_default();
            let target = format!("{}:8080", lan.addr);
            assert!(
                records
                    .lines()
                    .any(|l| l.contains("\"kind\":\"egress\"") && l.contains(&target)),
                "{records}"
            );
        }
        m.shutdown().await;
    }

    // Control: the user's own `egress = "all"` gives the build a way out.
    let p = Project::new();
    p.write("berth.toml", "[image]\ndockerfile = \"Dockerfile\"\n");
    user_says(&p, "egress = \"all\"\n");
    p.write("Dockerfile", &reaching(lan.addr));
    let m = p.manager();
    let (out, ..) = run_cat(&m, &["/direct.txt"]).await;
    assert!(said(&out, "reached"), "{out}");
    assert!(heard().contains("direct"), "{}", heard());
    m.shutdown().await;
}

/// A fork loop in a `RUN` step meets the project's process limit: the step
/// fails instead of filling the host's process table. (The step waits for
/// its children, so a loop that outran the limit's landing under load is
/// still there to be stopped.)
#[tokio::test]
async fn a_fork_loop_in_a_build_step_is_stopped_by_the_process_limit() {
    let p = Project::new();
    p.write("berth.toml", "pids = 64\n[image]\ndockerfile = \"Dockerfile\"\n");
    p.write(
        "Dockerfile",
        "FROM berth/sandbox:latest\n\
         RUN i=0; while [ $i -lt 1000 ]; do sleep 120 & i=$((i+1)); done; echo all-forked; wait\n",
    );
    let m = p.manager();
    let err = start_err(&m).await;
    assert!(matches!(err, Error::ImageBuildFailed { .. }), "{err:?}");
    assert!(err.to_string().contains("non-zero code"), "{err}");
    assert!(p.images().is_empty(), "{:?}", p.images());
    m.shutdown().await;
}

/// A build runs the project's RUN steps (a job could have written them): it
/// gets the project's memory limit and, under the default egress (`proxy`),
/// runs on the instance's own internal build network, not the engine's
/// default bridge beside other containers.
#[tokio::test]
async fn a_build_is_confined_like_a_job() {
    let p = Project::new();
    p.write(
        "berth.toml",
        "memory = \"96m\"\n[image]\ndockerfile = \"Dockerfile\"\n",
    );
    p.write(
        "Dockerfile",
        "FROM berth/sandbox:latest\n\
         RUN (cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max) > /mem.txt\n\
         RUN ip -4 -o addr show eth0 | awk '{print $4}' > /net.txt\n",
    );
    let m = p.manager();
    let (out, _tag, built, _) = run_cat(&m, &["/mem.txt", "/net.txt"]).await;
    assert!(built);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some((96u64 << 20).to_string().as_str()), "{out}");
    let addr = lines.next().unwrap_or_default().to_string();
    let instance = m.config().instance.clone();
    let o = Command::new("docker")
        .args([
            "network",
            "ls",
            "-q",
            "--filter",
            &format!("label=berth.instance={instance}"),
        ])
        .args(["--filter", "name=-net-build"])
        .output()
        .unwrap();
    let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let net = crate::common::docker_inspect("network", &id).expect("the build network exists");
    let subnet = net["IPAM"]["Config"][0]["Subnet"].as_str().unwrap().to_string();
    let prefix: String = subnet.split('.').take(2).collect::<Vec<_>>().join(".");
    assert!(
        addr.starts_with(&prefix),
        "built on {addr}, the build bridge is {subnet}"
    );
    m.shutdown().await;
    assert!(
        crate::common::docker_inspect("network", &id).is_none(),
        "the build network goes with the manager"
    );
}
