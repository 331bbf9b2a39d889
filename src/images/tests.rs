//! Unit tests of the image choice and the pull words (no engine).

use super::*;
use crate::config::Config;

fn project(dir: &std::path::Path) -> Config {
    let mut c = Config::isolated(dir.join("state"), "t");
    c.workspace = dir.to_path_buf();
    c
}

#[test]
fn asked_image_wins() {
    let dir = tempfile::tempdir().unwrap();
    let spec = JobSpec {
        image: Some("alpine:3".into()),
        ..Default::default()
    };
    let c = choose_image(&spec, &project(dir.path()), true);
    assert_eq!(c.name, "alpine:3");
    assert!(c.why.contains("--image"), "{}", c.why);
}

#[test]
fn configured_image_then_devcontainer_then_dev_then_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = project(dir.path());
    let spec = JobSpec::default();
    assert_eq!(choose_image(&spec, &p, false).name, DEFAULT_IMAGE);
    assert_eq!(choose_image(&spec, &p, true).name, DEV_IMAGE);

    std::fs::create_dir(dir.path().join(".devcontainer")).unwrap();
    std::fs::write(
        dir.path().join(".devcontainer/devcontainer.json"),
        "{\n // a comment\n \"name\": \"x\",\n \"image\": \"python:3.12\",\n}\n",
    )
    .unwrap();
    let c = choose_image(&spec, &p, true);
    assert_eq!(c.name, "python:3.12");
    assert!(c.why.contains("devcontainer.json"), "{}", c.why);

    p.image = "node:20".into();
    p.sources
        .insert("image", Source::File(dir.path().join("berth.toml")));
    let c = choose_image(&spec, &p, true);
    assert_eq!(c.name, "node:20");
    assert!(c.why.contains("berth.toml"), "{}", c.why);
}

#[test]
fn registries_and_hints() {
    assert_eq!(registry_of("alpine"), "docker.io");
    assert_eq!(registry_of("library/alpine:3"), "docker.io");
    assert_eq!(registry_of("127.0.0.1:5000/x:1"), "127.0.0.1:5000");
    assert_eq!(registry_of("ghcr.io/o/x"), "ghcr.io");
    assert!(
        pull_hint("ghcr.io/o/x", "unauthorized: authentication required").contains("docker login ghcr.io")
    );
    assert!(pull_hint("x:1", "manifest unknown").contains("image name and tag"));
    assert!(
        pull_hint(
            "127.0.0.1:9/x",
            "dial tcp 127.0.0.1:9: connect: connection refused"
        )
        .contains("reaches 127.0.0.1:9")
    );
    assert_eq!("never".parse::<PullPolicy>().unwrap(), PullPolicy::Never);
    assert!("sometimes".parse::<PullPolicy>().is_err());
}
