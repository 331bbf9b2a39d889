//! The end-of-job set-uid sweep: a container job in `direct` mode whose
//! workspace other users can reach is swept for set-uid files it left; the
//! end is answered first and the walk runs after. This row times `berth run
//! -- true` in a workspace of 100,000 files against the same in an empty
//! one (both world-searchable, so both are swept), in turns: the goal is
//! that the large workspace costs at most a few milliseconds more.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::{Daemon, SANDBOX, d_run, interleaved, row};

/// Files in the large workspace: 100 directories of 1,000.
const DIRS: usize = 100;
const PER_DIR: usize = 1000;

/// A world-searchable workspace under `root` named `name`, with `files` files.
fn workspace(root: &Path, name: &str, files: bool) -> String {
    let ws = root.join(name);
    std::fs::create_dir_all(&ws).unwrap();
    if files {
        for d in 0..DIRS {
            let dir = ws.join(format!("d{d}"));
            std::fs::create_dir(&dir).unwrap();
            for f in 0..PER_DIR {
                std::fs::write(dir.join(format!("f{f}.js")), "x").unwrap();
            }
        }
    }
    // Searchable by others: the sweep is needed (runner/setuid.rs).
    for p in [root, ws.as_path()] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    ws.display().to_string()
}

pub fn bench_sweep() {
    let n = 20;
    let root = tempfile::tempdir().unwrap();
    let big = workspace(root.path(), "big", true);
    let empty = workspace(root.path(), "empty", false);
    let env = |ws: &str| {
        vec![
            ("BERTH_WORKSPACE".to_string(), ws.to_string()),
            ("BERTH_WRITE".into(), "direct".into()),
        ]
    };
    let on = |name: &str, ws: &str| {
        let env = env(ws);
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        Daemon::start_with(name, &pairs)
    };
    let (d_big, d_empty) = (on("bench-sweep-big", &big), on("bench-sweep-empty", &empty));
    let args = ["run", "--runner", "docker", "--image", SANDBOX, "--", "true"];
    let _warm = (d_run(&d_big, &args), d_run(&d_empty, &args));
    let [in_big, in_empty] = interleaved(n, [&mut || d_run(&d_big, &args), &mut || d_run(&d_empty, &args)]);
    row(
        &format!(
            "container `run -- true` in a {}-file workspace others can reach (swept after the end; p50 / p95 ms)",
            DIRS * PER_DIR
        ),
        in_big,
        in_empty,
        "same in an empty one",
    );
}
