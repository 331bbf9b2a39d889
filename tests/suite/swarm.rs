//! Jobs on a real three-node Docker Swarm (`runner = "swarm"`): three
//! dockerd nodes, each in its own network, mount, PID and UTS namespaces,
//! joined through a bridge in a fourth (`scripts/swarm.sh`), the daemon
//! speaking to the manager node over TCP+TLS. What a user of a cluster
//! checks: a server answers on the caller's 127.0.0.1; an exit code comes
//! back; jobs spread over nodes with every line kept; a stop ends a job;
//! a node that dies takes its job as `lost`, naming it, while the others
//! go on; and nothing of the instance is left on any node after `berth
//! down` or after the manager is SIGKILLed.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{Daemon, SANDBOX, eventually, http_get, unique_sleep};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/swarm.sh");

/// The swarm, taken down (everything it made removed) when dropped.
struct Swarm {
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl Swarm {
    fn up() -> Swarm {
        let dir = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            let o = Command::new("bash").arg(SCRIPT).args(args).output().unwrap();
            assert!(
                o.status.success(),
                "swarm.sh {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        let path = dir.path().to_str().unwrap().to_string();
        let env = run(&["up", &path])
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let swarm = Swarm { dir, env };
        run(&["load", &path, SANDBOX]);
        swarm
    }

    fn env(&self) -> Vec<(&str, &str)> {
        self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }

    fn get(&self, key: &str) -> &str {
        self.env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .unwrap()
    }

    /// `docker` aimed at the engine at `addr` (the manager's by default).
    fn docker_at(&self, addr: Option<&str>, args: &[&str]) -> String {
        let host = addr.map_or_else(
            || self.get("DOCKER_HOST").to_string(),
            |a| format!("tcp://{a}:2376"),
        );
        let o = Command::new("docker")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("DOCKER_HOST", host)
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "docker {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// berth's services, configs and overlay on the swarm, and its
    /// containers, volumes and networks on every node.
    fn leftovers(&self) -> Vec<String> {
        let label = "label=berth.managed=true";
        let mut left: Vec<String> = Vec::new();
        for what in [["service", "ls"], ["config", "ls"], ["network", "ls"]] {
            let out = self.docker_at(None, &[what[0], what[1], "-q", "--filter", label]);
            left.extend(out.lines().map(|l| format!("{} {l}", what[0])));
        }
        for node in self.get("BERTH_SWARM_NODES").split(',') {
            let out = self.docker_at(Some(node), &["ps", "-aq", "--filter", label]);
            left.extend(out.lines().map(|l| format!("container {l} on {node}")));
            // The nodes are new: any volume on one is a job's.
            let out = self.docker_at(Some(node), &["volume", "ls", "-q"]);
            left.extend(out.lines().map(|l| format!("volume {l} on {node}")));
            let out = self.docker_at(Some(node), &["network", "ls", "-q", "--filter", label]);
            left.extend(out.lines().map(|l| format!("network {l} on {node}")));
        }
        left
    }

    /// `swarm.sh VERB DIR ARGS…`.
    fn script(&self, verb: &str, args: &[&str]) {
        let st = Command::new("bash")
            .arg(SCRIPT)
            .arg(verb)
            .arg(self.dir.path())
            .args(args)
            .status()
            .unwrap();
        assert!(st.success(), "swarm.sh {verb} {args:?}");
    }
}

impl Drop for Swarm {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(SCRIPT)
            .arg("down")
            .arg(self.dir.path())
            .status();
    }
}

fn swarm_run(d: &Daemon, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["run", "--runner", "swarm", "--image", SANDBOX];
    all.extend_from_slice(args);
    d.json(&all)
}

#[tokio::test]
async fn a_swarm_job_serves_its_port_reports_its_exit_stops_and_leaves_nothing() {
    let swarm = Swarm::up();
    let mut env = swarm.env();
    env.push(("BERTH_GRACE", "2"));
    let mut d = Daemon::start_with(&env);
    std::fs::write(
        d.dir.path().join("ws/index.html"),
        "served from the caller's workspace\n",
    )
    .unwrap();

    let v = swarm_run(
        &d,
        &[
            "-d",
            "-p",
            "8080",
            "--ready-http",
            "/index.html",
            "--timeout",
            "60",
            "--",
            "httpd",
            "-f",
            "-p",
            "8080",
            "-h",
            ".",
        ],
    );
    assert_eq!(v["ready"]["outcome"], "ready", "{v}");
    let id = v["job"]["id"].as_str().unwrap().to_string();
    let port = v["job"]["ports"][0]["host_port"].as_u64().unwrap() as u16;
    assert_eq!(v["job"]["ports"][0]["host_ip"], "127.0.0.1", "{v}");
    assert!(http_get(port).contains("served from the caller's workspace"));
    let node = v["job"]["node"].as_str().unwrap_or_default().to_string();
    assert!(node.starts_with("berth-sw"), "{v}");
    let (_, card, _) = d.run(&["status", &id]);
    assert!(
        card.contains(&format!("Node: {node}")) && card.contains("swarm: the workspace is a copy"),
        "{card}"
    );

    // An exit code comes from the task's terminal state, stderr kept apart.
    let (code, out, err) = d.run(&[
        "run",
        "--runner",
        "swarm",
        "--image",
        SANDBOX,
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
    ]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("out") && !out.contains("err"), "{out}");

    // A stop: the job ignores SIGTERM, so the swarm kills it when berth's
    // grace (2 s) ends. Measured by hand, the swarm's own stop of such a
    // task on an attached network takes the grace + ~3.4 s.
    let stubborn = swarm_run(
        &d,
        &[
            "-d",
            "--",
            "sh",
            "-c",
            &format!("trap '' TERM; echo up; exec sleep {}", unique_sleep()),
        ],
    );
    let sid = stubborn["job"]["id"].as_str().unwrap().to_string();
    let (code, _, err) = d.run(&["wait", &sid, "--log", "up", "--timeout", "30"]);
    assert_eq!(code, 0, "{err}");
    let asked = Instant::now();
    let mut kill = d
        .cli()
        .args(["kill", &sid])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let bound = Duration::from_secs(2 + 5);
    eventually(bound, "the stubborn job killed", || {
        kill.try_wait().unwrap().is_some()
    })
    .await;
    assert!(kill.wait().unwrap().success());
    let took = asked.elapsed();
    let info = d.json(&["status", &sid]);
    assert_eq!(info["status"]["state"], "killed", "after {took:?}: {info}");
    let (_, card, _) = d.run(&["status", &id]);
    assert_eq!(d.json(&["kill", &id])["result"], "killed", "{card}");

    // Jobs without a way out are each on an overlay of their own: one
    // cannot reach another's server (one overlay for all let it).
    let server = swarm_run(
        &d,
        &[
            "-d",
            "--",
            "sh",
            "-c",
            "echo ip $(hostname -i); exec httpd -f -p 8080 -h /www",
        ],
    );
    let server_id = server["job"]["id"].as_str().unwrap().to_string();
    let (code, _, err) = d.run(&["wait", &server_id, "--log", "^ip ", "--timeout", "30"]);
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = d.run(&["logs", &server_id]);
    let ip = out
        .lines()
        .find_map(|l| l.strip_prefix("ip "))
        .unwrap()
        .trim()
        .to_string();
    let probe = format!("timeout 5 wget -q -O- http://{ip}:8080/ && echo REACHED");
    let (code, out, _) = d.run(&[
        "run", "--runner", "swarm", "--image", SANDBOX, "--", "sh", "-c", &probe,
    ]);
    assert!(
        code != 0 && !out.contains("REACHED"),
        "another job's server answered: {out}"
    );
    // `exec` reaches no swarm node, and says so.
    let (code, _, err) = d.run(&["exec", &server_id, "--", "true"]);
    assert!(code != 0 && err.contains("runs on a swarm node"), "{err}");
    assert_eq!(d.json(&["kill", &server_id])["result"], "killed");

    let (code, _, err) = d.run(&["down"]);
    assert_eq!(code, 0, "{err}");
    assert!(d.wait_exit(Duration::from_secs(30)).is_some());
    eventually(
        Duration::from_secs(20),
        "nothing of berth on the swarm after down",
        || swarm.leftovers().is_empty(),
    )
    .await;

    // A manager that is SIGKILLed: its watchdog removes its service (the
    // swarm then removes the container on its node) and its configs.
    let mut d = Daemon::start_with(&swarm.env());
    let v = swarm_run(&d, &["-d", "--", "sleep", &unique_sleep()]);
    assert!(v["job"]["id"].is_string(), "{v}");
    assert!(!swarm.leftovers().is_empty());
    d.child.kill().unwrap();
    let _ = d.child.wait();
    eventually(Duration::from_secs(60), "the watchdog cleaned every node", || {
        swarm.leftovers().is_empty()
    })
    .await;
}

#[tokio::test]
async fn six_jobs_at_once_spread_over_the_nodes_with_every_line_kept() {
    let swarm = Swarm::up();
    let mut env = swarm.env();
    env.push(("BERTH_MAX_JOBS", "6"));
    let d = Daemon::start_with(&env);
    let ids: Vec<String> = (0..6)
        .map(|i| {
            // Each stays 30 s after its output, so that all six run at once
            // and the scheduler spreads them (it places a task where the
            // fewest run).
            let script =
                format!("i=1; while [ $i -le 3000 ]; do echo job{i}-line$i; i=$((i+1)); done; sleep 30");
            // Half a CPU each: six fit at once (a node has 2, and a job's
            // limits are its reservations).
            let v = swarm_run(&d, &["-d", "--cpus", "0.5", "--", "sh", "-c", &script]);
            v["job"]["id"]
                .as_str()
                .unwrap_or_else(|| panic!("{v}"))
                .to_string()
        })
        .collect();
    // `ps --usage` per node, while all six hold their reservations: each
    // node counts the jobs whose card names it, and reserves their limits.
    let (code, ps, err) = d.run(&["ps", "--usage"]);
    assert_eq!(code, 0, "{err}");
    let mut held: BTreeMap<String, (usize, f64, u64)> = BTreeMap::new();
    for id in &ids {
        let info = d.json(&["status", id]);
        assert_eq!(info["status"]["state"], "running", "{info}");
        // The card's `berth-sw2 (10.1.2.3)`: the table names the host.
        let node = info["node"].as_str().unwrap_or_default();
        let e = held.entry(node.split(' ').next().unwrap().into()).or_default();
        e.0 += 1;
        e.1 += info["limits"]["cpus"].as_f64().unwrap_or(0.0);
        e.2 += info["limits"]["memory"].as_u64().unwrap_or(0);
    }
    for (node, (jobs, cpus, memory)) in &held {
        let row = ps
            .lines()
            .find(|l| l.starts_with(node.as_str()))
            .unwrap_or_else(|| panic!("no row for {node}:\n{ps}"));
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            (cols[2], cols[3]),
            (jobs.to_string().as_str(), format!("{cpus:.2}").as_str()),
            "{node}: {row}\n{ps}"
        );
        assert!(
            *memory > 0 && row.contains(&berth::card::bytes(*memory)),
            "{node}: {row}"
        );
    }
    let mut nodes = BTreeSet::new();
    for (i, id) in ids.iter().enumerate() {
        let (code, _, err) = d.run(&["wait", id]);
        assert_eq!(code, 0, "{id}: {err}");
        let v = d.json(&["logs", id, "--limit", "10000"]);
        let lines = v["lines"].as_array().unwrap();
        let want: Vec<String> = (1..=3000).map(|n| format!("job{i}-line{n}")).collect();
        let got: Vec<&str> = lines.iter().map(|l| l["text"].as_str().unwrap()).collect();
        assert_eq!(got, want, "{id}'s output");
        let seqs: Vec<u64> = lines.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
        assert!(
            seqs.windows(2).all(|w| w[1] == w[0] + 1),
            "{id}: seqs not consecutive"
        );
        let info = d.json(&["status", id]);
        nodes.insert(info["node"].as_str().unwrap_or_default().to_string());
    }
    assert!(nodes.len() >= 2, "all six on one node: {nodes:?}");
}

#[tokio::test]
async fn a_node_that_dies_takes_its_job_as_lost_within_20_seconds_and_the_others_go_on() {
    let swarm = Swarm::up();
    let mut env = swarm.env();
    env.push(("BERTH_MAX_JOBS", "6"));
    let d = Daemon::start_with(&env);
    // Jobs until one runs on a worker (the scheduler chooses).
    let mut jobs = Vec::new();
    let victim = loop {
        assert!(jobs.len() < 6, "no job landed on a worker: {jobs:?}");
        let v = swarm_run(&d, &["-d", "--", "sleep", &unique_sleep()]);
        let id = v["job"]["id"].as_str().unwrap().to_string();
        let node = v["job"]["node"].as_str().unwrap().to_string();
        jobs.push((id.clone(), node.clone()));
        if !node.starts_with("berth-sw1") {
            break (id, node);
        }
    };
    let n = &victim.1["berth-sw".len().."berth-sw".len() + 1];
    swarm.script("kill-node", &[n]);
    let died = Instant::now();
    let (code, _, _) = d.run(&["wait", &victim.0, "--timeout", "30"]);
    assert_ne!(code, 0);
    let info = d.json(&["status", &victim.0]);
    assert_eq!(info["status"]["state"], "lost", "{info}");
    let reason = info["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(&victim.1), "the reason names the node: {reason}");
    assert!(
        died.elapsed() < Duration::from_secs(20),
        "lost after {:?}",
        died.elapsed()
    );
    for (id, node) in jobs.iter().filter(|(_, n)| *n != victim.1) {
        let info = d.json(&["status", id]);
        assert_eq!(info["status"]["state"], "running", "{id} on {node}: {info}");
    }
}

/// A `layer` job on a swarm: what it wrote on its node comes back into its
/// layer through its log, out of its output, so `berth diff` and `berth
/// apply` work after the job (and its task) are gone; one killed past its
/// grace says its changes were lost rather than showing an empty layer.
#[tokio::test]
async fn a_swarm_layer_job_brings_its_changes_back_and_a_killed_one_says_they_were_lost() {
    let swarm = Swarm::up();
    let mut env = swarm.env();
    env.push(("BERTH_GRACE", "1"));
    let d = Daemon::start_with(&env);
    let ws = d.dir.path().join("ws");
    std::fs::write(ws.join("old.txt"), "to be removed\n").unwrap();
    std::fs::write(ws.join("kept.txt"), "kept\n").unwrap();
    std::fs::write(ws.join("edited.txt"), "before\n").unwrap();
    // Big enough that its archive travels in several log lines.
    let big: String = (0..20_000).map(|n| format!("{n:x}\n")).collect();
    std::fs::write(ws.join("big.txt"), &big).unwrap();
    let script = "mkdir -p reports && echo '<testsuite tests=\"1\"/>' > reports/junit.xml && rm old.txt && echo after > edited.txt && seq 1 5000 > numbers.txt && printf 'done without a newline'";
    let (code, out, err) = d.run(&[
        "run", "--write", "layer", "--runner", "swarm", "--image", SANDBOX, "--", "sh", "-c", script,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("changed in layer job-1"), "{err}");
    // The archive travelled in the log, but is not the job's output.
    assert_eq!(out.trim_end(), "done without a newline", "{err}");
    let (_, logs, _) = d.run(&["logs", "job-1"]);
    assert!(!logs.contains("berth-layer"), "{logs}");
    let (_, card, _) = d.run(&["status", "job-1"]);
    assert!(card.contains("come back into layer job-1"), "{card}");
    assert_eq!(
        std::fs::read_to_string(ws.join("edited.txt")).unwrap(),
        "before\n"
    );
    d.diff_then_apply(
        "job-1",
        &["A  reports/junit.xml", "D  old.txt", "M  edited.txt"],
        "kept.txt",
        &[
            ("reports/junit.xml", "<testsuite tests=\"1\"/>\n"),
            ("edited.txt", "after\n"),
        ],
        "old.txt",
    );

    // A job that ignores the stop is killed when the grace ends: its
    // archive never left the node, and its record says so.
    let v = swarm_run(
        &d,
        &[
            "-d",
            "--write",
            "layer",
            "--",
            "sh",
            "-c",
            &format!(
                "trap '' TERM; echo x > new.txt; echo up; exec sleep {}",
                unique_sleep()
            ),
        ],
    );
    let id = v["job"]["id"].as_str().unwrap().to_string();
    let (code, _, err) = d.run(&["wait", &id, "--log", "up", "--timeout", "30"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(d.json(&["kill", &id])["result"], "killed");
    let info = d.json(&["status", &id]);
    // Killed on its node, or given up by the swarm: either way its
    // archive never came.
    let lost = info["writes"]["lost"].as_str().unwrap_or_default();
    assert!(lost.contains("before it sent its workspace back"), "{info}");
    let (_, card, _) = d.run(&["status", &id]);
    assert!(card.contains("its changes did not come back"), "{card}");
}
