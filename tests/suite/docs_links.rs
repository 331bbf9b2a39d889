//! The documents' links hold, and the README stays a page.
//!
//! Every relative link of README.md, the top-level documents and the
//! manual's chapters (`docs/src/**/*.md`) names a file that exists and,
//! with a `#anchor`, a heading of that file. Anchors are made as GitHub
//! and mdBook make them: the heading's text lower-cased, spaces to `-`,
//! every other character but letters, digits, `-` and `_` dropped, and a
//! second heading of the same slug suffixed `-1`. A chapter that is
//! `{{#include ../../SECURITY.md}}` (the top-level documents are pulled
//! into the book so, see docs/book.toml) has that file's headings. Links
//! to web addresses are not fetched (CI has no way out).
//!
//! Why a test of the suite rather than mdBook: mdBook warns about neither
//! a missing file nor a missing anchor, and the README, which GitHub
//! renders, is not part of the book. `.ci/run` runs it right after
//! `mdbook build docs`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::docs_examples::book_chapters;

/// The README is read on one screen: what berth is, the two commands, a
/// journey and links; the rest is the manual's.
const README_MAX_LINES: usize = 200;

/// The documents whose links are checked, from the repository's root.
fn documents() -> Vec<String> {
    let mut docs: Vec<String> = [
        "README.md",
        "SECURITY.md",
        "ARCHITECTURE.md",
        "BENCHMARKS.md",
        "API.md",
    ]
    .map(String::from)
    .to_vec();
    docs.extend(book_chapters());
    docs
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `file`'s text with each `{{#include PATH}}` line replaced by that file
/// (relative to `file`'s directory), as mdBook does.
fn expanded(file: &Path) -> std::io::Result<String> {
    let text = std::fs::read_to_string(file)?;
    let mut out = String::new();
    for line in text.lines() {
        let inc = line
            .trim()
            .strip_prefix("{{#include ")
            .and_then(|r| r.strip_suffix("}}"));
        match inc {
            Some(path) => out.push_str(&expanded(&file.parent().unwrap().join(path.trim()))?),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    Ok(out)
}

/// Lines outside fenced code blocks, with their line numbers (from 1).
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// The anchor GitHub and mdBook give a heading's text.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_lowercase().next().unwrap_or(c)),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// Every anchor of a document's headings (`-1`, `-2` … for repeats).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for (_, line) in prose(text) {
        let Some(heading) = line.strip_prefix('#').map(|h| h.trim_start_matches('#')) else {
            continue;
        };
        if !heading.starts_with(' ') {
            continue;
        }
        let base = slug(heading);
        let mut id = base.clone();
        let mut n = 0;
        while seen.contains(&id) {
            n += 1;
            id = format!("{base}-{n}");
        }
        seen.insert(id);
    }
    seen
}

/// The targets of the inline links (`[text](target)`) of a prose line.
fn link_targets(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        // `[x](url "title")`: the target is the first word.
        out.push(after[..end].split_whitespace().next().unwrap_or(""));
        rest = &after[end..];
    }
    out
}

/// What is wrong with the relative links of `doc` (each `doc:line: …`).
fn broken_links(doc: &Path, name: &str) -> Vec<String> {
    let text = match expanded(doc) {
        Ok(t) => t,
        Err(e) => return vec![format!("{name}: cannot be read: {e}")],
    };
    let mut broken = Vec::new();
    for (n, line) in prose(&text) {
        for target in link_targets(line) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
            let path: PathBuf = match file {
                "" => doc.to_path_buf(),
                f => doc.parent().unwrap().join(f),
            };
            if !path.exists() {
                broken.push(format!("{name}:{n}: `{target}`: no file {}", path.display()));
                continue;
            }
            if anchor.is_empty() || path.is_dir() {
                continue;
            }
            let known = expanded(&path).map(|t| anchors(&t)).unwrap_or_default();
            if !known.contains(anchor) {
                broken.push(format!(
                    "{name}:{n}: `{target}`: no heading `#{anchor}` in {file}"
                ));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_of_the_docs_holds() {
    let docs = documents();
    assert!(docs.len() > 20, "the manual's chapters are missing: {docs:?}");
    let broken: Vec<String> = docs
        .iter()
        .flat_map(|d| broken_links(&root().join(d), d))
        .collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Every chapter the summary lists exists (mdBook would make a missing one
/// empty), and every chapter is listed.
#[test]
fn the_summary_lists_every_chapter() {
    let summary = std::fs::read_to_string(root().join("docs/src/SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = prose(&summary)
        .into_iter()
        .flat_map(|(_, l)| link_targets(l))
        .map(|t| format!("docs/src/{t}"))
        .collect();
    let chapters: BTreeSet<String> = book_chapters()
        .into_iter()
        .filter(|c| c != "docs/src/SUMMARY.md")
        .collect();
    assert_eq!(listed, chapters, "SUMMARY.md and docs/src disagree");
}

#[test]
fn the_readme_fits_on_a_screen() {
    let lines = std::fs::read_to_string(root().join("README.md"))
        .unwrap()
        .lines()
        .count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines (at most {README_MAX_LINES}): move the detail to a chapter of docs/src"
    );
}

/// A planted broken file link and a planted broken anchor are both seen,
/// and a good anchor (a repeated heading's `-1` too) passes.
#[test]
fn a_broken_link_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let page = "# A page\n\n## Set `x` up: now!\n\n## Again\n\n## Again\n\n\
                [ok](#set-x-up-now) [ok](other.md#again-1) [ok](https://example.com/nope)\n\
                [bad](missing.md) [bad](other.md#nowhere)\n\n```sh\n[not a link](nope.md)\n```\n";
    std::fs::write(dir.path().join("page.md"), page).unwrap();
    std::fs::write(dir.path().join("other.md"), "{{#include page.md}}\n").unwrap();
    let broken = broken_links(&dir.path().join("page.md"), "page.md");
    assert_eq!(broken.len(), 2, "{broken:#?}");
    assert!(
        broken[0].contains("page.md:10: `missing.md`: no file"),
        "{}",
        broken[0]
    );
    assert!(
        broken[1].contains("no heading `#nowhere` in other.md"),
        "{}",
        broken[1]
    );
    assert_eq!(
        slug("Scoped engine (`engine = \"scoped\"`)"),
        "scoped-engine-engine--scoped"
    );
}
