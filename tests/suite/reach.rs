//! Who reaches a job's server, against the real engine: berth forwards a
//! published port itself (127.0.0.1 only), so a host on the LAN that routes
//! the job subnet through this machine reaches nothing (the job's network
//! is internal), while the port the engine publishes (`publish = "engine"`,
//! kept behind the switch) is reached from there, as before; a job with a
//! port joins a pause container; the forwarder closes with its job, and a
//! `--no-daemon` run forwards from its own process; UDP is forwarded too.

use std::time::Duration;

use berth::model::{Egress, Publish};
use berth::{JobSpec, ReadyCondition};

use crate::common::lan::LanHost;
use crate::common::{
    berth, docker_inspect, eventually, http_get, in_sandbox, manager, manager_with, try_http_get,
};

/// An httpd job publishing 8080, ready; its container's address (empty
/// when it joined a pause, whose address it has).
async fn httpd(m: &berth::Manager) -> (berth::JobHandle, String) {
    let job = m
        .start(
            in_sandbox(JobSpec::argv(["httpd", "-f", "-p", "8080", "-h", "/www"]))
                .with_port(8080)
                .background(),
        )
        .await
        .unwrap();
    let ready = job
        .wait(&[ReadyCondition::http("/")], Duration::from_secs(30))
        .await
        .unwrap();
    assert!(ready.is_ready(), "{ready:?}");
    let cid = job.info().unwrap().container_id.unwrap();
    let c = docker_inspect("container", &cid).unwrap();
    let ip = c["NetworkSettings"]["Networks"]
        .as_object()
        .unwrap()
        .values()
        .find_map(|ep| ep["IPAddress"].as_str().filter(|s| !s.is_empty()))
        .unwrap_or_default()
        .to_string();
    (job, ip)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lan_host_routed_through_this_machine_cannot_reach_a_jobs_server() {
    let lan = LanHost::new();
    // The default: berth forwards, the job's network is internal.
    let t = manager();
    let (job, ip) = httpd(&t.manager).await;
    assert!(http_get(job.host_port(8080).unwrap()).starts_with("HTTP/1.1 200"));
    lan.route_via_host(&format!("{ip}/32"));
    assert_eq!(
        lan.get(&format!("http://{ip}:8080/"), 3),
        None,
        "a LAN host reached the job at {ip}"
    );

    // The same LAN host does reach a port the engine publishes on a NAT'd
    // network (today's engine behaviour, behind `publish = "engine"`): the
    // route is good, the block above is berth's.
    let engine = manager_with(|mut c| {
        c.publish = Publish::Engine;
        c.egress = Egress::All;
        c
    });
    let (published, ip2) = httpd(&engine.manager).await;
    assert!(
        published
            .info()
            .unwrap()
            .limits
            .network
            .unwrap()
            .contains("-nat-")
    );
    lan.route_via_host(&format!("{ip2}/32"));
    let page = lan.get(&format!("http://{ip2}:8080/"), 5);
    assert!(
        page.is_some_and(|p| p.contains("hello from berth")),
        "the LAN host's route does not work"
    );
    t.manager.shutdown().await;
    engine.manager.shutdown().await;
}

/// A `-p` job answers through berth's forwarder, joins a pause container
/// (a warm manager, as the daemon), and its host port is closed once the
/// job ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ported_job_joins_a_pause_and_its_port_closes_when_it_ends() {
    let t = manager();
    t.manager.keep_warm();
    let first = t
        .manager
        .start(in_sandbox(JobSpec::argv(["true"])))
        .await
        .unwrap();
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
    eventually(
        Duration::from_secs(30),
        "a pause on the ended job's network",
        || !pause().is_empty(),
    )
    .await;
    let pause = pause();

    let (job, _) = httpd(&t.manager).await;
    let info = job.info().unwrap();
    let c = docker_inspect("container", info.container_id.as_deref().unwrap()).unwrap();
    assert_eq!(c["HostConfig"]["NetworkMode"], format!("container:{pause}"));
    let port = job.host_port(8080).unwrap();
    let page = http_get(port);
    assert!(
        page.starts_with("HTTP/1.1 200") && page.contains("hello from berth"),
        "{page}"
    );
    let card = berth::card::render(&info, "", false);
    assert!(card.contains(&format!("127.0.0.1:{port}→8080")), "{card}");

    job.kill().await.unwrap();
    job.wait_end().await.unwrap();
    eventually(
        Duration::from_secs(5),
        "the forwarded port closes with its job",
        || std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
    )
    .await;
    t.manager.shutdown().await;
}

/// `berth run --no-daemon -p HOST:8080` forwards from its own process while
/// the job runs, and the port is gone with it; interrupted by ^C, a CI
/// step's SIGTERM or a closed terminal's SIGHUP, the run stops its job and
/// leaves no container (SIGTERM used to kill the run and leave the job).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_daemon_run_forwards_from_its_own_process() {
    use nix::sys::signal::Signal;
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        let dir = tempfile::tempdir().unwrap();
        let host_port = portpicker::pick_unused_port().unwrap();
        let instance = crate::common::instance_name("fwd");
        let mut run = berth(dir.path())
            .env("BERTH_INSTANCE", &instance)
            .args([
                "run",
                "--no-daemon",
                "--runner",
                "docker",
                "--image",
                crate::common::SANDBOX,
            ])
            .args(["-p", &format!("{host_port}:8080"), "--"])
            .args(["sh", "-c", "httpd -p 8080 -h /www; sleep 30"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let answers = || try_http_get(host_port).is_some_and(|p| p.contains("hello from berth"));
        eventually(Duration::from_secs(30), "the run's port answers", answers).await;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(run.id() as i32), signal).unwrap();
        run.wait().unwrap();
        assert!(std::net::TcpStream::connect(("127.0.0.1", host_port)).is_err());
        assert_eq!(
            crate::common::containers_of(&instance),
            0,
            "the run left its container after {signal}"
        );
    }
}

/// A UDP port is forwarded too: datagrams to 127.0.0.1:PORT reach the job
/// and its answers come back to the sender.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_udp_port_is_forwarded_both_ways() {
    let t = manager();
    let echo = "import socket\n\
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(('0.0.0.0',5353)); print('bound',flush=True)\n\
while True:\n    d,a=s.recvfrom(2048); s.sendto(b'echo '+d,a)\n";
    let mut spec = JobSpec::argv(["python3", "-c", echo])
        .with_runner(berth::RunnerChoice::Docker)
        .with_image("berth/dev:latest")
        .background();
    spec.ports.push(berth::PortSpec {
        port: 5353,
        host_port: None,
        proto: berth::model::Proto::Udp,
    });
    let job = t.manager.start(spec).await.unwrap();
    let ready = job
        .wait(&[ReadyCondition::log("bound")], Duration::from_secs(30))
        .await
        .unwrap();
    assert!(ready.is_ready(), "{ready:?}");
    let port = job.info().unwrap().ports[0].host_port;
    let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    client.connect(("127.0.0.1", port)).unwrap();
    client.send(b"ping").unwrap();
    let mut buf = [0u8; 64];
    let n = client.recv(&mut buf).expect("an answer through the forwarder");
    assert_eq!(&buf[..n], b"echo ping");
    t.manager.shutdown().await;
}
