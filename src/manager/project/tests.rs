//! The caller's project as resolved: its file, the instance's keys, its
//! notes, and what its devcontainer.json applies (only when trusted).

use super::*;

fn projects(dir: &Path) -> Projects {
    let config = Config::isolated(dir.join("state"), "t").with_max_jobs(3);
    let safety = Safety::from_config(&config).unwrap();
    Projects::new(&config, &safety)
}

fn spec_in(cwd: &Path) -> JobSpec {
    let mut s = JobSpec::shell("true");
    s.caller_cwd = Some(cwd.to_path_buf());
    s
}

#[test]
fn a_callers_berth_toml_applies_and_instance_keys_stay_the_managers() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws2");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::write(
        ws.join("berth.toml"),
        "image = \"custom:1\"\nmax_jobs = 9\n[[safety.blocked]]\npattern = \"terraform destroy\"\nreason = \"prod\"\n",
    )
    .unwrap();
    let p = projects(dir.path()).resolve(&spec_in(&ws.join("sub"))).unwrap();
    assert_eq!(p.config.workspace, ws.canonicalize().unwrap());
    assert_eq!(p.config.image, "custom:1");
    assert_eq!(p.config.max_jobs, 3, "the cap is the instance's");
    assert!(p.note.as_deref().unwrap().contains("max_jobs"), "{:?}", p.note);
    let blocked = p
        .safety
        .check(&JobSpec::shell("terraform destroy"), &p.config.workspace, "t");
    assert!(blocked.is_err());
}

#[test]
fn the_note_is_given_once_and_again_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let projects = projects(dir.path());
    let file = dir.path().join("berth.toml");
    std::fs::write(&file, "max_jobs = 9\n").unwrap();
    let p = projects.resolve(&spec_in(dir.path())).unwrap();
    assert!(projects.note_once(&p).unwrap().contains("max_jobs"));
    let p = projects.resolve(&spec_in(dir.path())).unwrap();
    assert_eq!(projects.note_once(&p), None, "not on every run");
    // The file now sets another instance-wide key: a new note.
    std::fs::write(&file, "max_jobs = 9\nring_size = 100\n").unwrap();
    let p = projects.resolve(&spec_in(dir.path())).unwrap();
    assert!(
        projects.note_once(&p).unwrap().contains("ring_size"),
        "{:?}",
        p.note
    );
}

#[test]
fn devcontainer_keys_berth_does_not_apply_are_noted_not_applied() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(".devcontainer.json"),
        r#"{"image": "python:3", "remoteUser": "root", "containerEnv": {"X": "1"}}"#,
    )
    .unwrap();
    let projects = projects(dir.path());
    let p = projects.resolve(&spec_in(dir.path())).unwrap();
    let note = projects.note_once(&p).unwrap();
    assert!(
        note.contains("sets containerEnv, remoteUser, which berth does not apply"),
        "{note}"
    );
    assert_eq!(p.config.user, None, "remoteUser never becomes the job's user");
    // An edit to the file is seen by the next job, with a new note.
    std::fs::write(
        dir.path().join(".devcontainer.json"),
        r#"{"image": "python:3", "forwardPorts": [8000], "postCreateCommand": "make"}"#,
    )
    .unwrap();
    let p = projects.resolve(&spec_in(dir.path())).unwrap();
    let note = projects.note_once(&p).unwrap();
    assert!(
        note.contains("sets forwardPorts, postCreateCommand, which berth does not apply"),
        "{note}"
    );
}

#[test]
fn no_berth_toml_means_the_callers_directory_is_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let p = projects(dir.path()).resolve(&spec_in(dir.path())).unwrap();
    assert_eq!(p.config.workspace, dir.path().canonicalize().unwrap());
    assert!(p.note.is_none());
}

#[test]
fn an_edited_berth_toml_applies_to_the_next_job() {
    let dir = tempfile::tempdir().unwrap();
    let projects = projects(dir.path());
    let file = dir.path().join("berth.toml");
    std::fs::write(&file, "image = \"a:1\"\n").unwrap();
    assert_eq!(
        projects.resolve(&spec_in(dir.path())).unwrap().config.image,
        "a:1"
    );
    std::fs::write(&file, "image = \"bb:22\"\n").unwrap();
    assert_eq!(
        projects.resolve(&spec_in(dir.path())).unwrap().config.image,
        "bb:22"
    );
}

#[test]
fn bad_caller_context_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let projects = projects(dir.path());
    let mut s = spec_in(Path::new("relative"));
    assert!(projects.resolve(&s).is_err());
    s = spec_in(&dir.path().join("missing"));
    assert!(matches!(projects.resolve(&s), Err(Error::BadCwd { .. })));
    s = spec_in(dir.path());
    s.caller_env.insert("LD_PRELOAD".into(), "x".into());
    assert!(projects.resolve(&s).is_err());
    s = spec_in(dir.path());
    std::fs::write(dir.path().join("berth.toml"), "nonsense = 1\n").unwrap();
    let refused = projects.resolve(&s).unwrap().config.project_refusal.clone();
    assert!(refused.is_some_and(|r| r.contains("nonsense")));
}

/// A trusted devcontainer.json's `remoteUser` is the jobs' user and its
/// variables and ports are the project's; an untrusted one gives nothing.
#[test]
fn a_trusted_devcontainer_gives_its_user_env_and_ports_an_untrusted_one_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(".devcontainer.json");
    let text = r#"{"remoteUser": "root", "containerEnv": {"X": "1"}, "forwardPorts": [8000]}"#;
    std::fs::write(&file, text).unwrap();
    let user_config = dir.path().join("user.toml");
    std::fs::write(&user_config, "").unwrap();
    let mut spec = spec_in(dir.path());
    spec.caller_env
        .insert("BERTH_USER_CONFIG".into(), user_config.display().to_string());
    let projects = projects(dir.path());
    let p = projects.resolve(&spec).unwrap();
    assert_eq!((p.config.user.as_deref(), p.dev.as_ref()), (None, None));
    assert!(p.note.as_deref().unwrap().contains("berth trust"), "{:?}", p.note);

    let real = file.canonicalize().unwrap();
    crate::trust::record(&user_config, &real, Some(&crate::trust::digest(text.as_bytes()))).unwrap();
    let p = projects.resolve(&spec).unwrap();
    assert_eq!(p.config.user.as_deref(), Some("root"));
    assert_eq!(p.config.sources.get("user"), Some(&Source::File(real)));
    let dev = p.dev.as_ref().expect("trusted: applied");
    assert_eq!((dev.env.len(), dev.ports.len()), (1, 1));
    assert_eq!(p.note, None, "all it sets applies: {:?}", p.note);
}
