//! Which mount a host job's workspace gets in its namespace, and whether
//! this machine allows it: the shim is tried once per manager in a scratch
//! directory (`layer` needs an overlay, `read-only` a bind), and a mode the
//! kernel refuses is refused in one line before the job starts, never run
//! as `direct` instead.

use std::path::Path;
use std::sync::OnceLock;

use super::super::host_mounts::WorkspaceMount;
use super::super::shim;
use crate::error::{Error, Result};

/// Whether this machine lets the shim mount the workspace (`layer` when
/// `overlay`, else `read-only`); tried once per process, in a scratch
/// directory, with the shim itself.
pub fn check(overlay: bool) -> Result<()> {
    static PROBES: [OnceLock<std::result::Result<(), String>>; 2] = [OnceLock::new(), OnceLock::new()];
    let answer = PROBES[usize::from(overlay)].get_or_init(|| probe(overlay));
    answer.clone().map_err(|why| {
        Error::InvalidSpec(format!(
            "{} mode on the host needs a mount namespace of the job's own, which this machine refuses ({why}); use --write direct, or a container (--runner docker)",
            if overlay { "layer" } else { "read-only" }
        ))
    })
}

fn probe(overlay: bool) -> std::result::Result<(), String> {
    let exe = shim::executable().ok_or("no berth binary to run the host-job shim")?;
    let dir = std::env::temp_dir().join(format!(".berth-mount-probe-{}-{overlay}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    crate::store::private::create_dir(&dir).map_err(|e| e.to_string())?;
    let answer = probe_in(exe, &dir, overlay);
    let _ = std::fs::remove_dir_all(&dir);
    answer
}

fn probe_in(exe: &Path, dir: &Path, overlay: bool) -> std::result::Result<(), String> {
    let [lower, upper, work] = ["lower", "upper", "work"].map(|d| dir.join(d));
    for d in [&lower, &upper, &work] {
        std::fs::create_dir(d).map_err(|e| e.to_string())?;
    }
    let mount = match overlay {
        true => WorkspaceMount::Overlay {
            lower: lower.clone(),
            upper,
            work,
        },
        false => WorkspaceMount::ReadOnly(lower.clone()),
    };
    let out = std::process::Command::new(exe)
        .arg(shim::SUBCOMMAND)
        .args(mount.args())
        .args(["--", "true"])
        .current_dir(&lower)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    Err(said.trim().trim_start_matches("berth: ").to_string())
}

/// The mount a host job's spec asks for over `workspace` (`None`: direct).
pub fn for_job(
    spec: &crate::model::JobSpec,
    workspace: &Path,
    layer: Option<&crate::layers::Layer>,
) -> Result<Option<WorkspaceMount>> {
    use crate::model::WriteMode;
    match (spec.write.unwrap_or_default(), layer) {
        (WriteMode::Direct, _) => Ok(None),
        (WriteMode::ReadOnly, _) => {
            check(false)?;
            Ok(Some(WorkspaceMount::ReadOnly(workspace.to_path_buf())))
        }
        (WriteMode::Layer, Some(l)) => {
            check(true)?;
            Ok(Some(WorkspaceMount::Overlay {
                lower: l.meta.workspace.clone(),
                upper: l.upper(),
                work: l.work(),
            }))
        }
        (WriteMode::Layer, None) => Err(Error::InvalidSpec("layer mode without a layer".into())),
    }
}
