//! Unit tests of the image choice and the pull words (no engine).

use super::*;
use crate::config::Config;

fn named(c: Choice) -> ImageChoice {
    match c {
        Choice::Image(i) => i,
        Choice::Build { build, .. } => panic!("a build of {}", build.dockerfile.display()),
    }
}

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
    let c = named(choose_image(&spec, &project(dir.path()), true).unwrap());
    assert_eq!(c.name, "alpine:3");
    assert!(c.why.contains("--image"), "{}", c.why);
}

#[test]
fn configured_image_then_devcontainer_then_dev_then_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = project(dir.path());
    let spec = JobSpec::default();
    assert_eq!(named(choose_image(&spec, &p, false).unwrap()).name, DEFAULT_IMAGE);
    assert_eq!(named(choose_image(&spec, &p, true).unwrap()).name, DEV_IMAGE);

    std::fs::create_dir(dir.path().join(".devcontainer")).unwrap();
    std::fs::write(
        dir.path().join(".devcontainer/devcontainer.json"),
        "{\n // a comment\n \"name\": \"x\",\n \"image\": \"python:3.12\",\n}\n",
    )
    .unwrap();
    let c = named(choose_image(&spec, &p, true).unwrap());
    assert_eq!(c.name, "python:3.12");
    assert!(c.why.contains("devcontainer.json"), "{}", c.why);

    p.image = "node:20".into();
    p.sources
        .insert("image", Source::File(dir.path().join("berth.toml")));
    let c = named(choose_image(&spec, &p, true).unwrap());
    assert_eq!(c.name, "node:20");
    assert!(c.why.contains("berth.toml"), "{}", c.why);
}

#[test]
fn dockerfiles_from_berth_toml_and_devcontainer() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir(ws.join(".devcontainer")).unwrap();
    std::fs::write(
        ws.join(".devcontainer/devcontainer.json"),
        "{ \"build\": { \"dockerfile\": \"Dockerfile\", \"context\": \"..\", \"args\": {\"V\": \"1\"} } }",
    )
    .unwrap();
    let spec = JobSpec::default();
    let mut p = project(ws);
    // Not trusted: the build (its RUN steps) is refused, naming the file.
    let err = choose_image(&spec, &p, true).unwrap_err().to_string();
    assert!(
        err.contains("devcontainer.json") && err.contains("berth trust"),
        "{err}"
    );
    let user = ws.join("user.toml");
    let trust = |file: &str| {
        let f = ws.join(file).canonicalize().unwrap();
        let d = crate::trust::digest(&std::fs::read(&f).unwrap());
        crate::trust::record(&user, &f, Some(&d)).unwrap();
    };
    trust(".devcontainer/devcontainer.json");
    let mut table: toml::Table = std::fs::read_to_string(&user).unwrap().parse().unwrap();
    p.trusted = crate::trust::Trusted::take_from(&mut table, &user).unwrap();
    let Choice::Build { build, why } = choose_image(&spec, &p, true).unwrap() else {
        panic!("a build")
    };
    assert_eq!(build.dockerfile, ws.join(".devcontainer/Dockerfile"));
    assert_eq!(build.context, ws.join(".devcontainer/.."));
    assert_eq!(build.args["V"], "1");
    assert!(why.contains("build.dockerfile"), "{why}");

    // berth.toml says more than devcontainer.json.
    std::fs::write(
        ws.join("berth.toml"),
        "[image]\ndockerfile = \"docker/Dockerfile\"\n",
    )
    .unwrap();
    let user_env = user.to_string_lossy().into_owned();
    let load = || {
        Config::load_with(ws, Default::default(), |k| {
            (k == crate::trust::USER_CONFIG_ENV).then(|| user_env.clone())
        })
        .unwrap()
    };
    // Untrusted, the berth.toml build is left out (and starts are refused).
    let c = load();
    assert_eq!(c.untrusted[0].key, "image.dockerfile");
    trust("berth.toml");
    let c = load();
    let Choice::Build { build, why } = choose_image(&spec, &c, true).unwrap() else {
        panic!("a build")
    };
    assert_eq!(build.dockerfile, ws.join("docker/Dockerfile"));
    assert_eq!(build.context, ws.join("docker"));
    assert!(why.contains("berth.toml"), "{why}");
    // A name from the environment replaces the build.
    let env = |k: &str| match k {
        "BERTH_IMAGE" => Some("alpine:3".to_string()),
        crate::trust::USER_CONFIG_ENV => Some(user_env.clone()),
        _ => None,
    };
    let c = Config::load_with(ws, Default::default(), env).unwrap();
    assert_eq!(named(choose_image(&spec, &c, true).unwrap()).name, "alpine:3");
}

/// A devcontainer.json over the bound (a 500 MB sparse file) or that is
/// not a regular file (a FIFO, which would block a read) is not read: the
/// choice falls through and says why.
#[test]
fn oversized_or_odd_devcontainer_files_are_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir(ws.join(".devcontainer")).unwrap();
    let path = ws.join(".devcontainer/devcontainer.json");
    let mut f = std::fs::File::create(&path).unwrap();
    // Its first byte is not UTF-8: any read of the file, bounded or whole,
    // fails on it and would say "cannot be read"; only a refusal made from
    // its size alone names the size.
    std::io::Write::write_all(&mut f, &[0xff]).unwrap();
    f.set_len(500 << 20).unwrap();
    let c = named(choose_image(&JobSpec::default(), &project(ws), true).unwrap());
    assert_eq!(c.name, DEV_IMAGE);
    assert!(
        c.why
            .contains("devcontainer.json was not read: it is 524288000 bytes, over the 1048576"),
        "{}",
        c.why
    );
    std::fs::remove_file(&path).unwrap();
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let c = named(choose_image(&JobSpec::default(), &project(ws), false).unwrap());
    assert_eq!(c.name, DEFAULT_IMAGE);
    assert!(c.why.contains("not a regular file"), "{}", c.why);
    // Exactly at the bound it is read.
    std::fs::remove_file(&path).unwrap();
    let json = format!("{{\"image\": \"python:3.12\"}}{}", " ".repeat(1 << 20));
    std::fs::write(&path, &json[..1 << 20]).unwrap();
    assert_eq!(
        named(choose_image(&JobSpec::default(), &project(ws), true).unwrap()).name,
        "python:3.12"
    );
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

/// A devcontainer file that links to another project's trusted one is not
/// read through: the choice says why, and no build of the other's runs.
#[test]
fn a_symlinked_devcontainer_file_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(a.join(".devcontainer")).unwrap();
    std::fs::create_dir_all(b.join(".devcontainer")).unwrap();
    let target = a.join(".devcontainer/devcontainer.json");
    std::fs::write(&target, "{ \"image\": \"theirs:1\" }").unwrap();
    std::os::unix::fs::symlink(&target, b.join(".devcontainer/devcontainer.json")).unwrap();
    let c = named(choose_image(&JobSpec::default(), &project(&b), true).unwrap());
    assert_ne!(c.name, "theirs:1");
    assert!(c.why.contains("symlink"), "{}", c.why);
}
