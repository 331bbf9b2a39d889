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

/// Every key of the key table either has a row (a test and a way back in
/// one) or is listed as never loosening: a new key cannot slip past
/// trust unclassified.
#[test]
fn every_key_is_a_loosening_or_said_not_to_be() {
    for key in super::super::keys::FIELDS {
        let row = ROWS
            .iter()
            .any(|r| r.key == *key || r.set_by == Some(key) || r.key.starts_with(&format!("{key}.")));
        assert!(
            row != NEVER_LOOSENS.contains(key),
            "`{key}` must be in exactly one of loosen.rs's ROWS and NEVER_LOOSENS"
        );
    }
    for key in NEVER_LOOSENS {
        assert!(super::super::keys::FIELDS.contains(key), "`{key}` is not a key");
    }
}

/// Every row puts its key back: a config looser than the baseline in
/// every row (each row must see it as loose, so the check can fail) is
/// not looser in that row once it is reverted.
#[test]
fn every_loosening_key_has_a_way_back() {
    use crate::model::{Isolation, WriteMode};
    let dir = tempfile::tempdir().unwrap();
    let mut base = Config::isolated(dir.path(), "t");
    (
        base.fallback,
        base.read_only,
        base.isolation,
        base.agent_isolation,
    ) = (false, true, Isolation::Gvisor, Isolation::Gvisor);
    base.limits.cpus = Some(1.0);
    base.limits.memory = Some(1 << 30);
    base.limits.pids = Some(100);
    base.apply_protect = vec![".git/**".into()];
    base.safety.allow_env = vec!["CI".into()];
    (base.write, base.agent_write) = (WriteMode::ReadOnly, WriteMode::ReadOnly);
    let mut c = base.clone();
    let file = dir.path().join("berth.toml");
    c.sources.insert("workspace", Source::File(file.clone()));
    (c.runner, c.network, c.egress, c.publish, c.engine) = (
        RunnerChoice::Host,
        Network::Bridge,
        Egress::All,
        Publish::Engine,
        EngineAccess::Scoped,
    );
    (c.allow_host, c.fallback, c.allow_engine, c.read_only) = (true, true, true, false);
    (c.agent_all_jobs, c.project_symlinks, c.build_add_urls) = (true, true, true);
    (c.isolation, c.agent_isolation) = (Isolation::Container, Isolation::Container);
    (c.write, c.agent_write) = (WriteMode::Direct, WriteMode::Direct);
    c.user = Some("root".into());
    c.gvisor_runtime = "runc".into();
    c.egress_allow.push("evil.example".into());
    c.limits = Default::default();
    c.max_children += 1;
    c.max_output_bytes += 1;
    c.ring_bytes += 1;
    c.keep_runs += 1;
    c.keep_days += 1.0;
    c.layer_bytes += 1;
    c.layer_days += 1.0;
    c.apply_max_deletes += 1;
    c.apply_protect.clear();
    c.state_dir = dir.path().join("elsewhere");
    c.workspace = "/usr".into();
    c.safety.security_log = Some(dir.path().join("other.log"));
    c.image_build = Some(crate::model::ProjectBuild {
        dockerfile: "Dockerfile".into(),
        context: ".".into(),
        args: Default::default(),
        declared_in: file,
    });
    let safety = SafetyLayer {
        default_blocklist: Some(false),
        blocked: Vec::new(),
        security_log: c.safety.security_log.clone(),
        allow_env: vec!["LD_PRELOAD".into()],
    };
    let side = FileSide {
        dir: dir.path(),
        safety: Some(&safety),
    };
    let no_safety = FileSide {
        dir: dir.path(),
        safety: None,
    };
    for r in ROWS {
        assert!(
            (r.looser)(&c, &base, &side).is_some(),
            "`{}` is not loose to begin with",
            r.key
        );
        let mut back = c.clone();
        revert(&mut back, &base, r.key);
        // The file's `[safety]` table is not the config: once put back, its
        // rows are asked of the config alone.
        let side = if r.set_by.is_none() { &no_safety } else { &side };
        assert_eq!(
            (r.looser)(&back, &base, side),
            None,
            "`{}` is still looser after its way back",
            r.key
        );
    }
    // All put back, the config is the baseline again (the workspace is the
    // file's directory): no row's way back changes more than its key.
    let mut all = c.clone();
    for r in ROWS {
        revert(&mut all, &base, r.key);
    }
    assert_eq!(all.workspace, dir.path());
    (all.workspace, all.sources) = (base.workspace.clone(), base.sources.clone());
    assert_eq!(all, base);
}
