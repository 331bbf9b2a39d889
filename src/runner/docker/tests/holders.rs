//! Network holders at the engine level: made once a job on a pool network
//! ended (when the engine keeps warm), joined by the next job without
//! ports (at the holder's address), never by a job with ports, and removed
//! when the engine is dropped without a shutdown.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::query_parameters::ListContainersOptions;
use pretty_assertions::assert_eq;

use super::{Fixture, JOB_LIMIT, ended};
use crate::config::Config;
use crate::model::{JobId, JobSpec};
use crate::runner::Exit;
use crate::runner::docker::holder::LABEL_HOLDER;
use crate::runner::docker::{DockerClient, Engine, LABEL_INSTANCE};

/// The holder containers (any state) of `instance`.
async fn holders(docker: &DockerClient, instance: &str) -> Vec<String> {
    let labels = vec![LABEL_HOLDER.to_string(), format!("{LABEL_INSTANCE}={instance}")];
    let opts = ListContainersOptions {
        all: true,
        filters: Some(HashMap::from([("label".to_string(), labels)])),
        ..Default::default()
    };
    let list = docker.list_containers(opts).await.unwrap();
    list.into_iter().filter_map(|c| c.id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_is_joined_by_a_portless_job_only_and_goes_with_the_engine() {
    let fx = Fixture::new("holders").await;
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
    while !engine.pool.holders.has(0) {
        assert!(
            Instant::now() < deadline,
            "no holder was made on the first network"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let holder = engine.pool.holders.of(0).unwrap();
    assert_eq!(holders(&docker, &fx.instance).await, vec![holder.id.clone()]);

    // Without ports: joins the holder, and has its address.
    let (mode, ip, _) = run(2, JobSpec::argv(["true"])).await;
    assert_eq!(mode, format!("container:{}", holder.id));
    assert_eq!(ip, holder.ip);

    // With a port: a network of its own (the engine publishes it).
    let (mode, _, ported_net) = run(3, JobSpec::argv(["true"]).with_port(8080)).await;
    assert!(!mode.starts_with("container:"), "{mode}");

    // Its network gets no holder (jobs with ports would never use it, and
    // the pool would grow by a network per such job).
    engine.settle_removals(JOB_LIMIT).await;
    engine.pool.holders.settle(JOB_LIMIT).await;
    assert_eq!(holders(&docker, &fx.instance).await, vec![holder.id.clone()]);
    // The next job with a port reuses that network.
    let (_, _, again) = run(4, JobSpec::argv(["true"]).with_port(8080)).await;
    assert_eq!(again, ported_net);

    // Dropped without a shutdown (a process ending): nothing is left.
    engine.settle_removals(JOB_LIMIT).await;
    drop(engine);
    assert_eq!(holders(&docker, &fx.instance).await, Vec::<String>::new());
}
