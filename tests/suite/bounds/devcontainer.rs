//! devcontainer.json: the red team's 500 MB file was read whole on every
//! container start (518 MiB peak). Now a file over 1 MiB is refused from
//! its size, unread: the daemon's memory does not move, the job runs in the
//! fallback image, and its card says why the file was not used.

use std::time::Duration;

use super::{healthy, vm_kib};
use crate::common::Daemon;

#[test]
fn a_500_mb_devcontainer_json_is_refused_without_being_read() {
    let d = Daemon::start();
    let dir = d.dir.path().join("ws/.devcontainer");
    std::fs::create_dir_all(&dir).unwrap();
    // Sparse: 500 MB long, no blocks on disk.
    let f = std::fs::File::create(dir.join("devcontainer.json")).unwrap();
    f.set_len(500 << 20).unwrap();
    let before = vm_kib(d.pid(), "VmHWM");
    for _ in 0..3 {
        let (code, out, err) = d.run(&["run", "--runner", "docker", "--", "true"]);
        assert_eq!(code, 0, "{out}{err}");
    }
    let grown_mib = vm_kib(d.pid(), "VmHWM").saturating_sub(before) / 1024;
    eprintln!("three container starts beside a 500 MB devcontainer.json: the daemon grew {grown_mib} MiB");
    assert!(grown_mib < 32, "the daemon grew by {grown_mib} MiB");
    let (_, card, _) = d.run(&["status", "1"]);
    assert!(
        card.contains("devcontainer.json was not read: it is 524288000 bytes, over the 1048576 berth reads"),
        "{card}"
    );
    assert!(healthy(&d.socket(), Duration::from_secs(1)));
}
