//! Engine failures as a user meets them: each names the operation and the
//! object it was about, keeps the engine's error as its source, and says the
//! engine's reason on one line.

use std::error::Error as _;

use pretty_assertions::assert_eq;

use super::{Fixture, JOB_LIMIT, ended};
use crate::error::{EngineOp, Error};
use crate::model::JobSpec;
use crate::runner::Exit;

/// The parts of an engine failure: (operation, target, status, has source).
fn parts(e: &Error) -> (EngineOp, String, Option<u16>, bool) {
    match e {
        Error::Engine { op, target, .. } => (*op, target.clone(), e.engine_status(), e.source().is_some()),
        other => panic!("not an engine failure: {other:?}"),
    }
}

#[tokio::test]
async fn a_removed_container_fails_naming_the_operation_and_keeping_the_source() {
    let fx = Fixture::new("engerr").await;
    let (launched, _out) = fx.launch(1, &JobSpec::argv(["true"])).await.unwrap();
    let cid = launched.container_id.clone().unwrap();
    let control = launched.control.clone();
    assert_eq!(ended(launched).await, Exit::Code(0));
    control.cleanup();
    fx.engine.settle_removals(JOB_LIMIT).await;
    let docker = fx.docker().await;

    let e = docker.inspect_container(&cid).await.unwrap_err();
    assert_eq!(
        parts(&e),
        (EngineOp::InspectContainer, cid.clone(), Some(404), true)
    );
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("Docker engine failed to inspect container {cid}: "))
            && text.contains("No such container")
            && !text.contains('\n'),
        "{text}"
    );
    // The source is the engine's own answer, not words made from it.
    let source = e.source().unwrap().downcast_ref::<bollard::errors::Error>();
    assert!(
        matches!(
            source,
            Some(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. })
        ),
        "{source:?}"
    );
    assert_eq!((e.code(), e.http_status()), ("docker", 502));

    let e = docker.start_container(&cid).await.unwrap_err();
    assert_eq!(
        parts(&e),
        (EngineOp::StartContainer, cid.clone(), Some(404), true)
    );
    assert!(
        e.to_string()
            .starts_with("Docker engine failed to start container "),
        "{e}"
    );
}

#[tokio::test]
async fn a_missing_image_fails_naming_the_image() {
    let fx = Fixture::new("engimg").await;
    let image = "berth/no-such-image-for-tests:never";
    let e = fx.docker().await.inspect_image(image).await.unwrap_err();
    assert_eq!(
        parts(&e),
        (EngineOp::InspectImage, image.to_string(), Some(404), true)
    );
    assert!(
        e.to_string()
            .starts_with(&format!("Docker engine failed to inspect image {image}: ")),
        "{e}"
    );
}
