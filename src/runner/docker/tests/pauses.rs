//! Pause containers at the engine level: made once a job on a pool network
//! ended (when the engine keeps warm), joined by the next job (at the
//! pause's address), ports or not, unless the engine publishes its ports,
//! and removed when the engine is dropped without a shutdown.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::query_parameters::ListContainersOptions;
use pretty_assertions::assert_eq;

use super::{Fixture, JOB_LIMIT, ended};
use crate::config::Config;
use crate::model::{JobId, JobSpec};
use crate::runner::Exit;
use crate::runner::docker::pause::LABEL_PAUSE;
use crate::runner::docker::{DockerClient, Engine, LABEL_INSTANCE};

/// The pause containers (any state) of `instance`.
async fn pauses(docker: &DockerClient, instance: &str) -> Vec<String> {
    let labels = vec![LABEL_PAUSE.to_string(), format!("{LABEL_INSTANCE}={instance}")];
    let opts = ListContainersOptions {
        all: true,
        filters: Some(HashMap::from([("label".to_string(), labels)])),
        ..Default::default()
    };
    let list = docker.list_containers(opts).await.unwrap();
    list.into_iter().filter_map(|c| c.id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_is_joined_by_the_next_job_and_goes_with_the_engine() {
    let fx = Fixture::new("pauses").await;
    let docker = fx.docker().await.clone();
    let config = Config::isolated(fx.dir.path().join("state"), &fx.instance).with_workspace(&fx.workspace);
    let engine = Engine::new(&config);
    engine.keep_warm();
    let run = |n: u64, spec: JobSpec| {
        let (engine, fx) = (&engine, &fx);
        async move {
            let id = JobId::from_number(n);
            let out = fx.output(&id);
            let launched = engine.launch(&id, &spec, &fx.workspace, &out).await.unwrap();
            let cid = launched.container_id.clone().unwrap();
            // Read before the container is removed (cleanup, below).
            let c = engine
                .client()
                .await
                .unwrap()
                .inspect_container(&cid)
                .await
                .unwrap();
            let mode = c.host_config.unwrap().network_mode.unwrap();
            let ip = launched.internal_ip;
            let network = launched.limits.network.clone().unwrap();
            let control = launched.control.clone();
            assert_eq!(ended(launched).await, Exit::Code(0));
            control.cleanup();
            (mode, ip, network)
        }
    };
    run(1, JobSpec::argv(["true"])).await;
    let deadline = Instant::now() + JOB_LIMIT;
    while !engine.pool.pauses.has(0) {
        assert!(
            Instant::now() < deadline,
            "no pause was made on the first network"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pause = engine.pool.pauses.of(0).unwrap();
    assert_eq!(pauses(&docker, &fx.instance).await, vec![pause.id.clone()]);

    // Without ports: joins the pause, and has its address.
    let (mode, ip, _) = run(2, JobSpec::argv(["true"])).await;
    assert_eq!(mode, format!("container:{}", pause.id));
    assert_eq!(ip, pause.ip);

    // With a port berth forwards: joins it too.
    engine.settle_removals(JOB_LIMIT).await;
    engine.pool.pauses.settle(JOB_LIMIT).await;
    let (mode, ip, _) = run(3, JobSpec::argv(["true"]).with_port(8080)).await;
    assert_eq!(mode, format!("container:{}", pause.id));
    assert_eq!(ip, pause.ip);

    // Dropped without a shutdown (a process ending): nothing is left.
    engine.settle_removals(JOB_LIMIT).await;
    drop(engine);
    assert_eq!(pauses(&docker, &fx.instance).await, Vec::<String>::new());
}

/// A port the engine publishes (`publish = "engine"`) needs a network of
/// the job's own (the engine publishes only for such a container), with a
/// way out (none on an internal network): a NAT'd one, never a pause's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_the_engine_publishes_gets_a_nat_network_of_its_own() {
    let fx = Fixture::new("engine-publish").await;
    let mut config =
        Config::isolated(fx.dir.path().join("state"), &fx.instance).with_workspace(&fx.workspace);
    config.publish = crate::model::Publish::Engine;
    let engine = Engine::new(&config);
    engine.keep_warm();
    for n in 1..=2 {
        let id = JobId::from_number(n);
        let out = fx.output(&id);
        let spec = JobSpec::argv(["true"]).with_port(8080);
        let launched = engine.launch(&id, &spec, &fx.workspace, &out).await.unwrap();
        let cid = launched.container_id.clone().unwrap();
        let c = engine
            .client()
            .await
            .unwrap()
            .inspect_container(&cid)
            .await
            .unwrap();
        let hc = c.host_config.unwrap();
        assert!(!hc.network_mode.unwrap().starts_with("container:"));
        assert!(hc.port_bindings.is_some_and(|b| b.contains_key("8080/tcp")));
        let net = launched.limits.network.clone().unwrap();
        assert!(net.contains("-nat-"), "{net}");
        assert_eq!(launched.limits.egress.as_deref(), Some("all"));
        assert!(launched.limits.not_enforced[0].contains("publish = engine"));
        let control = launched.control.clone();
        assert_eq!(ended(launched).await, Exit::Code(0));
        control.cleanup();
        engine.settle_removals(JOB_LIMIT).await;
    }
    // Its network gets no pause (such jobs never use one, and the pool
    // would grow by a network per such job).
    assert_eq!(
        pauses(&fx.docker().await.clone(), &fx.instance).await,
        Vec::<String>::new()
    );
    engine.release_networks().await;
}
