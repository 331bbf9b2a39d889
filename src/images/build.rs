//! Project images built from a Dockerfile: the `[image]` table of
//! berth.toml (`dockerfile`, `context`, `args`; a plain `image = "name:tag"`
//! stays a string), the resolved [`ProjectBuild`] a job's config carries,
//! the tag an image built from one context gets
//! (`berth-project/<project>:<hash>`, so a changed context is a new tag and an
//! unchanged one is reused), and the progress a build reports. The build
//! itself is the Docker runner's (`runner/docker/build.rs`); the files sent
//! are `context.rs`'s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Repository of every project image berth builds.
pub const PROJECT_REPO: &str = "berth-project";

/// Label naming the workspace a project image was built for (old builds of
/// the same workspace are removed after a new one).
pub const WORKSPACE_LABEL: &str = "berth.project.workspace";

/// Characters of the context hash kept in the tag.
const TAG_HASH_LEN: usize = 16;

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

    /// Why this image: `[image] dockerfile in /p/berth.toml; built from
    /// /p/Dockerfile (context /p, hash 1a2b…)`.
    pub fn why(&self, reason: &str, hash: &str) -> String {
        format!(
            "{reason}; from {} (context {}, hash {})",
            self.dockerfile.display(),
            self.context.display(),
            short(hash)
        )
    }
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(TAG_HASH_LEN)]
}

/// `berth-project/<workspace dir name>:<hash prefix>`; the name is cut to
/// what a repository name may hold (lower case, `[a-z0-9._-]`).
pub fn project_tag(workspace: &Path, hash: &str) -> String {
    let raw = workspace
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let mut name: String = raw
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '-',
        })
        .collect();
    name = name
        .trim_matches(|c| matches!(c, '.' | '_' | '-'))
        .chars()
        .take(64)
        .collect();
    if name.is_empty() {
        name = "project".into();
    }
    format!("{PROJECT_REPO}/{name}:{}", short(hash))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_and_names_parse() {
        #[derive(Deserialize)]
        struct T {
            image: ImageValue,
        }
        let t: T = toml::from_str("image = \"python:3.12\"").unwrap();
        assert_eq!(t.image, ImageValue::Name("python:3.12".into()));
        let t: T =
            toml::from_str("[image]\ndockerfile = \"docker/Dockerfile\"\nargs = { V = \"1\" }\n").unwrap();
        let ImageValue::Build(b) = t.image else {
            panic!("a table")
        };
        let p = ProjectBuild::from_table(b, Path::new("/p/berth.toml"));
        assert_eq!(p.dockerfile, Path::new("/p/docker/Dockerfile"));
        assert_eq!(p.context, Path::new("/p/docker"));
        assert_eq!(p.args["V"], "1");
        let err = toml::from_str::<T>("[image]\ndockerfil = \"D\"\n").err().unwrap();
        assert!(err.to_string().contains("dockerfil"), "{err}");
    }

    #[test]
    fn tags_and_steps() {
        let h = "0123456789abcdef0123";
        assert_eq!(
            project_tag(Path::new("/x/My App!"), h),
            "berth-project/my-app:0123456789abcdef"
        );
        assert_eq!(
            project_tag(Path::new("/"), h),
            "berth-project/project:0123456789abcdef"
        );
        let mut p = BuildProgress {
            image: "t".into(),
            ..Default::default()
        };
        p.add_line("Step 2/3 : RUN make\n");
        assert_eq!((p.step, p.steps), (2, 3));
        assert_eq!(p.line(), "building t: step 2/3 RUN make");
        p.add_line(" ---> Running in 1a2b");
        p.add_line("cc -o app app.c");
        assert_eq!(p.line(), "building t: step 2/3 RUN make: cc -o app app.c");
    }
}
