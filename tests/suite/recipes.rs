//! `berth images build` runs berth's own recipes, compiled into the binary:
//! from any directory (an installed berth has no checkout), and never a
//! project's `images/build.sh`, which the agent writes and which would run
//! on the host as the user.

use std::process::Command;

use crate::common::{berth, instance_name};

#[test]
fn images_build_runs_the_recipes_built_into_berth_never_the_workspaces() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("images")).unwrap();
    // An agent's build script in the project: it must not run.
    let marker = dir.path().join("agent-script-ran");
    std::fs::write(
        ws.join("images/build.sh"),
        format!("touch {}\nexit 0\n", marker.display()),
    )
    .unwrap();
    // A tag of this test's own, so the shared berth/sandbox is not retagged.
    let tag = format!("berth-test/{}:latest", instance_name("recipes"));
    let out = berth(dir.path())
        .current_dir(&ws)
        .env("BERTH_WORKSPACE", &ws)
        .env("BERTH_SANDBOX_IMAGE", &tag)
        .args(["images", "build", "sandbox"])
        .output()
        .unwrap();
    let inspect = Command::new("docker")
        .args(["image", "inspect", &tag])
        .output()
        .unwrap();
    let _ = Command::new("docker").args(["image", "rm", &tag]).output();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!marker.exists(), "the workspace's images/build.sh ran");
    assert!(inspect.status.success(), "berth's recipe built {tag}");
    // No copy of the recipes is left behind (only this test builds images).
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("berth-images-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
