//! Project images built from a Dockerfile: the tag an image built from one
//! context gets (`berth-project/<workspace dir name>:<hash>`, so a changed
//! context is a new tag and an unchanged one is reused), the label that ties
//! it to its workspace, and the words saying why it applies. The data (the
//! `[image]` table of berth.toml, the resolved `ProjectBuild`, the
//! `BuildProgress` a build reports) is plain data in `model`; the files sent
//! are `context.rs`'s, the build itself the Docker runner's
//! (`runner/docker/build.rs`).

use std::path::Path;

use crate::model::ProjectBuild;

/// Characters of the context hash kept in a project image's tag.
const TAG_HASH_LEN: usize = 16;

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(TAG_HASH_LEN)]
}

/// Why this image: `[image] dockerfile in /p/berth.toml; from /p/Dockerfile
/// (context /p, hash 1a2b…)`.
pub fn why(build: &ProjectBuild, reason: &str, hash: &str) -> String {
    format!(
        "{reason}; from {} (context {}, hash {})",
        build.dockerfile.display(),
        build.context.display(),
        short(hash)
    )
}

/// Repository of every project image berth builds.
pub const PROJECT_REPO: &str = "berth-project";

/// Label naming the workspace a project image was built for (old builds of
/// the same workspace are removed after a new one).
pub const WORKSPACE_LABEL: &str = "berth.project.workspace";

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BuildProgress, ImageValue, ProjectBuild};
    use serde::Deserialize;

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
