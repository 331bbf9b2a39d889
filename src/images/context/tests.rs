//! Unit tests of the build context: ignore rules, the hash, links, bounds,
//! and a job swapping a directory for a symlink while the context is read.

use super::*;

fn rules(text: &str) -> Vec<Rule> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".dockerignore"), text).unwrap();
    ignore_rules(&beneath::Dir::open_root(dir.path()).unwrap())
}

#[test]
fn dockerignore_rules() {
    let r = rules("# comment\ntarget\n*.log\n**/node_modules\n!keep.log\n/secret/\n");
    assert!(ignored(&r, "target"));
    assert!(ignored(&r, "target/debug/x"));
    assert!(ignored(&r, "a.log"));
    assert!(!ignored(&r, "keep.log"));
    assert!(!ignored(&r, "sub/a.log"), "* stays within one element");
    assert!(ignored(&r, "web/node_modules/x/y.js"));
    assert!(ignored(&r, "secret/key"));
    assert!(!ignored(&r, "src/main.rs"));
}

#[test]
fn hash_follows_files_args_and_ignores() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::write(ws.join("Dockerfile"), "FROM scratch\n").unwrap();
    std::fs::write(ws.join("a.txt"), "one").unwrap();
    let args = BTreeMap::new();
    let first = walk(ws, ws, &ws.join("Dockerfile"), &args).unwrap();
    assert_eq!(first.dockerfile_in_tar, "Dockerfile");
    assert_eq!(
        walk(ws, ws, &ws.join("Dockerfile"), &args).unwrap().hash,
        first.hash
    );
    std::fs::write(ws.join("a.txt"), "two").unwrap();
    let changed = walk(ws, ws, &ws.join("Dockerfile"), &args).unwrap();
    assert_ne!(changed.hash, first.hash);
    let with_arg = BTreeMap::from([("V".to_string(), "1".to_string())]);
    assert_ne!(
        walk(ws, ws, &ws.join("Dockerfile"), &with_arg).unwrap().hash,
        changed.hash
    );
    std::fs::write(ws.join(".dockerignore"), "*.log\n").unwrap();
    let base = walk(ws, ws, &ws.join("Dockerfile"), &args).unwrap().hash;
    std::fs::write(ws.join("x.log"), "noise").unwrap();
    assert_eq!(walk(ws, ws, &ws.join("Dockerfile"), &args).unwrap().hash, base);
}

#[test]
fn links_are_not_followed_and_outside_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::write(ws.join("Dockerfile"), "FROM scratch\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.join("out")).unwrap();
    let ctx = walk(ws, ws, &ws.join("Dockerfile"), &BTreeMap::new()).unwrap();
    let mut tar = Vec::new();
    ctx.write_tar(&mut tar).unwrap();
    assert!(!String::from_utf8_lossy(&tar).contains("s3cret"));
    let names: Vec<String> = tar::Archive::new(tar.as_slice())
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert_eq!(names, ["Dockerfile", "out"]);
    let err = walk(ws, outside.path(), &ws.join("Dockerfile"), &BTreeMap::new()).unwrap_err();
    assert!(err.to_string().contains("inside the workspace"), "{err}");
}

#[test]
fn a_context_over_the_bound_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::write(ws.join("Dockerfile"), "FROM scratch\n").unwrap();
    // Sparse: its size counts, nothing is written.
    let big = std::fs::File::create(ws.join("big")).unwrap();
    big.set_len(MAX_CONTEXT_BYTES + 1).unwrap();
    let err = walk(ws, ws, &ws.join("Dockerfile"), &BTreeMap::new()).unwrap_err();
    assert!(
        err.to_string().contains("more than 512 MiB") && err.to_string().contains(".dockerignore"),
        "{err}"
    );
}

/// A job flips `sub` between a directory and a symlink to a 0600 file
/// outside the workspace while the context is walked, hashed and tarred:
/// the outside file never gets into the tar (100 tries), the build is
/// refused or sends the directory's own file.
#[test]
fn a_directory_flipped_to_a_symlink_never_sends_the_outside_file() {
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "TOP-S3CRET").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_path_buf();
    std::fs::write(ws.join("Dockerfile"), "FROM scratch\nCOPY sub /sub\n").unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let flips = std::sync::Arc::new(AtomicU64::new(0));
    // `sub` is a directory holding a file named like the secret, and
    // `subx` a symlink to the secret's directory; the flipper exchanges the
    // two names atomically (renameat2 RENAME_EXCHANGE), as fast as it can.
    std::fs::create_dir(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/secret"), "inside").unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.join("subx")).unwrap();
    std::fs::write(ws.join(".dockerignore"), "subx\n").unwrap();
    let flipper = {
        let (ws, stop, flips) = (ws.clone(), stop.clone(), flips.clone());
        std::thread::spawn(move || {
            use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
            let (a, b) = (ws.join("sub"), ws.join("subx"));
            while !stop.load(Ordering::Relaxed) {
                if renameat2(AT_FDCWD, &a, AT_FDCWD, &b, RenameFlags::RENAME_EXCHANGE).is_err() {
                    break;
                }
                flips.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let (mut sent, mut refused) = (0, 0);
    // 100 tries, each while the flipper is busy (it starts a little later).
    while flips.load(Ordering::Relaxed) == 0 {
        std::thread::yield_now();
    }
    // At least 100 tries, and on until the flipper flipped 100 times too
    // (a loaded machine schedules it less often).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while sent + refused < 100 || flips.load(Ordering::Relaxed) < 100 {
        assert!(
            std::time::Instant::now() < deadline,
            "the race did not run in time"
        );
        match walk(&ws, &ws, &ws.join("Dockerfile"), &BTreeMap::new()) {
            Ok(ctx) => {
                let mut tar = Vec::new();
                match ctx.write_tar(&mut tar) {
                    Ok(()) => {
                        assert!(
                            // (a file is cut at the size the walk saw: "TOP-S3")
                            !String::from_utf8_lossy(&tar).contains("TOP-S3"),
                            "the outside file got into the context"
                        );
                        sent += 1;
                    }
                    Err(_) => refused += 1,
                }
            }
            Err(_) => refused += 1,
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    assert!(sent + refused >= 100);
}

/// A remote engine's job gets the workspace minus `.dockerignore`, under
/// the workspace's own path, owned by the job's user; links stay links.
#[test]
fn the_workspace_upload_is_the_tree_under_its_path_owned_by_the_job() {
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path();
    std::fs::write(w.join(".dockerignore"), "target\n*.log\n").unwrap();
    std::fs::create_dir_all(w.join("src")).unwrap();
    std::fs::create_dir_all(w.join("target")).unwrap();
    std::fs::write(w.join("src/main.py"), "print('hi')\n").unwrap();
    std::fs::write(w.join("target/big.bin"), "x").unwrap();
    std::fs::write(w.join("run.log"), "noise").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", w.join("link")).unwrap();
    let ctx = walk_workspace(w).unwrap();
    let mut bytes = Vec::new();
    ctx.write_tar_under(&mut bytes, "home/u/proj", (4242, 4243))
        .unwrap();
    let mut names = Vec::new();
    for e in tar::Archive::new(bytes.as_slice()).entries().unwrap() {
        let e = e.unwrap();
        let h = e.header();
        assert_eq!((h.uid().unwrap(), h.gid().unwrap()), (4242, 4243));
        if h.entry_type() == tar::EntryType::Symlink {
            assert_eq!(e.link_name().unwrap().unwrap().to_str(), Some("/etc/passwd"));
        }
        names.push(e.path().unwrap().display().to_string());
    }
    names.sort();
    assert_eq!(
        names,
        [
            "home/u/proj",
            "home/u/proj/.dockerignore",
            "home/u/proj/link",
            "home/u/proj/src",
            "home/u/proj/src/main.py",
        ]
    );
}

/// A file replaced, removed or shortened after the walk: the tar is refused
/// in berth's own words, never sent short or with another file's bytes.
#[test]
fn a_context_changed_after_the_walk_is_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::write(ws.join("Dockerfile"), "FROM scratch\n").unwrap();
    let write = |change: &dyn Fn()| {
        std::fs::write(ws.join("a.txt"), "0123456789").unwrap();
        let ctx = walk(ws, ws, &ws.join("Dockerfile"), &BTreeMap::new()).unwrap();
        change();
        ctx.write_tar(std::io::sink()).unwrap_err().to_string()
    };
    // Made before the old one goes, so it cannot get the old one's inode.
    let replaced = || {
        std::fs::write(ws.join("a.new"), "0123456789").unwrap();
        std::fs::rename(ws.join("a.new"), ws.join("a.txt")).unwrap();
    };
    let shortened = || std::fs::write(ws.join("a.txt"), "01").unwrap();
    let removed = || std::fs::remove_file(ws.join("a.txt")).unwrap();
    for (what, change) in [
        ("replaced", &replaced as &dyn Fn()),
        ("shortened", &shortened),
        ("removed", &removed),
    ] {
        let err = write(change);
        assert!(err.contains("changed while berth read it"), "{what}: {err}");
        assert!(err.contains("a.txt"), "{what}: {err}");
    }
}
