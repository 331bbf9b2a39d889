//! The loosenings a project file makes, and what trust does with them:
//! raised limits, wider egress, a scoped engine, weaker isolation, a
//! workspace that escapes the file's directory, and the keys only the
//! user's own config may set.

use super::super::Layer;
use super::*;
use crate::model::Isolation;

/// A project at `dir` with `berth.toml` holding `text`, loaded with a
/// user config at `user` (may be missing).
fn load(dir: &Path, text: &str, user: &Path) -> Config {
    std::fs::write(dir.join("berth.toml"), text).unwrap();
    let user = user.to_string_lossy().into_owned();
    Config::load_with(dir, Layer::default(), |k| {
        (k == crate::trust::USER_CONFIG_ENV).then(|| user.clone())
    })
    .unwrap()
}

#[test]
fn an_untrusted_file_cannot_put_the_projects_jobs_in_one_pod() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("proj");
    std::fs::create_dir_all(&dir).unwrap();
    let c = load(&dir, "network = \"project\"\n", &tmp.path().join("user.toml"));
    let keys: Vec<&str> = c.untrusted.iter().map(|l| l.key).collect();
    assert_eq!(keys, ["network"]);
    assert_eq!(c.network, Network::Isolated);
}

#[test]
fn raising_limits_needs_trust_and_lowering_does_not() {
    let tmp = tempfile::tempdir().unwrap();
    let user = tmp.path().join("user.toml");
    let c = load(
        tmp.path(),
        "memory = \"20g\"\npids = 32768\nmax_output = \"100g\"\nring_size = \"1g\"\nkeep_runs = 100000\ncpus = 0.5\n",
        &user,
    );
    let keys: Vec<&str> = c.untrusted.iter().map(|l| l.key).collect();
    assert_eq!(keys, ["memory", "pids", "max_output", "ring_size", "keep_runs"]);
    let base = load(tmp.path(), "", &user);
    assert_eq!(c.limits.memory, base.limits.memory, "not applied");
    assert_eq!(c.limits.pids, base.limits.pids);
    assert_eq!(
        (c.max_output_bytes, c.ring_bytes, c.keep_runs),
        (base.max_output_bytes, base.ring_bytes, base.keep_runs)
    );
    assert_eq!(c.limits.cpus, Some(0.5), "a lower limit applies untrusted");
    // Reverted values are the user's again, and say so in `berth config`.
    for key in ["memory", "pids", "max_output", "ring_size", "keep_runs"] {
        let from = c.sources.get(key);
        assert!(
            !matches!(from, Some(Source::File(p)) if p.ends_with("berth.toml")),
            "{key}: {from:?}"
        );
    }
}

#[test]
fn an_untrusted_file_cannot_loosen_and_a_trusted_one_can() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("proj");
    std::fs::create_dir_all(&dir).unwrap();
    let user = tmp.path().join("user.toml");
    let text = "runner = \"host\"\nuser = \"root\"\nnetwork = \"bridge\"\nworkspace = \"/usr/local/share\"\n\
                fallback = true\n[safety]\ndefault_blocklist = false\nallow_env = [\"LD_PRELOAD\"]\n";
    let c = load(&dir, text, &user);
    let keys: Vec<&str> = c.untrusted.iter().map(|l| l.key).collect();
    // fallback = true is the default already: no loosening.
    assert_eq!(
        keys,
        [
            "runner",
            "user",
            "network",
            "workspace",
            "safety.default_blocklist",
            "safety.allow_env"
        ]
    );
    assert_eq!(c.runner, RunnerChoice::Auto);
    assert_eq!(c.user, None);
    assert_eq!(c.network, Network::Isolated);
    assert_eq!(c.workspace, dir);
    assert!(c.safety.default_blocklist && c.safety.allow_env.is_empty());
    let err = c.untrusted[0].refusal().to_string();
    assert!(
        err.contains("runner = \"host\"") && err.contains("berth trust"),
        "{err}"
    );

    let file = std::fs::canonicalize(dir.join("berth.toml")).unwrap();
    crate::trust::record(&user, &file, Some(&crate::trust::digest(text.as_bytes()))).unwrap();
    let c = load(&dir, text, &user);
    assert!(c.untrusted.is_empty(), "{:?}", c.untrusted);
    assert_eq!(c.runner, RunnerChoice::Host);
    assert_eq!(c.user.as_deref(), Some("root"));
    assert!(!c.safety.default_blocklist);

    // One byte changed: untrusted again.
    let c = load(&dir, &format!("{text}\n"), &user);
    assert_eq!(c.untrusted.len(), 6);
}

#[test]
fn tightening_needs_no_trust_and_the_users_own_say_is_not_the_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("proj");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let user = tmp.path().join("user.toml");
    let c = load(
        &dir,
        "runner = \"docker\"\nnetwork = \"none\"\nread_only = true\nfallback = false\nworkspace = \"sub\"\n\
         image = \"x:1\"\n[safety]\nblocked = [{ pattern = \"x\", reason = \"y\" }]\n",
        &user,
    );
    assert!(c.untrusted.is_empty(), "{:?}", c.untrusted);
    assert_eq!(c.workspace, dir.join("sub"));
    // The user's config allows what the project then repeats.
    std::fs::write(&user, "runner = \"host\"\nnetwork = \"bridge\"\n").unwrap();
    let c = load(&dir, "runner = \"host\"\nnetwork = \"bridge\"\n", &user);
    assert!(c.untrusted.is_empty(), "{:?}", c.untrusted);
    assert_eq!(c.runner, RunnerChoice::Host);
    // The user's read_only = true cannot be undone by the project.
    std::fs::write(&user, "read_only = true\n").unwrap();
    let c = load(&dir, "read_only = false\n", &user);
    assert_eq!(
        c.untrusted.iter().map(|l| l.key).collect::<Vec<_>>(),
        ["read_only"]
    );
    assert!(c.read_only);
}

#[test]
fn a_scoped_engine_from_a_project_file_needs_trust() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("proj");
    std::fs::create_dir_all(&dir).unwrap();
    let user = tmp.path().join("user.toml");
    let text = "engine = \"scoped\"\nallow_engine = true\nmax_children = 20\n";
    let c = load(&dir, text, &user);
    assert_eq!(
        c.untrusted.iter().map(|l| l.key).collect::<Vec<_>>(),
        ["engine", "allow_engine", "max_children"]
    );
    assert_eq!(c.engine, EngineAccess::None);
    assert!(!c.allow_engine);
    assert_eq!(c.max_children, crate::config::DEFAULT_MAX_CHILDREN);
    // Fewer children, or none, only tightens.
    let c = load(&dir, "engine = \"none\"\nmax_children = 2\n", &user);
    assert!(c.untrusted.is_empty(), "{:?}", c.untrusted);
    assert_eq!(c.max_children, 2);
    // The user's own config says scoped: the project repeating it is fine.
    std::fs::write(&user, "engine = \"scoped\"\n").unwrap();
    let c = load(&dir, "engine = \"scoped\"\n", &user);
    assert!(c.untrusted.is_empty(), "{:?}", c.untrusted);
    assert_eq!(c.engine, EngineAccess::Scoped);
    let err = Config::load_with(&dir, Layer::default(), |k| {
        (k == "BERTH_ENGINE").then(|| "all".to_string())
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("engine") && err.contains("scoped") && !err.contains('\n'),
        "{err}"
    );
}

#[test]
fn wider_egress_and_engine_publishing_need_trust() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("proj");
    std::fs::create_dir_all(&dir).unwrap();
    let user = tmp.path().join("user.toml");
    let c = load(
        &dir,
        "egress = \"all\"\negress_allow = [\"evil.example\"]\npublish = \"engine\"\n",
        &user,
    );
    let keys: Vec<&str> = c.untrusted.iter().map(|l| l.key).collect();
    assert_eq!(keys, ["egress", "egress_allow", "publish"]);
    assert_eq!(c.egress, Egress::Proxy);
    assert!(!c.egress_allow.iter().any(|h| h == "evil.example"));
    assert_eq!(c.publish, Publish::Berth);
    // Narrower is fine without trust.
    let c = load(&dir, "egress = \"none\"\n", &user);
    assert!(c.untrusted.is_empty(), "{:?}", c.untrusted);
    assert_eq!(c.egress, Egress::None);
}

#[test]
fn a_weaker_isolation_or_another_runtime_needs_trust_a_stronger_one_does_not() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("proj");
    std::fs::create_dir_all(&dir).unwrap();
    let user = tmp.path().join("user.toml");
    std::fs::write(&user, "isolation = \"gvisor\"\n").unwrap();
    let c = load(
        &dir,
        "isolation = \"container\"\ngvisor_runtime = \"runc\"\n",
        &user,
    );
    let keys: Vec<&str> = c.untrusted.iter().map(|l| l.key).collect();
    assert_eq!(keys, ["isolation", "gvisor_runtime"]);
    assert_eq!(
        (c.isolation, c.gvisor_runtime.as_str()),
        (Isolation::Gvisor, "runsc")
    );
    std::fs::write(&user, "").unwrap();
    let c = load(&dir, "isolation = \"gvisor\"\n", &user);
    assert!(c.untrusted.is_empty(), "{:?}", c.untrusted);
    assert_eq!(c.isolation, Isolation::Gvisor);
}

#[test]
fn only_the_users_own_config_lets_a_build_add_urls() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("proj");
    std::fs::create_dir_all(&dir).unwrap();
    let user = tmp.path().join("user.toml");
    let text = "build_add_urls = true\n";
    let c = load(&dir, text, &user);
    assert_eq!(
        c.untrusted.iter().map(|l| l.key).collect::<Vec<_>>(),
        ["build_add_urls"]
    );
    assert!(!c.build_add_urls);
    // Trusted, the file still cannot give it (its Dockerfile is not trusted).
    let file = std::fs::canonicalize(dir.join("berth.toml")).unwrap();
    crate::trust::record(&user, &file, Some(&crate::trust::digest(text.as_bytes()))).unwrap();
    let c = load(&dir, text, &user);
    assert!(c.untrusted.is_empty(), "{:?}", c.untrusted);
    assert!(!c.build_add_urls);
    // The user's own config gives it.
    let mut own = std::fs::read_to_string(&user).unwrap();
    own.insert_str(0, "build_add_urls = true\n");
    std::fs::write(&user, own).unwrap();
    let c = load(&dir, "", &user);
    assert!(c.build_add_urls);
}

#[test]
fn a_workspace_escaping_by_dotdot_or_symlink_is_outside() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("proj");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink("/home", dir.join("link")).unwrap();
    let user = tmp.path().join("user.toml");
    for ws in ["..", "sub/../..", "link", "/home"] {
        let c = load(&dir, &format!("workspace = \"{ws}\"\n"), &user);
        assert_eq!(
            c.untrusted.iter().map(|l| l.key).collect::<Vec<_>>(),
            ["workspace"],
            "{ws}"
        );
        assert_eq!(c.workspace, dir, "{ws}");
    }
}

/// Every key a loosening can name has a way back: a new row of `LOOSER`
/// without one in `PUT_BACK` (or an arm of `revert`) would let an
/// untrusted file keep its value.
#[test]
fn every_loosening_key_has_a_way_back() {
    // The loosenings `loosenings` names beside the rows of `LOOSER`.
    const OTHER: &[&str] = &[
        "workspace",
        "image.dockerfile",
        "safety.default_blocklist",
        "safety.allow_env",
        "safety.security_log",
    ];
    let dir = tempfile::tempdir().unwrap();
    let base = Config::isolated(dir.path(), "t");
    for key in LOOSER.iter().map(|(k, _)| *k).chain(OTHER.iter().copied()) {
        let mut c = base.clone();
        assert!(revert(&mut c, &base, key), "no way back for `{key}`");
    }
}
