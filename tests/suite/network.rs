//! Network isolation between jobs, with the DEFAULT config, against the real
//! engine: each running container job is alone on a berth bridge of its own
//! (a pool of networks, reused once a job's container is gone), so two jobs
//! of one instance cannot connect to each other's ports while a published
//! port still answers on 127.0.0.1; no berth network outlives the manager,
//! whether it shut down or was SIGKILLed (the crash watchdog removes them).

use std::process::Command;
use std::time::Duration;

use berth::runner::docker::{LABEL_STATE, NO_ICC, state_hash};
use berth::{JobSpec, ReadyCondition};
use pretty_assertions::assert_eq;

use crate::common::{Daemon, eventually, manager, unique_sleep};

use crate::common::{docker_inspect as inspect, in_sandbox as docker};

/// The names of the networks labelled with this state dir's hash.
fn networks_of(state: &str) -> Vec<String> {
    let o = Command::new("docker")
        .args([
            "network",
            "ls",
            "--format",
            "{{.Name}}",
            "--filter",
            &format!("label={LABEL_STATE}={state}"),
        ])
        .output()
        .expect("docker CLI");
    assert!(o.status.success(), "{o:?}");
    let mut names: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(String::from)
        .collect();
    names.sort();
    names
}

/// The one network a container is on: (name, IP, gateway).
fn network_of(container: &str) -> (String, String, String) {
    let c = inspect("container", container).unwrap();
    let networks = c["NetworkSettings"]["Networks"].as_object().unwrap();
    assert_eq!(networks.len(), 1, "{networks:?}");
    let (name, ep) = networks.iter().next().unwrap();
    let text = |k: &str| ep[k].as_str().unwrap().to_string();
    (name.clone(), text("IPAddress"), text("Gateway"))
}

#[tokio::test]
async fn by_default_jobs_cannot_reach_each_other_and_ports_stay_on_localhost() {
    let t = manager();
    let state = state_hash(&t.manager.config().state_dir);
    let server = t
        .manager
        .start(
            docker(JobSpec::argv(["httpd", "-f", "-p", "8080", "-h", "/www"]))
                .with_port(8080)
                .background(),
        )
        .await
        .unwrap();
    let ready = server
        .wait(&[ReadyCondition::http("/")], Duration::from_secs(30))
        .await
        .unwrap();
    assert!(ready.is_ready(), "{ready:?}");
    let info = server.info().unwrap();
    let (net_name, ip, gateway) = network_of(info.container_id.as_deref().unwrap());
    assert_eq!(info.limits.network.as_deref(), Some(net_name.as_str()));

    // The network is berth's: labelled as this state dir's, traffic between
    // containers off as a second guard.
    let net = inspect("network", &net_name).unwrap();
    assert_eq!(net["Options"][NO_ICC], "false");
    assert_eq!(net["Labels"]["berth.managed"], "true");
    assert_eq!(net["Labels"][LABEL_STATE], state.as_str());

    // The server answers: on its published port on 127.0.0.1 and from the host.
    let port = server.host_port(8080).unwrap();
    assert!(crate::common::http_get(port).starts_with("HTTP/1.1 200"));
    let addr = std::net::SocketAddr::new(ip.parse().unwrap(), 8080);
    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        .expect("the host reaches the server at its own address");

    // Another job of the same instance does not; the same probe does reach
    // a server of its own (so `BLOCKED` is the network, not a broken probe).
    let try_connect = |host: &str, port: u16| {
        format!(
            "if nc -w 3 {host} {port} </dev/null 2>/dev/null; then echo REACHED {port}; else echo BLOCKED {port}; fi"
        )
    };
    let probe = t
        .manager
        .start(docker(JobSpec::shell(format!(
            "httpd -p 9090 -h /www; {}; {}; {}",
            try_connect("127.0.0.1", 9090),
            try_connect(&ip, 8080),
            // Its published port is on the host's 127.0.0.1, not on the gateway.
            try_connect(&gateway, port),
        ))))
        .await
        .unwrap();
    let probe_net = probe.info().unwrap().limits.network.unwrap();
    assert_ne!(probe_net, net_name, "each running job has a network of its own");
    probe.wait_end().await.unwrap();
    assert_eq!(
        probe.output_lines().unwrap(),
        ["REACHED 9090", "BLOCKED 8080", format!("BLOCKED {port}").as_str()]
    );

    // `network = none` stays available: no interface but loopback.
    let mut spec = docker(JobSpec::shell("ls /sys/class/net"));
    spec.network = Some(berth::model::Network::None);
    let none = t.manager.start(spec).await.unwrap();
    none.wait_end().await.unwrap();
    assert_eq!(none.output_lines().unwrap(), ["lo"]);
    server.kill().await.unwrap();
    t.manager.shutdown().await;
    assert_eq!(networks_of(&state), Vec::<String>::new());
}

#[tokio::test]
async fn networks_are_reused_one_job_at_a_time_and_removed_at_shutdown() {
    let t = manager();
    let state = state_hash(&t.manager.config().state_dir);
    let network = |spec: JobSpec| {
        let m = &t.manager;
        async move {
            let job = m.start(docker(spec)).await.unwrap();
            let net = job.info().unwrap().limits.network.unwrap();
            (job, net)
        }
    };
    // One after the other: the second job reuses the first one's network.
    let (first, net1) = network(JobSpec::argv(["true"])).await;
    first.wait_end().await.unwrap();
    let (second, net2) = network(JobSpec::argv(["true"])).await;
    second.wait_end().await.unwrap();
    assert_eq!(net1, net2, "a network whose container is gone is reused");
    assert_eq!(networks_of(&state), [net1]);

    // At the same time: never two running containers on one network.
    let (a, net_a) = network(JobSpec::argv(["sleep", "1000"]).background()).await;
    let (b, net_b) = network(JobSpec::argv(["sleep", "1000"]).background()).await;
    assert_ne!(net_a, net_b);
    assert_eq!(networks_of(&state).len(), 2);
    for job in [&a, &b] {
        let (on, _, _) = network_of(job.info().unwrap().container_id.as_deref().unwrap());
        assert!(on == net_a || on == net_b, "{on}");
    }

    // Shutdown stops the jobs, removes their containers, then the networks.
    t.manager.shutdown().await;
    assert!(!a.info().unwrap().status.is_active());
    assert_eq!(networks_of(&state), Vec::<String>::new());
}

#[tokio::test]
async fn a_killed_daemons_networks_are_removed_by_the_watchdog() {
    let mut d = Daemon::start();
    let state = state_hash(&d.config().state_dir);
    let token = unique_sleep();
    for _ in 0..2 {
        let v = d.json(&["run", "-d", "--runner", "docker", "--", "sleep", &token]);
        assert!(v["job"]["id"].is_string(), "{v}");
    }
    assert_eq!(networks_of(&state).len(), 2, "one network per running job");

    d.child.kill().unwrap(); // SIGKILL: no teardown runs in the daemon
    d.child.wait().unwrap();
    eventually(
        Duration::from_secs(15),
        "the watchdog removes the job networks",
        || networks_of(&state).is_empty(),
    )
    .await;
}

/// What SECURITY.md says a job can still reach: a host service listening on
/// 0.0.0.0 answers through the job's bridge gateway; one bound to 127.0.0.1
/// does not. (If this starts failing because the host firewalls the bridges,
/// the docs must say so.)
#[tokio::test]
async fn a_job_reaches_host_services_on_all_addresses_but_not_loopback_only_ones() {
    // Two host services in a process of their own: one on every address,
    // one on loopback only. They accept and hang up at once.
    let (p_open, p_local) = (47000 + (std::process::id() % 1000) as u16 * 2, 0);
    let p_local = p_local + p_open + 1;
    let script = format!(
        "import socket,threading\n\
def serve(host,port):\n    s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1); s.bind((host,port)); s.listen(8)\n    while True:\n        c,_=s.accept(); c.close()\n\
threading.Thread(target=serve,args=('0.0.0.0',{p_open}),daemon=True).start()\n\
serve('127.0.0.1',{p_local})\n"
    );
    let mut services = Command::new("python3").arg("-c").arg(script).spawn().unwrap();
    for port in [p_open, p_local] {
        eventually(Duration::from_secs(10), "the host services listen", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .await;
    }
    let t = manager();
    let probe = |port: u16| {
        format!(
            "if nc -w 3 $gw {port} </dev/null >/dev/null 2>&1; then echo REACHED {port}; else echo BLOCKED {port}; fi"
        )
    };
    let mut spec = docker(JobSpec::shell(format!(
        "gw=$(ip route | awk '/^default/ {{print $3}}'); {}; {}",
        probe(p_open),
        probe(p_local)
    )));
    spec.timeout = Some(30.0);
    let job = t.manager.start(spec).await.unwrap();
    job.wait_end().await.unwrap();
    assert_eq!(
        job.output_lines().unwrap(),
        [format!("REACHED {p_open}"), format!("BLOCKED {p_local}")]
    );
    t.manager.shutdown().await;
    services.kill().unwrap();
    services.wait().unwrap();
}

/// The running pauses (network namespaces kept for the next job) of a state dir.
fn pauses_of(state: &str) -> Vec<String> {
    let o = Command::new("docker")
        .args(["ps", "-q", "--no-trunc", "--filter", "label=berth.pause"])
        .args(["--filter", &format!("label={LABEL_STATE}={state}")])
        .output()
        .expect("docker CLI");
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(String::from)
        .collect()
}

/// A manager that stays up between jobs (`keep_warm`, as the daemon) keeps an
/// idle pause on a job network once its job ended; the next job without
/// published ports joins that namespace: same network, reachable at the
/// pause's address (readiness probes inside work), still unreachable from a
/// job running beside it. A pause removed by hand costs only the saving,
/// and nothing outlives shutdown.
#[tokio::test]
async fn a_warm_manager_lets_the_next_job_join_a_pause_and_keeps_jobs_apart() {
    let t = manager();
    t.manager.keep_warm();
    let state = state_hash(&t.manager.config().state_dir);
    let pause_up = || async {
        eventually(
            Duration::from_secs(30),
            "a pause on the ended job's network",
            || pauses_of(&state).len() == 1,
        )
        .await;
        pauses_of(&state).remove(0)
    };
    let first = t.manager.start(docker(JobSpec::argv(["true"]))).await.unwrap();
    first.wait_end().await.unwrap();
    let net = first.info().unwrap().limits.network.unwrap();
    let pause = pause_up().await;
    assert_eq!(network_of(&pause).0, net);
    let h = inspect("container", &pause).unwrap();
    assert_eq!(h["HostConfig"]["CapDrop"], serde_json::json!(["ALL"]));
    assert_eq!(h["HostConfig"]["ReadonlyRootfs"], true);

    // Removed by hand: the next job starts on the network itself.
    let o = Command::new("docker")
        .args(["rm", "-f", &pause])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let plain = t
        .manager
        .start(docker(JobSpec::argv(["echo", "still runs"])))
        .await
        .unwrap();
    let end = plain.wait_end().await.unwrap();
    assert_eq!(end.exit_code, Some(0), "{end:?}");
    assert_eq!(plain.output_lines().unwrap(), ["still runs"]);
    assert_eq!(
        plain.info().unwrap().limits.network.as_deref(),
        Some(net.as_str())
    );

    // It gets a new pause, which the next job without ports joins; its
    // server is found inside.
    let pause = pause_up().await;
    let (_, pause_ip, _) = network_of(&pause);
    let server = t
        .manager
        .start(docker(JobSpec::argv(["httpd", "-f", "-p", "8080", "-h", "/www"])).background())
        .await
        .unwrap();
    let info = server.info().unwrap();
    assert_eq!(info.limits.network.as_deref(), Some(net.as_str()));
    let c = inspect("container", info.container_id.as_deref().unwrap()).unwrap();
    assert_eq!(c["HostConfig"]["NetworkMode"], format!("container:{pause}"));
    let ready = server
        .wait(&[ReadyCondition::port(8080)], Duration::from_secs(30))
        .await
        .unwrap();
    assert!(ready.is_ready(), "{ready:?}");

    // A job beside it has a network of its own and cannot reach it.
    let probe = t
        .manager
        .start(docker(JobSpec::shell(format!(
            "if nc -w 3 {pause_ip} 8080 </dev/null 2>/dev/null; then echo REACHED; else echo BLOCKED; fi"
        ))))
        .await
        .unwrap();
    assert_ne!(probe.info().unwrap().limits.network.unwrap(), net);
    probe.wait_end().await.unwrap();
    assert_eq!(probe.output_lines().unwrap(), ["BLOCKED"]);

    t.manager.shutdown().await;
    assert_eq!(pauses_of(&state), Vec::<String>::new());
    assert_eq!(networks_of(&state), Vec::<String>::new());
}
