//! Images as jobs record them: which one ran and why ([`ImageChoice`]), when
//! it is pulled ([`PullPolicy`]) and how far a pull is ([`PullProgress`]).
//! Choosing, pulling and building are `images/` and the Docker runner.

use serde::{Deserialize, Serialize};

/// When a job's image is pulled from its registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PullPolicy {
    /// Only when the engine does not have it (the default).
    #[default]
    Missing,
    /// Every start (picks up a moved tag).
    Always,
    /// Never: a missing image is an error.
    Never,
}

impl PullPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Missing => "missing",
            PullPolicy::Always => "always",
            PullPolicy::Never => "never",
        }
    }
}

/// The image a job ran in and why that one.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ImageChoice {
    pub name: String,
    pub why: String,
    /// Milliseconds the pull took, when this start pulled it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_ms: Option<u64>,
}

/// How far an image pull is: layers and bytes (totals grow as the engine
/// learns each layer's size).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PullProgress {
    pub image: String,
    pub layers: u32,
    pub layers_done: u32,
    pub bytes_done: u64,
    pub bytes_total: u64,
    pub elapsed_ms: u64,
    /// The last report of a pull that finished.
    #[serde(default)]
    pub done: bool,
}

impl PullProgress {
    /// Whole percent of the known bytes (0 while no size is known).
    pub fn percent(&self) -> u64 {
        (self.bytes_done.min(self.bytes_total) * 100)
            .checked_div(self.bytes_total)
            .unwrap_or(0)
    }

    /// `pulling alpine:3: 2/3 layers, 3.1 MB/4.0 MB (77%)`
    pub fn line(&self) -> String {
        let mb = |b: u64| format!("{:.1} MB", b as f64 / 1e6);
        format!(
            "pulling {}: {}/{} layers, {}/{} ({}%)",
            self.image,
            self.layers_done,
            self.layers,
            mb(self.bytes_done),
            mb(self.bytes_total),
            self.percent()
        )
    }
}
