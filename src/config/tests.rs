//! Unit tests of loading: layers and their sources, each key's bounds and
//! one-line errors, the value forms `berth config` prints and takes back,
//! and the completeness of the key table.

use super::jobs::size_text;
use super::*;
use crate::job::parse_size;
use crate::model::{Egress, Limits, Network, Publish, host_cpus};

#[test]
fn file_then_flags_with_sources() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(CONFIG_FILE),
        "max_jobs = 5\nring_size = \"1m\"\ngrace = 2\n",
    )
    .unwrap();
    let sub = dir.path().join("a/b");
    std::fs::create_dir_all(&sub).unwrap();
    let c = Config::load(
        &sub,
        Layer {
            grace: Some(1.0),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(c.max_jobs, 5);
    assert_eq!(c.ring_bytes, 1 << 20);
    assert_eq!(c.grace_secs, 1.0);
    assert_eq!(c.workspace, dir.path());
    assert_eq!(c.sources["grace"], Source::Flag);
    assert!(matches!(c.sources["max_jobs"], Source::File(_)));
    assert_eq!(c.sources["image"], Source::Default);
}

#[test]
fn container_user_defaults_to_the_caller_and_root_is_explicit() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let c = Config::default().with_workspace(dir.path());
    let owner = std::fs::metadata(dir.path()).unwrap();
    let me = match nix::unistd::getuid().is_root() {
        // A root caller's jobs run as the workspace's owner, or nobody.
        true if owner.uid() == 0 => format!("{NOBODY}:{NOBODY}"),
        true => format!("{}:{}", owner.uid(), owner.gid()),
        false => format!("{}:{}", nix::unistd::getuid(), nix::unistd::getgid()),
    };
    assert_eq!(c.container_user(), me);
    if nix::unistd::getuid().is_root() {
        std::os::unix::fs::chown(dir.path(), Some(4321), Some(4322)).unwrap();
        assert_eq!(c.container_user(), "4321:4322");
    }
    // root only when asked, by the user (a project file needs trust).
    let user = dir.path().join("user.toml");
    std::fs::write(&user, "user = \"root\"\n").unwrap();
    let env = |k: &str| (k == crate::trust::USER_CONFIG_ENV).then(|| user.display().to_string());
    let c = Config::load_with(dir.path(), Layer::default(), env).unwrap();
    assert_eq!(c.container_user(), "root");
    assert_eq!(validate_user("1234:1234".into()).unwrap(), "1234:1234");
    for bad in ["", "alice", "1234", "1:x", ":1", "99999999999:1", "-1:0"] {
        let err = validate_user(bad.into()).unwrap_err().to_string();
        assert!(err.contains("UID:GID"), "{bad}: {err}");
    }
}

#[test]
fn limit_defaults_and_bounds() {
    let c = Config::default();
    let host = host_cpus() as f64;
    assert_eq!(c.limits.cpus, Some(DEFAULT_CPUS.min(host)));
    assert_eq!(c.limits.memory, Some(2 << 30));
    assert_eq!(c.limits.pids, Some(512));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(CONFIG_FILE);
    std::fs::write(
        &file,
        "cpus = 1\nmemory = \"64m\"\npids = 100\nnetwork = \"none\"\n",
    )
    .unwrap();
    let c = Config::load(dir.path(), Layer::default()).unwrap();
    assert_eq!(
        c.limits,
        Limits {
            cpus: Some(1.0),
            memory: Some(64 << 20),
            pids: Some(100)
        }
    );
    assert_eq!(c.network, Network::None);
    assert!(matches!(c.sources["pids"], Source::File(_)));
    let too_many = format!("cpus = {}\n", host + 1.0);
    for (text, what) in [
        ("pids = 0\n", "pids"),
        ("pids = -1\n", "pids"),
        ("pids = 40000\n", "pids"),
        ("cpus = 0\n", "cpus"),
        (too_many.as_str(), "cpus"),
        ("memory = \"1m\"\n", "memory"),
        ("network = \"host\"\n", "network"),
    ] {
        std::fs::write(&file, text).unwrap();
        let err = refused(dir.path());
        assert!(err.contains(what) && !err.contains('\n'), "{text}: {err}");
    }
    // The same bounds hold for a job's own limits.
    let mut spec = crate::model::JobSpec::argv(["true"]);
    spec.limits.pids = Some(-1);
    assert!(
        spec.validate()
            .unwrap_err()
            .to_string()
            .contains("between 1 and 32768")
    );
    spec.limits.pids = Some(32768);
    spec.limits.memory = Some(6 << 20);
    spec.limits.cpus = Some(host);
    spec.validate().unwrap();
}

#[test]
fn egress_and_publish_keys_from_file_and_env() {
    let c = Config::default();
    assert_eq!((c.egress, c.publish), (Egress::Proxy, Publish::Berth));
    assert_eq!(c.egress_allow, ["defaults"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(CONFIG_FILE);
    std::fs::write(
        &file,
        "egress = \"none\"\negress_allow = [\"defaults\", \"example.com\"]\npublish = \"engine\"\n",
    )
    .unwrap();
    let user = dir.path().join("user.toml");
    let user_env = |k: &str| (k == crate::trust::USER_CONFIG_ENV).then(|| user.display().to_string());
    // Untrusted: the narrowing key applies, the widening ones are reverted.
    let c = Config::load_with(dir.path(), Layer::default(), user_env).unwrap();
    assert_eq!((c.egress, c.publish), (Egress::None, Publish::Berth));
    assert_eq!(c.egress_allow, ["defaults"]);
    let keys: Vec<&str> = c.untrusted.iter().map(|l| l.key).collect();
    assert_eq!(keys, ["egress_allow", "publish"]);
    let bytes = std::fs::read(&file).unwrap();
    crate::trust::record(&user, &file, Some(&crate::trust::digest(&bytes))).unwrap();
    let c = Config::load_with(dir.path(), Layer::default(), user_env).unwrap();
    assert_eq!((c.egress, c.publish), (Egress::None, Publish::Engine));
    assert_eq!(c.egress_allow, ["defaults", "example.com"]);
    assert!(matches!(c.sources["egress_allow"], Source::File(_)));
    let env = |n: &str| match n {
        "BERTH_EGRESS" => Some("all".to_string()),
        "BERTH_EGRESS_ALLOW" => Some("pypi.org, *.corp.net".to_string()),
        _ => user_env(n),
    };
    let c = Config::load_with(dir.path(), Layer::default(), env).unwrap();
    assert_eq!(c.egress, Egress::All);
    assert_eq!(c.egress_allow, ["pypi.org", "*.corp.net"]);
    for (text, what) in [
        ("egress = \"some\"\n", "egress"),
        ("egress_allow = [\"a b\"]\n", "egress_allow"),
        ("publish = \"docker\"\n", "publish"),
    ] {
        std::fs::write(&file, text).unwrap();
        let err = refused(dir.path());
        assert!(err.contains(what) && !err.contains('\n'), "{text}: {err}");
    }
}

/// `berth config` prints seconds as `60s`; a file and the environment
/// take that form back (and plain numbers, as before).
#[test]
fn durations_are_read_as_printed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(CONFIG_FILE);
    std::fs::write(&file, "timeout = \"30s\"\ngrace = \"500ms\"\npull_timeout = 90\n").unwrap();
    let env = |n: &str| (n == "BERTH_MCP_IDLE").then(|| "2h".to_string());
    let c = Config::load_with(dir.path(), Layer::default(), env).unwrap();
    assert_eq!(
        (c.timeout_secs, c.grace_secs, c.pull_timeout_secs),
        (30.0, 0.5, 90.0)
    );
    assert_eq!(c.mcp_idle_secs, 7200.0);
    // Sizes print as a file takes them back.
    for (n, text) in [
        (2u64 << 30, "2g"),
        (3 << 29, "1536m"),
        (1000, "1000"),
        (64 << 10, "64k"),
    ] {
        assert_eq!(size_text(n), text);
        assert_eq!(parse_size(text).unwrap(), n);
    }
    std::fs::write(&file, "timeout = \"30 parsecs\"\n").unwrap();
    let err = refused(dir.path());
    assert!(
        err.contains("not a duration") && !err.contains("parsecs"),
        "{err}"
    );
    std::fs::remove_file(&file).unwrap();
    let env = |n: &str| (n == "BERTH_TIMEOUT").then(|| "soon".to_string());
    let err = Config::load_with(dir.path(), Layer::default(), env)
        .unwrap_err()
        .to_string();
    assert!(err.contains("BERTH_TIMEOUT"), "{err}");
}

/// `berth config` shows the `[safety]` table, with where it came from.
#[test]
fn the_safety_table_is_described() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(CONFIG_FILE),
        "[safety]\nblocked = [{ pattern = '^terraform', reason = 'no' }]\n",
    )
    .unwrap();
    let c = Config::load_with(dir.path(), Layer::default(), |_| None).unwrap();
    let rows = c.describe();
    let row = |k: &str| rows.iter().find(|(n, _, _)| n == k).cloned().unwrap();
    let (_, value, source) = row("safety.blocked");
    assert_eq!(value, "1 extra pattern(s)");
    assert!(source.ends_with(CONFIG_FILE), "{source}");
    assert_eq!(row("safety.default_blocklist").1, "true");
    assert!(row("safety.security_log").1.ends_with("security.log"));
}

/// Why the project file in `dir` was not used (a bad file refuses jobs,
/// not the config: `ps`, `down` and the rest work on).
fn refused(dir: &std::path::Path) -> String {
    Config::load_with(dir, Layer::default(), |_| None)
        .unwrap()
        .project_refusal
        .expect("the project file is refused")
}

#[test]
fn bad_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(CONFIG_FILE), "max_jobz = 5\n").unwrap();
    let err = refused(dir.path());
    assert!(err.contains("berth.toml"), "{err}");
    assert!(validate_instance("../x".into()).is_err());
}

/// The key table is complete: every key starts from its default, has a
/// `berth config` line (and every line belongs to a key), and is set by
/// `BERTH_<KEY>` taking back the value `berth config` prints, except
/// `[safety]`, a table only files hold. A row missing a part does not
/// compile (the macro has no arm for it); this catches a row whose parts
/// are there but wrong: a reader of `none`, a line named for another key.
#[test]
fn every_key_has_a_default_a_variable_and_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let user = dir.path().join("no-user-config.toml").display().to_string();
    let base = |n: &str| (n == crate::trust::USER_CONFIG_ENV).then(|| user.clone());
    let c = Config::load_with(dir.path(), Layer::default(), base).unwrap();
    let mut keys: Vec<&str> = keys::FIELDS.to_vec();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), keys::FIELDS.len(), "a key twice in FIELDS");
    assert_eq!(c.sources.keys().copied().collect::<Vec<_>>(), keys);
    assert!(c.sources.values().all(|s| *s == Source::Default));
    let rows = c.describe_rows();
    for (name, key, _) in &rows {
        assert!(
            keys::FIELDS.contains(key) && (name == key || name.starts_with(&format!("{key}."))),
            "line {name} belongs to no key ({key})"
        );
    }
    let first = |c: &Config, k: &str| -> String {
        let (_, _, v) = c.describe_rows().into_iter().find(|r| r.1 == k).unwrap();
        v.split_whitespace().next().unwrap_or("").to_string()
    };
    for k in keys::FIELDS.iter().copied() {
        assert!(rows.iter().any(|r| r.1 == k), "{k} has no berth config line");
        let (name, value) = (table::env_name(k), first(&c, k));
        let env = |n: &str| match n == name {
            true => Some(value.clone()),
            false => base(n),
        };
        let set = Config::load_with(dir.path(), Layer::default(), env)
            .unwrap_or_else(|e| panic!("{name}={value}: {e}"));
        if k == "safety" {
            assert_eq!(set.sources[k], Source::Default, "{name} is not a variable");
            continue;
        }
        assert_eq!(
            set.sources[k],
            Source::Env(name.clone()),
            "{name} does not set {k}"
        );
        assert_eq!(
            first(&set, k),
            value,
            "{name}={value} is not taken back as printed"
        );
    }
}
