//! The removal of a finished job's container after the job was answered:
//! pending until the engine confirmed, finished by teardown (awaited or
//! blocking), the reuse of a vacated pool network without an inspect, and
//! a dead job's scoped children removed by recovery.

use bollard::models::ContainerCreateBody;
use bollard::query_parameters::CreateContainerOptions;
use pretty_assertions::assert_eq;

use super::{DEFAULT_TEST_IMAGE, Fixture, JOB_LIMIT, ended, inspect_status, texts};
use crate::model::{JobId, JobSpec};
use crate::runner::Exit;
use crate::runner::docker::{LABEL_INSTANCE, LABEL_MANAGED, LABEL_PARENT, LABEL_STATE, container_name};

#[tokio::test]
async fn a_finished_container_is_pending_until_its_removal_is_confirmed() {
    let fx = Fixture::new("pending").await;
    let (launched, out) = fx.launch(1, &JobSpec::argv(["echo", "quick"])).await.unwrap();
    let cid = launched.container_id.clone().unwrap();
    let control = launched.control.clone();
    assert_eq!(ended(launched).await, Exit::Code(0));
    assert_eq!(texts(&out), ["quick"]);
    control.cleanup();
    // Listed from the moment the removal is asked, before the engine answered.
    assert_eq!(fx.engine.removals.unconfirmed(), vec![cid.clone()]);
    fx.engine.settle_removals(JOB_LIMIT).await;
    assert_eq!(inspect_status(fx.docker().await, &cid).await, Some(404));
    assert!(fx.engine.removals.unconfirmed().is_empty());
}

#[tokio::test]
async fn a_blocking_teardown_removes_what_is_still_pending() {
    let fx = Fixture::new("pendblock").await;
    let (launched, _out) = fx.launch(1, &JobSpec::argv(["true"])).await.unwrap();
    let cid = launched.container_id.clone().unwrap();
    let control = launched.control.clone();
    assert_eq!(ended(launched).await, Exit::Code(0));
    // This test's runtime has one thread: the removal task cannot have run
    // yet, as when a runtime winds down with the task still queued.
    control.cleanup();
    fx.engine.remove_pending_blocking();
    assert_eq!(inspect_status(fx.docker().await, &cid).await, Some(404));
    assert!(fx.engine.removals.unconfirmed().is_empty());
}

#[tokio::test]
async fn a_leftover_of_this_instance_with_the_jobs_name_is_cleared() {
    let fx = Fixture::new("leftover").await;
    let id = JobId::from_number(1);
    let name = container_name(&fx.instance, fx.engine.state(), &id);
    let old = create_labelled(&fx, &name, None).await;
    let (launched, out) = fx.launch(1, &JobSpec::argv(["echo", "new"])).await.unwrap();
    assert_ne!(launched.container_id.as_deref(), Some(old.as_str()));
    assert_eq!(inspect_status(fx.docker().await, &old).await, Some(404));
    let control = launched.control.clone();
    assert_eq!(ended(launched).await, Exit::Code(0));
    assert_eq!(texts(&out), ["new"]);
    control.cleanup();
    fx.engine.settle_removals(JOB_LIMIT).await;
}

#[tokio::test]
async fn a_vacated_network_is_reused_and_made_again_when_it_went() {
    let fx = Fixture::new("vacant").await;
    let mut networks = Vec::new();
    for n in 1..=3 {
        let (launched, out) = fx.launch(n, &JobSpec::argv(["echo", "on"])).await.unwrap();
        networks.push(launched.limits.network.clone());
        let control = launched.control.clone();
        assert_eq!(ended(launched).await, Exit::Code(0));
        assert_eq!(texts(&out), ["on"]);
        control.cleanup();
        fx.engine.settle_removals(JOB_LIMIT).await;
        if n == 2 {
            // Teardown of another manager of the instance, say: the
            // vacated network this engine remembers is gone.
            assert_eq!(fx.engine.release_networks().await, 1);
        }
    }
    let first = Some(format!("{}-0", fx.engine.network_name()));
    assert_eq!(networks, [first.clone(), first.clone(), first]);
}

/// Recovery reaps a job whose scoped engine died with its manager: from
/// synchronous code, the children that job started (labelled with its
/// container's name as their parent) go, another job's stay.
#[tokio::test(flavor = "multi_thread")]
async fn a_dead_jobs_scoped_children_are_removed_and_no_other() {
    let fx = Fixture::new("children").await;
    let docker = fx.docker().await;
    let (dead, alive) = (JobId::from_number(1), JobId::from_number(2));
    let mut made = Vec::new();
    for (i, parent) in [&dead, &dead, &alive].into_iter().enumerate() {
        let parent = container_name(&fx.instance, fx.engine.state(), parent);
        let name = format!("{parent}-child-{i}");
        made.push(create_labelled(&fx, &name, Some(&parent)).await);
    }
    // Synchronous, as recovery calls it (here on this runtime's thread).
    let removed = tokio::task::block_in_place(|| fx.engine.remove_children_blocking(&dead));
    assert_eq!(removed, 2);
    assert_eq!(inspect_status(docker, &made[0]).await, Some(404));
    assert_eq!(inspect_status(docker, &made[1]).await, Some(404));
    assert_eq!(
        inspect_status(docker, &made[2]).await,
        None,
        "another job's child stays"
    );
    let removed = tokio::task::block_in_place(|| fx.engine.remove_children_blocking(&alive));
    assert_eq!(removed, 1);
}

/// A container of this test's instance named `name` (a child of `parent`,
/// by its label, when given), as another manager would have left it.
async fn create_labelled(fx: &Fixture, name: &str, parent: Option<&str>) -> String {
    let mut labels = vec![
        (LABEL_MANAGED, "true"),
        (LABEL_INSTANCE, fx.instance.as_str()),
        (LABEL_STATE, fx.engine.state()),
    ];
    labels.extend(parent.map(|p| (LABEL_PARENT, p)));
    let body = ContainerCreateBody {
        image: Some(DEFAULT_TEST_IMAGE.into()),
        cmd: Some(vec!["true".into()]),
        labels: Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    };
    let opts = CreateContainerOptions {
        name: Some(name.to_string()),
        ..Default::default()
    };
    let docker = fx.docker().await;
    docker.create_container(name, opts, body).await.unwrap().id
}
