//! Published ports on the host runner: a port keeps its number when free
//! (the job is told `PORT=` it, the card shows where it really listens, not
//! a mapping), readiness probes what the job actually bound and `run -d`
//! prints the URL that reaches it, and a busy explicit host port is refused
//! rather than remapped (for a container job too).

use std::time::Duration;

use berth::{Error, JobSpec, PortSpec, ReadyCondition, RunnerChoice, WaitOutcome};

use crate::common::manager;

fn host(spec: JobSpec) -> JobSpec {
    spec.with_runner(RunnerChoice::Host).background()
}

fn free_port() -> u16 {
    portpicker::pick_unused_port().expect("a free port")
}

#[tokio::test]
async fn a_fixed_port_app_keeps_its_number_and_the_card_shows_where_it_listens() {
    let t = manager();
    let port = free_port();
    // Getting started's app (docs/src/getting-started.md): a fixed port on 0.0.0.0, whatever PORT says.
    let job = t
        .manager
        .start(
            host(JobSpec::shell(format!(
                "echo \"PORT=$PORT\"; exec python3 -m http.server {port} --bind 0.0.0.0"
            )))
            .with_port(port),
        )
        .await
        .unwrap();
    assert_eq!(job.host_port(port), Some(port), "the number is kept");
    let out = job
        .wait(&[ReadyCondition::http("/")], Duration::from_secs(20))
        .await
        .unwrap();
    assert!(matches!(out, WaitOutcome::Ready { .. }), "{out:?}");
    let info = job.info().unwrap();
    assert_eq!(
        info.ports[0].listen.as_deref(),
        Some(format!("0.0.0.0:{port}").as_str())
    );
    let card = berth::card::render(&info, "", false);
    assert!(card.contains(&format!("0.0.0.0:{port}")), "{card}");
    assert!(!card.contains('→'), "no mapping on the host: {card}");
    let logs = job.logs(&Default::default()).unwrap();
    assert!(
        logs.lines.iter().any(|l| l.text == format!("PORT={port}")),
        "{logs:?}"
    );
    job.kill().await.unwrap();
}

#[tokio::test]
async fn readiness_probes_the_address_the_job_bound() {
    let t = manager();
    let port = free_port();
    // Bound to the IPv6 loopback only: a probe of 127.0.0.1 never connects.
    let job = t
        .manager
        .start(
            host(JobSpec::shell(
                "exec python3 -m http.server \"$PORT\" --bind ::1".to_string(),
            ))
            .with_port(port),
        )
        .await
        .unwrap();
    for cond in [ReadyCondition::port(port), ReadyCondition::http("/")] {
        let out = job.wait(&[cond], Duration::from_secs(20)).await.unwrap();
        assert!(matches!(out, WaitOutcome::Ready { .. }), "{out:?}");
    }
    let info = job.info().unwrap();
    assert_eq!(
        info.ports[0].listen.as_deref(),
        Some(format!("[::1]:{port}").as_str())
    );
    job.kill().await.unwrap();
}

#[tokio::test]
async fn a_busy_explicit_host_port_is_refused_and_leaves_no_job() {
    let t = manager();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let mut spec = host(JobSpec::shell("sleep 30"));
    spec.ports.push(PortSpec {
        port: 8080,
        host_port: Some(port),
        proto: Default::default(),
    });
    let err = t.manager.start(spec).await.unwrap_err();
    assert!(matches!(err, Error::PortInUse { .. }), "{err}");
    assert!(
        err.to_string().contains(&format!("host port {port} is in use")),
        "{err}"
    );
    assert!(t.manager.list(berth::ListFilter::All).is_empty());
}

#[tokio::test]
async fn a_busy_port_not_asked_for_explicitly_is_replaced_and_the_job_told() {
    let t = manager();
    let busy = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let job = t
        .manager
        .start(host(JobSpec::shell("echo \"$PORT\"")).with_port(port))
        .await
        .unwrap();
    let info = job.wait_end().await.unwrap();
    let m = &info.ports[0];
    assert_ne!(m.host_port, port);
    assert!(
        m.note
            .as_deref()
            .unwrap_or("")
            .contains(&format!("port {port} is in use")),
        "{m:?}"
    );
    let line = &job.logs(&Default::default()).unwrap().lines[0].text;
    assert_eq!(line, &m.host_port.to_string());
}

/// `berth run -d` prints where a host job really listens: a server bound to
/// the IPv6 loopback only is `http://[::1]:PORT` (127.0.0.1 would not reach
/// it), and that URL answers; the card shows `[::1]:PORT`.
#[test]
fn the_url_of_a_host_job_bound_to_ipv6_loopback_reaches_it() {
    let d = crate::common::Daemon::start();
    let port = free_port().to_string();
    let (code, out, err) = d.run(&[
        "run",
        "-d",
        "--runner",
        "host",
        "-p",
        &port,
        "--ready-http",
        "/",
        "--",
        "python3",
        "-m",
        "http.server",
        &port,
        "--bind",
        "::1",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let url = format!("http://[::1]:{port}");
    assert!(out.contains(&format!("→ {url}")), "the printed URL: {out}");
    assert!(!out.contains(&format!("127.0.0.1:{port}")), "{out}");
    // The printed address answers.
    let addr: std::net::SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    let mut s = std::net::TcpStream::connect(addr).expect("the printed URL reaches the server");
    use std::io::{Read, Write};
    write!(s, "GET / HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
    let (_, card, _) = d.run(&["status", "job-1"]);
    assert!(card.contains(&format!("[::1]:{port}")), "{card}");
    assert_eq!(d.run(&["kill", "job-1"]).0, 0);
}

/// A container job whose explicit host port is busy on this machine is
/// refused with one line (`port_in_use`), and leaves no job and no
/// container behind.
#[test]
fn a_busy_explicit_host_port_of_a_container_job_is_refused_and_leaves_nothing() {
    let d = crate::common::Daemon::start();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let publish = format!("{port}:8080");
    let (code, out, err) = d.run(&[
        "run",
        "-d",
        "--runner",
        "docker",
        "--image",
        crate::common::SANDBOX,
        "-p",
        &publish,
        "--",
        "httpd",
        "-f",
        "-p",
        "8080",
        "-h",
        "/www",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains(&format!("host port {port} is in use")), "{err}");
    // Through the API: 409 with the code.
    let body = format!(
        r#"{{"argv":["httpd","-f","-p","8080","-h","/www"],"runner":"docker","image":"{}","ports":[{{"port":8080,"host_port":{port}}}],"background":true}}"#,
        crate::common::SANDBOX
    );
    let o = std::process::Command::new("curl")
        .args(["-s", "-o", "-", "-w", "\n%{http_code}", "--unix-socket"])
        .arg(d.socket())
        .args([
            "-H",
            "content-type: application/json",
            "-d",
            &body,
            "http://berth/v1/jobs",
        ])
        .output()
        .expect("curl");
    let answer = String::from_utf8_lossy(&o.stdout);
    assert!(answer.ends_with("\n409"), "{answer}");
    assert!(answer.contains(r#""code":"port_in_use""#), "{answer}");
    let jobs = d.json(&["ps", "--all"]);
    assert_eq!(jobs.as_array().map(Vec::len), Some(0), "no job recorded: {jobs}");
    assert_eq!(crate::common::containers_of(&d.instance), 0, "no container left");
    drop(busy);
}
