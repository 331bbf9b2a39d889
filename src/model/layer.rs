//! What a job's writes look like from outside: the mode it wrote its
//! workspace in and why ([`Writes`]), a layer as `berth layers` lists it
//! ([`LayerInfo`]), one change in it ([`Change`]) and what an apply did
//! ([`Applied`]). Plain data; the layers themselves are `crate::layers`.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{JobId, WriteMode};

/// How a job wrote its workspace, on its record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Writes {
    pub mode: WriteMode,
    /// Where the mode came from (`agent default (agent_write)`, `--write`, …).
    pub why: String,
    /// `layer` mode: the layer's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    /// `layer` mode, once the job ended: what its layer holds now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<LayerCounts>,
    /// `layer` mode on another machine: why the job's changes did not come
    /// back into its layer (none: they did, or it ran here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<String>,
}

impl Writes {
    /// The one line a finished job's answer carries about its layer, when
    /// the layer holds anything: an agent that ran a formatter learns its
    /// files are not in the checkout yet.
    pub fn sentence(&self) -> Option<String> {
        self.sentence_for(false)
    }

    /// [`Writes::sentence`] for an agent (`agent`: naming its MCP tools)
    /// or a person (naming the commands).
    pub fn sentence_for(&self, agent: bool) -> Option<String> {
        let layer = self.layer.as_deref()?;
        let lost = self
            .lost
            .as_ref()
            .map(|why| format!("its changes did not come back into layer {layer}: {why}"));
        let counts = self.changed.as_ref().filter(|c| c.total() > 0);
        match (lost, counts) {
            (Some(lost), Some(c)) => Some(format!("{lost}; {}", c.sentence(layer, agent))),
            (Some(lost), None) => Some(lost),
            (None, c) => c.map(|c| c.sentence(layer, agent)),
        }
    }
}

/// How many paths of a layer differ from its checkout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerCounts {
    pub added: u64,
    pub changed: u64,
    pub deleted: u64,
    /// Bytes the layer's files take.
    pub bytes: u64,
}

impl LayerCounts {
    pub fn total(&self) -> u64 {
        self.added + self.changed + self.deleted
    }

    /// `3 files changed in layer job-4 (1 added, 1 changed, 1 deleted):
    /// `berth apply job-4` brings them to your checkout`; for an agent
    /// (`agent`), its `apply` and `diff` tools.
    pub fn sentence(&self, layer: &str, agent: bool) -> String {
        let n = self.total();
        let mut parts = Vec::new();
        for (count, word) in [
            (self.added, "added"),
            (self.changed, "changed"),
            (self.deleted, "deleted"),
        ] {
            if count > 0 {
                parts.push(format!("{count} {word}"));
            }
        }
        let (apply, diff) = match agent {
            true => ("`apply`".to_string(), "`diff`".to_string()),
            false => (format!("`berth apply {layer}`"), format!("`berth diff {layer}`")),
        };
        format!(
            "{n} file{} changed in layer {layer} ({}), not in the checkout yet: {apply} brings them there, {diff} shows them",
            if n == 1 { "" } else { "s" },
            parts.join(", ")
        )
    }
}

/// What state a layer is in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum LayerState {
    /// Nothing runs in it.
    Idle,
    /// Jobs write it now.
    InUse { jobs: Vec<JobId> },
    /// An apply stopped half-way (a crash, a full disk): running `berth apply`
    /// again finishes it (files already applied are equal and skipped).
    HalfApplied,
    /// Its files or record could not be read.
    Damaged { reason: String },
}

/// A layer as `berth layers` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerInfo {
    pub name: String,
    /// The checkout it lies over.
    pub workspace: PathBuf,
    /// Who made it: `mcp:<session>` for a session's layer, else none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Jobs that wrote it, oldest first.
    pub jobs: Vec<JobId>,
    pub created_at: DateTime<Utc>,
    /// Last time a job wrote it or it was applied.
    pub used_at: DateTime<Utc>,
    #[serde(flatten)]
    pub state: LayerState,
    pub counts: LayerCounts,
    /// Read back from a remote engine after its jobs ended (not live).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub remote: bool,
}

/// What a layer does to one path of the checkout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Added,
    Changed,
    Deleted,
}

impl ChangeKind {
    /// One letter, as `git status --short` writes it.
    pub fn letter(self) -> char {
        match self {
            ChangeKind::Added => 'A',
            ChangeKind::Changed => 'M',
            ChangeKind::Deleted => 'D',
        }
    }
}

/// What a path is in the layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    /// Sockets, fifos, devices: listed, never applied.
    Other,
}

/// One change of a layer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Relative to the workspace.
    pub path: String,
    pub kind: ChangeKind,
    /// What the layer holds there (for a deletion: what the checkout holds).
    pub entry: EntryKind,
    /// The layer's size of it (0 for a deletion).
    pub size: u64,
    /// Set when the checkout changed it since the layer took its copy:
    /// an apply skips it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<String>,
}

/// What an apply did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    pub layer: String,
    /// Paths written to or removed from the checkout.
    pub applied: Vec<String>,
    /// Paths skipped: the checkout changed them since the layer's copy (or
    /// they lie under a symlink of the checkout), with why.
    pub conflicts: Vec<Change>,
    /// Entries that cannot be applied (sockets, fifos, devices).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

impl Applied {
    /// One line: how many went, how many were skipped and why.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "applied {} path{} of layer {} to the checkout",
            self.applied.len(),
            if self.applied.len() == 1 { "" } else { "s" },
            self.layer
        );
        if !self.conflicts.is_empty() {
            s.push_str(&format!(
                "; {} conflict{} skipped (changed in the checkout since the layer copied {}): {}",
                self.conflicts.len(),
                if self.conflicts.len() == 1 { "" } else { "s" },
                if self.conflicts.len() == 1 { "it" } else { "them" },
                self.conflicts
                    .iter()
                    .take(5)
                    .map(|c| c.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            if self.conflicts.len() > 5 {
                s.push_str(", …");
            }
        }
        if !self.skipped.is_empty() {
            s.push_str(&format!(
                "; {} not applicable (not a file, directory or symlink)",
                self.skipped.len()
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sentence_counts_and_names_the_command() {
        let c = LayerCounts {
            added: 1,
            changed: 2,
            deleted: 0,
            bytes: 10,
        };
        assert_eq!(
            c.sentence("job-4", false),
            "3 files changed in layer job-4 (1 added, 2 changed), not in the checkout yet: `berth apply job-4` brings them there, `berth diff job-4` shows them"
        );
        assert!(
            c.sentence("mcp-1", true)
                .ends_with("`apply` brings them there, `diff` shows them")
        );
        let w = Writes {
            mode: WriteMode::Layer,
            why: "x".into(),
            layer: Some("job-4".into()),
            changed: Some(LayerCounts::default()),
            lost: None,
        };
        assert_eq!(w.sentence(), None);
        let w = Writes {
            lost: Some("the task was killed first".into()),
            ..w
        };
        assert_eq!(
            w.sentence().as_deref(),
            Some("its changes did not come back into layer job-4: the task was killed first")
        );
    }
}
