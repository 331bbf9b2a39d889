//! Published ports on the host runner: a port keeps its number when free
//! (the job is told `PORT=` it, the card shows where it really listens, not
//! a mapping), readiness probes what the job actually bound, and a busy
//! explicit host port is refused rather than remapped.

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
    // The README's app: a fixed port on 0.0.0.0, whatever PORT says.
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
