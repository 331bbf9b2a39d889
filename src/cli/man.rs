//! `berth man DIR`: man pages generated from the clap definitions, so they
//! say what `--help` says and never fall behind it: `berth.1` and one page
//! per verb, nested verbs too (`berth-run.1`, `berth-images-build.1`).
//! Hidden verbs get none. The manual's *Man pages* chapter
//! (`docs/src/man.md`) says where to put them.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::CommandFactory;

use super::Cli;
use super::out::outln;

/// Write every page into `dir` (made when missing) and say how many.
pub fn write_pages(dir: &Path) -> anyhow::Result<i32> {
    let written = generate(dir)?;
    outln!("berth: wrote {} man pages into {}", written.len(), dir.display());
    Ok(0)
}

/// The pages, written; their paths, `berth.1` first.
pub(super) fn generate(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    clap_mangen::generate_to(Cli::command(), dir)
        .with_context(|| format!("could not write man pages into {}", dir.display()))?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "1"))
        .collect();
    pages.sort_by_key(|p| (p.file_name() != Some("berth.1".as_ref()), p.clone()));
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `berth.1` names every visible verb, and each has a page of its own.
    #[test]
    fn man_pages_name_every_verb() {
        let dir = tempfile::tempdir().unwrap();
        let pages = generate(dir.path()).unwrap();
        assert_eq!(pages[0].file_name().unwrap(), "berth.1", "{pages:?}");
        let main = std::fs::read_to_string(&pages[0]).unwrap();
        let cmd = Cli::command();
        let verbs: Vec<&str> = cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| s.get_name())
            .collect();
        assert!(verbs.len() > 20, "{verbs:?}");
        for verb in &verbs {
            assert!(
                main.contains(&format!("berth\\-{verb}")),
                "berth.1 does not name `{verb}`"
            );
            let page = dir.path().join(format!("berth-{verb}.1"));
            let text = std::fs::read_to_string(&page).unwrap_or_else(|_| panic!("no {}", page.display()));
            assert!(text.starts_with(".ie"), "not roff: {}", page.display());
        }
        assert!(
            dir.path().join("berth-images-build.1").exists(),
            "nested verbs get pages too"
        );
    }
}
