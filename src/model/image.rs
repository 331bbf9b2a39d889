//! Images as jobs record them: which one ran and why ([`ImageChoice`]), when
//! it is pulled ([`PullPolicy`]) and how far a pull is ([`PullProgress`]);
//! project images: the `[image]` table of berth.toml ([`ImageValue`]), the
//! build a project asks for ([`ProjectBuild`]) and how far it is
//! ([`BuildProgress`]).
//! Choosing, pulling and building are `images/` and the Docker runner.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
    /// Milliseconds the build took, when this start built the project image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_ms: Option<u64>,
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

/// `image` in berth.toml: a name, or a table saying how to build one.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ImageValue {
    Name(String),
    Build(BuildTable),
}

/// The `[image]` table as written (paths relative to berth.toml's directory).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildTable {
    pub dockerfile: PathBuf,
    /// Default: the Dockerfile's directory.
    pub context: Option<PathBuf>,
    #[serde(default)]
    pub args: BTreeMap<String, String>,
}

// By hand rather than `untagged`: a table with a typo must say which key is
// wrong, not "did not match any variant".
impl<'de> Deserialize<'de> for ImageValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ImageValue;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "an image name (\"python:3.12\") or a table with `dockerfile` (and `context`, `args`)",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ImageValue, E> {
                Ok(ImageValue::Name(v.into()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<ImageValue, A::Error> {
                BuildTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(ImageValue::Build)
            }
        }
        d.deserialize_any(V)
    }
}

/// A project image to build: absolute paths, and where it was asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProjectBuild {
    pub dockerfile: PathBuf,
    pub context: PathBuf,
    #[serde(default)]
    pub args: BTreeMap<String, String>,
    /// The berth.toml or devcontainer.json that asked for it.
    pub declared_in: PathBuf,
}

impl ProjectBuild {
    /// Resolve `table` written in the file `declared_in` (relative paths are
    /// relative to that file's directory; the context defaults to the
    /// Dockerfile's directory).
    pub fn from_table(table: BuildTable, declared_in: &Path) -> Self {
        let base = declared_in.parent().unwrap_or(Path::new("/"));
        let dockerfile = base.join(&table.dockerfile);
        let context = match table.context {
            Some(c) => base.join(c),
            None => dockerfile.parent().unwrap_or(base).to_path_buf(),
        };
        ProjectBuild {
            dockerfile,
            context,
            args: table.args,
            declared_in: declared_in.to_path_buf(),
        }
    }
}

/// A trusted devcontainer.json's `postCreateCommand`: run once on the
/// project image (as one more build step, confined as a build is), the
/// image that results being the one the project's container jobs run in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PostCreate {
    /// The command: a string runs through `/bin/sh -c`, a list as it is.
    pub argv: Vec<String>,
    /// The user it runs as (`remoteUser`), else the image's own.
    pub user: Option<String>,
    /// The devcontainer.json that asked for it (canonical).
    pub file: PathBuf,
}

/// How far a project image build is (from the engine's build output).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BuildProgress {
    /// The tag being built.
    pub image: String,
    pub dockerfile: PathBuf,
    /// `Step N/M` of the classic builder (0 before the first).
    pub step: u32,
    pub steps: u32,
    /// The instruction of the current step (`RUN make`).
    #[serde(default)]
    pub instruction: String,
    /// The build's last output line worth showing (the builder's own
    /// bookkeeping lines are left out).
    pub last: String,
    pub elapsed_ms: u64,
    /// The last report of a build that finished.
    #[serde(default)]
    pub done: bool,
}

impl BuildProgress {
    /// Take one line of the engine's output into account.
    pub fn add_line(&mut self, line: &str) {
        let line = line.trim();
        let noise = [
            "--->",
            "Removing intermediate container",
            "Successfully built",
            "Sending build context",
        ];
        if line.is_empty() || noise.iter().any(|n| line.starts_with(n)) {
            return;
        }
        let cut = |s: &str| s.chars().take(200).collect::<String>();
        if let Some(rest) = line.strip_prefix("Step ")
            && let Some((n, rest)) = rest.split_once('/')
            && let Some((m, instruction)) = rest.split_once(" : ")
            && let (Ok(n), Ok(m)) = (n.parse(), m.trim().parse())
        {
            self.step = n;
            self.steps = m;
            self.instruction = cut(instruction);
            self.last.clear();
            return;
        }
        self.last = cut(line);
    }

    /// `building berth-project/app:1a2b: step 2/3 RUN make: <last output line>`
    pub fn line(&self) -> String {
        let mut out = format!("building {}: ", self.image);
        match (self.done, self.steps) {
            (true, _) => out.push_str("done"),
            (false, 0) => out.push_str("sending the context"),
            (false, m) => out.push_str(&format!("step {}/{m} {}", self.step, self.instruction)),
        }
        if !self.last.is_empty() && !self.done {
            out.push_str(": ");
            out.push_str(&self.last);
        }
        out
    }
}
