//! The layer logic on upper directories made by hand as the overlay makes
//! them (files, 0/0 whiteouts, opaque marks), beside a checkout: what is a
//! change, what conflicts, what an apply writes and prunes, what the
//! agent's guard refuses. The real overlay is the suite's (`tests/suite/layers.rs`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::apply::{Guard, apply};
use super::tree::Node;
use super::{Layers, counts};
use crate::model::{ChangeKind, JobId};

struct Fixture {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    layers: Layers,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::create_dir_all(ws.join("build/out")).unwrap();
    std::fs::write(ws.join("README"), "hello\n").unwrap();
    std::fs::write(ws.join("src/app.py"), "print('a')\n").unwrap();
    std::fs::write(ws.join("src/keep.py"), "keep\n").unwrap();
    std::fs::write(ws.join("build/out/x.o"), "obj").unwrap();
    let layers = Layers::new(tmp.path().join("state/layers"));
    Fixture {
        _tmp: tmp,
        ws,
        layers,
    }
}

fn upper(f: &Fixture) -> PathBuf {
    f.layers.root().join("l1/upper")
}

fn opaque(dir: &Path) {
    let fd = rustix::fs::open(dir, rustix::fs::OFlags::RDONLY, rustix::fs::Mode::empty()).unwrap();
    rustix::fs::fsetxattr(&fd, "user.overlay.opaque", b"y", rustix::fs::XattrFlags::empty()).unwrap();
}

/// A layer as a job leaves it: README changed, src/app.py copied up but
/// unchanged, new.txt added, README's neighbour deleted, build/ removed and
/// remade (opaque) with one new file.
fn job_writes(f: &Fixture) {
    let job = JobId::from("job-1");
    f.layers.take("l1", &f.ws, None, &job).unwrap();
    let up = upper(f);
    std::fs::write(up.join("README"), "hello from the job\n").unwrap();
    std::fs::create_dir(up.join("src")).unwrap();
    std::fs::write(up.join("src/app.py"), "print('a')\n").unwrap();
    std::fs::write(up.join("new.txt"), "new\n").unwrap();
    Node::open(&up.join("src"))
        .unwrap()
        .whiteout(OsStr::new("keep.py"))
        .unwrap();
    std::fs::create_dir(up.join("build")).unwrap();
    opaque(&up.join("build"));
    std::fs::write(up.join("build/fresh"), "f").unwrap();
    f.layers.release("l1", &job);
}

fn changes(f: &Fixture) -> Vec<(String, ChangeKind)> {
    let layer = f.layers.get("l1").unwrap();
    let scan = layer.scan().unwrap();
    scan.items
        .iter()
        .map(|i| (i.path.display().to_string(), i.kind))
        .collect()
}

#[test]
fn a_layer_lists_what_differs_from_the_checkout_and_nothing_else() {
    let f = fixture();
    job_writes(&f);
    let mut got = changes(&f);
    got.sort_by(|a, b| a.0.cmp(&b.0));
    use ChangeKind::*;
    assert_eq!(
        got,
        [
            ("README".into(), Changed),
            ("build/fresh".into(), Added),
            ("build/out".into(), Deleted),
            ("new.txt".into(), Added),
            ("src/keep.py".into(), Deleted),
        ]
    );
    let c = counts(&f.layers.get("l1").unwrap().scan().unwrap());
    assert_eq!((c.added, c.changed, c.deleted), (2, 1, 2));
}

#[test]
fn apply_brings_every_change_and_empties_the_layer() {
    let f = fixture();
    job_writes(&f);
    let mut layer = f.layers.get("l1").unwrap();
    let done = apply(&mut layer, &[], None, false).unwrap();
    assert!(done.conflicts.is_empty(), "{done:?}");
    assert_eq!(
        std::fs::read_to_string(f.ws.join("README")).unwrap(),
        "hello from the job\n"
    );
    assert_eq!(std::fs::read_to_string(f.ws.join("new.txt")).unwrap(), "new\n");
    assert!(!f.ws.join("src/keep.py").exists());
    assert!(!f.ws.join("build/out").exists());
    assert!(f.ws.join("build/fresh").exists());
    assert!(changes(&f).is_empty());
    let left: Vec<_> = std::fs::read_dir(upper(&f)).unwrap().collect();
    assert!(left.is_empty(), "the upper directory keeps {left:?}");
}

#[test]
fn a_checkout_file_changed_after_the_copy_is_a_conflict_and_skipped() {
    let f = fixture();
    job_writes(&f);
    // Edited on the host after the job's copy-up.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(f.ws.join("README"), "edited by the user\n").unwrap();
    let mut layer = f.layers.get("l1").unwrap();
    let done = apply(&mut layer, &[], None, false).unwrap();
    assert_eq!(done.conflicts.len(), 1, "{done:?}");
    assert_eq!(done.conflicts[0].path, "README");
    assert!(done.summary().contains("1 conflict"), "{}", done.summary());
    assert_eq!(
        std::fs::read_to_string(f.ws.join("README")).unwrap(),
        "edited by the user\n"
    );
    // The rest went; the conflict stays in the layer.
    assert!(f.ws.join("new.txt").exists());
    assert_eq!(changes(&f), [("README".to_string(), ChangeKind::Changed)]);
}

#[test]
fn the_agents_guard_refuses_mass_deletion_and_protected_paths() {
    let f = fixture();
    job_writes(&f);
    let mut layer = f.layers.get("l1").unwrap();
    let strict = Guard {
        max_deletes: 1,
        protect: Vec::new(),
    };
    let err = apply(&mut layer, &[], Some(&strict), false)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("more than 1 files") && err.contains("berth apply l1"),
        "{err}"
    );
    assert!(
        f.ws.join("src/keep.py").exists(),
        "a refused apply changes nothing"
    );
    std::fs::write(upper(&f).join("berth.toml"), "test_command = \"true\"\n").unwrap();
    let loose = Guard {
        max_deletes: 20,
        protect: vec!["*.txt".into()],
    };
    let err = apply(&mut layer, &[], Some(&loose), false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("`berth.toml`") && err.contains("protected"), "{err}");
    let err = apply(&mut layer, &[PathBuf::from("new.txt")], Some(&loose), false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("`new.txt`"), "{err}");
    // The user's own apply has no guard.
    apply(&mut layer, &[PathBuf::from("berth.toml")], None, false).unwrap();
    assert!(f.ws.join("berth.toml").exists());
}

#[test]
fn nothing_is_written_through_a_checkout_symlink() {
    let f = fixture();
    job_writes(&f);
    let outside = f.ws.parent().unwrap().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::create_dir(upper(&f).join("lib")).unwrap();
    std::fs::write(upper(&f).join("lib/evil"), "x").unwrap();
    // The checkout gets `lib -> outside` after the job wrote lib/evil.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::os::unix::fs::symlink(&outside, f.ws.join("lib")).unwrap();
    let mut layer = f.layers.get("l1").unwrap();
    let done = apply(&mut layer, &[], None, false).unwrap();
    assert!(!outside.join("evil").exists(), "written through the symlink");
    assert!(
        done.conflicts.iter().any(|c| c.path.starts_with("lib")),
        "{done:?}"
    );
}

#[test]
fn set_id_bits_are_dropped_and_an_apply_while_in_use_waits_to_prune() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    job_writes(&f);
    let tool = upper(&f).join("tool");
    std::fs::write(&tool, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o6755)).unwrap();
    let job = JobId::from("job-2");
    let mut layer = f.layers.take("l1", &f.ws, None, &job).unwrap();
    apply(&mut layer, &[], None, true).unwrap();
    let mode = std::fs::metadata(f.ws.join("tool")).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o755);
    // In use: the upper keeps its files, yet nothing is listed as a change.
    assert!(tool.exists());
    assert!(changes(&f).is_empty(), "{:?}", changes(&f));
    f.layers.release("l1", &job);
    // The next job to take it finds it pruned.
    f.layers.take("l1", &f.ws, None, &JobId::from("job-3")).unwrap();
    assert!(!tool.exists());
}

#[test]
fn discard_refuses_a_layer_in_use_and_removes_an_idle_one() {
    let f = fixture();
    job_writes(&f);
    let job = JobId::from("job-9");
    f.layers.take("l1", &f.ws, None, &job).unwrap();
    let err = f.layers.discard("l1").unwrap_err().to_string();
    assert!(err.contains("job-9"), "{err}");
    f.layers.release("l1", &job);
    f.layers.discard("l1").unwrap();
    assert!(f.layers.names().is_empty());
    assert!(f.layers.get("l1").is_err());
    assert!(super::check_name("Bad/Name").is_err());
}

#[test]
fn a_childs_copy_of_a_path_shows_the_layer_over_the_checkout() {
    let f = fixture();
    job_writes(&f);
    let to = f.ws.parent().unwrap().join("copy");
    // The checkout's src/ copied, then the layer laid over it.
    std::fs::create_dir(&to).unwrap();
    std::fs::copy(f.ws.join("src/app.py"), to.join("app.py")).unwrap();
    std::fs::copy(f.ws.join("src/keep.py"), to.join("keep.py")).unwrap();
    super::merge::overlay_onto(&upper(&f), Path::new("src"), &to).unwrap();
    assert!(to.join("app.py").exists());
    assert!(!to.join("keep.py").exists(), "the job deleted it");
    // The whole workspace: build/ is opaque, README the job's.
    let all = f.ws.parent().unwrap().join("all");
    std::fs::create_dir_all(all.join("build/out")).unwrap();
    std::fs::write(all.join("build/out/x.o"), "obj").unwrap();
    std::fs::write(all.join("README"), "hello\n").unwrap();
    super::merge::overlay_onto(&upper(&f), Path::new(""), &all).unwrap();
    assert_eq!(
        std::fs::read_to_string(all.join("README")).unwrap(),
        "hello from the job\n"
    );
    assert!(!all.join("build/out").exists() && all.join("build/fresh").exists());
    assert_eq!(std::fs::read_to_string(all.join("new.txt")).unwrap(), "new\n");
}
