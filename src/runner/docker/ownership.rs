//! Which engine objects are this manager's. Names are not proof: two managers
//! with one instance name and different state dirs would otherwise remove
//! each other's containers. Every container and network berth makes carries
//! a `berth.state` label (a hash of the canonical state dir) next to
//! `berth.instance`; nothing is removed, adopted or reused unless both match.
//! Names carry a short form of the same hash, so they never collide either.

use std::collections::HashMap;
use std::path::Path;

use crate::model::JobId;

/// Label keys; `remove_labelled` and crash recovery filter on them.
pub const LABEL_MANAGED: &str = "berth.managed";
pub const LABEL_INSTANCE: &str = "berth.instance";
pub const LABEL_OWNER: &str = "berth.owner";
pub const LABEL_JOB: &str = "berth.job";

/// Label key: hash of the canonical state dir of the manager that made it.
pub const LABEL_STATE: &str = "berth.state";
/// The label naming the pool network a pause holds (the sweeps keep or
/// remove pauses by it).
pub const LABEL_PAUSE: &str = "berth.pause";
/// The label naming the MCP session whose pod a pause holds (`pod/`).
pub const LABEL_POD: &str = "berth.pod";
/// Label key: the job container's name, on each of its children, networks
/// and volumes (a scoped engine's; the sweeps read it too).
pub const LABEL_PARENT: &str = "berth.parent";

/// The `berth.state` value for `state_dir`: 16 hex digits of FNV-1a over the
/// canonical path (stable across processes and builds, unlike std's hasher).
/// A state dir that does not exist yet is made absolute instead.
pub fn state_hash(state_dir: &Path) -> String {
    let path = std::fs::canonicalize(state_dir)
        .or_else(|_| std::path::absolute(state_dir))
        .unwrap_or_else(|_| state_dir.to_path_buf());
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in path.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The part of the hash that goes into names.
pub fn short(state: &str) -> &str {
    &state[..state.len().min(8)]
}

/// The container name: `berth-<instance>-<state hash>-<job id>`, so two
/// managers with one instance name never pick the same name.
pub fn container_name(instance: &str, state: &str, id: &JobId) -> String {
    format!("berth-{}-{}-{id}", clean_name(instance), short(state))
}

/// `name` restricted to the characters the engine accepts in names
/// (`[a-zA-Z0-9][a-zA-Z0-9_.-]*`).
pub fn clean_name(instance: &str) -> String {
    instance
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Who owns an engine object, by the labels berth put on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership {
    pub instance: String,
    pub state: String,
}

impl Ownership {
    /// True when `labels` say the object belongs to this instance and state dir.
    pub fn owns(&self, labels: Option<&HashMap<String, String>>) -> bool {
        let Some(labels) = labels else { return false };
        labels.get(super::LABEL_MANAGED).map(String::as_str) == Some("true")
            && labels.get(super::LABEL_INSTANCE) == Some(&self.instance)
            && labels.get(LABEL_STATE) == Some(&self.state)
    }

    /// The label filters that select this owner's objects.
    pub fn filters(&self) -> Vec<String> {
        vec![
            format!("{}=true", super::LABEL_MANAGED),
            format!("{}={}", super::LABEL_INSTANCE, self.instance),
            format!("{LABEL_STATE}={}", self.state),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_stable_and_tells_state_dirs_apart() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        assert_eq!(state_hash(a.path()), state_hash(a.path()));
        assert_ne!(state_hash(a.path()), state_hash(b.path()));
        assert_eq!(state_hash(a.path()).len(), 16);
        // A path and a symlink to it are one state dir.
        let link = b.path().join("link");
        std::os::unix::fs::symlink(a.path(), &link).unwrap();
        assert_eq!(state_hash(&link), state_hash(a.path()));
    }

    #[test]
    fn ownership_needs_every_label() {
        let o = Ownership {
            instance: "i".into(),
            state: "abc".into(),
        };
        let mut labels = HashMap::from([
            ("berth.managed".to_string(), "true".to_string()),
            ("berth.instance".to_string(), "i".to_string()),
            ("berth.state".to_string(), "abc".to_string()),
        ]);
        assert!(o.owns(Some(&labels)));
        labels.insert("berth.state".into(), "other".into());
        assert!(!o.owns(Some(&labels)), "same instance, another state dir");
        labels.remove("berth.state");
        assert!(!o.owns(Some(&labels)), "no state label: made by someone else");
        assert!(!o.owns(None));
    }
}
