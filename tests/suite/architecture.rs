//! The crate's layering, checked: the top-level modules of `src/` (`model`,
//! `store`, `output`, `manager`, `daemon` …), and the modules inside every
//! folder at every depth, must form graphs without cycles, so that each can
//! be read knowing only the ones below it. The graph is read with a parser
//! (`architecture/graph.rs`: `use` trees with their groups, paths in code,
//! `crate::`, `self::`, `super::`, paths inside macro calls, re-exports
//! followed to the item's home), tests left out. The test names each cycle
//! and the files that make its edges; a planted cycle of each kind the old
//! text-matching check missed is seen. A few known edges of `config`'s
//! ring around `Config` are let stand (`ALLOWED`, each with why). The length of every function is
//! checked too (`architecture/fnlen.rs`: none over 120 lines).

mod fnlen;
mod graph;
mod reexports;

use std::collections::BTreeMap;
use std::path::Path;

use graph::Graphs;

type Graph = BTreeMap<String, BTreeMap<String, std::collections::BTreeSet<String>>>;

/// A cycle in `graph`, as the list of modules along it, if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &Graph,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let start = path.iter().position(|n| n == node).unwrap();
                let mut cycle = path[start..].to_vec();
                cycle.push(node.to_string());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node.to_string(), Mark::Open);
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flat_map(|edges| edges.keys()) {
            if let Some(cycle) = visit(next, graph, marks, path) {
                return Some(cycle);
            }
        }
        path.pop();
        marks.insert(node.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut marks, &mut Vec::new()))
}

/// Every cycle of every folder, said with the files that make its edges.
fn cycles(graphs: &Graphs) -> Vec<String> {
    let mut found = Vec::new();
    for (folder, graph) in graphs {
        if let Some(cycle) = find_cycle(graph) {
            let edges: Vec<String> = cycle
                .windows(2)
                .map(|w| format!("    {} -> {} in {:?}", w[0], w[1], graph[&w[0]][&w[1]]))
                .collect();
            let at = if folder.is_empty() { "src" } else { folder };
            found.push(format!("  {at}: {}\n{}", cycle.join(" -> "), edges.join("\n")));
        }
    }
    found
}

/// Edges (folder, from, to) that close a ring in today's `src/` and are let
/// stand, each with why; the check drops them before looking for cycles,
/// and fails when one no longer exists, so the list only shrinks.
const ALLOWED: &[(&str, &str, &str)] = &[
    // `config/table.rs` is the machinery the rows of `keys.rs` expand in
    // (`config_keys!`), and `jobs.rs` and `history.rs` use its readers; the
    // macros and readers name what the rows make: `Config` (keys.rs) and
    // `SizeValue` (jobs.rs), reached through `config/mod.rs`'s re-exports.
    // Breaking the ring means moving those types under `table` or splitting
    // the readers out of it: a redesign, not a moved `use`.
    ("config", "table", "keys"),
    ("config", "table", "jobs"),
    // `Config` is generated in `keys.rs` from rows that name each room's
    // defaults, readers and describers (`instance`, `jobs`, `project`,
    // `safety`), and each room adds its own `impl Config` (constructors,
    // job defaults, the project image) or takes `&Config` in the row
    // functions keys.rs calls: one type spread over its rooms by design.
    ("config", "instance", "keys"),
    ("config", "jobs", "keys"),
    ("config", "project", "keys"),
    ("config", "safety", "keys"),
];

#[test]
fn no_folder_of_the_crate_has_a_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graphs = graph::graphs(&src);
    for (folder, from, to) in ALLOWED {
        let gone = graphs
            .get_mut(*folder)
            .and_then(|g| g.get_mut(*from))
            .and_then(|e| e.remove(*to));
        assert!(
            gone.is_some(),
            "{folder}: {from} -> {to} is allowed but no longer exists: take it off ALLOWED"
        );
    }
    let top = &graphs[""];
    assert!(
        top.len() > 10,
        "the walk found the crate's modules: {:?}",
        top.keys()
    );
    assert!(
        graphs.contains_key("runner/docker"),
        "and the folders: {:?}",
        graphs.keys()
    );
    let found = cycles(&graphs);
    assert!(
        found.is_empty(),
        "modules with a cycle:\n{}\nmove what both use into a module below both (plain data goes to `model`)",
        found.join("\n")
    );
    // The leaf stays a leaf: `model` uses nothing else in the crate.
    assert!(
        top.get("model").is_none_or(|e| e.is_empty()),
        "{:?}",
        top.get("model")
    );
}

/// Write `files` (path, text) under a temp `src` and check it.
fn planted(files: &[(&str, &str)]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join("src").join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    cycles(&graph::graphs(&dir.path().join("src")))
}

/// The two cycles the text-matching check let through: `config` ↔ `safety`
/// (the use sat below a one-line `mod tests;` in a mod.rs, where the old
/// check stopped reading) and a ring inside `runner/docker` made of
/// `super::{a, b}` groups two folders down.
#[test]
fn the_check_sees_the_cycles_the_old_one_missed() {
    let lib = ("lib.rs", "pub mod config;\npub mod safety;\npub mod runner;\n");
    let ok = planted(&[
        lib,
        ("config.rs", "use crate::safety::Rules;\npub struct Config;\n"),
        ("safety/mod.rs", "#[cfg(test)]\nmod tests;\npub struct Rules;\n"),
        ("safety/tests.rs", "use crate::config::Config;\n"),
        ("runner/mod.rs", "pub mod docker;\n"),
        ("runner/docker/mod.rs", "mod launch;\nmod pause;\nmod network;\n"),
        ("runner/docker/launch.rs", "use super::{pause, network};\n"),
        ("runner/docker/pause.rs", "use super::network::Net;\n"),
        ("runner/docker/network.rs", "pub struct Net;\n"),
    ]);
    assert!(ok.is_empty(), "no cycle yet (tests may reach anywhere): {ok:?}");

    let config_safety = planted(&[
        lib,
        ("config.rs", "use crate::safety::Rules;\npub struct Config;\n"),
        (
            "safety/mod.rs",
            "#[cfg(test)]\nmod tests;\nuse crate::config::Config;\npub struct Rules;\n",
        ),
        ("safety/tests.rs", ""),
        ("runner/mod.rs", ""),
    ]);
    assert_eq!(config_safety.len(), 1, "{config_safety:?}");
    assert!(
        config_safety[0].contains("src: config -> safety -> config"),
        "{config_safety:?}"
    );

    let docker_ring = planted(&[
        lib,
        ("config.rs", ""),
        ("safety/mod.rs", ""),
        ("runner/mod.rs", "pub mod docker;\n"),
        (
            "runner/docker/mod.rs",
            "mod launch;\nmod pause;\nmod network;\nmod slot;\n",
        ),
        ("runner/docker/launch.rs", "use super::{pause::Pause, slot};\n"),
        ("runner/docker/slot.rs", ""),
        (
            "runner/docker/pause.rs",
            "pub struct Pause;\nfn f() { super::network::make(); }\n",
        ),
        (
            "runner/docker/network.rs",
            "pub fn make() { let _ = crate::runner::docker::launch::go; }\n",
        ),
    ]);
    assert_eq!(docker_ring.len(), 1, "{docker_ring:?}");
    assert!(docker_ring[0].starts_with("  runner/docker: "), "{docker_ring:?}");
    for edge in ["launch -> pause", "pause -> network", "network -> launch"] {
        assert!(docker_ring[0].contains(edge), "{edge}: {docker_ring:?}");
    }

    // A path only inside a macro call (syn leaves its tokens unparsed).
    let in_macro = planted(&[
        lib,
        (
            "config.rs",
            "fn f() { tracing::debug!(\"{}\", crate::safety::NAME); }\n",
        ),
        (
            "safety/mod.rs",
            "pub const NAME: &str = \"x\";\nfn g() { let _ = vec![crate::config::f]; }\n",
        ),
        ("runner/mod.rs", ""),
    ]);
    assert_eq!(in_macro.len(), 1, "{in_macro:?}");
    assert!(
        in_macro[0].contains("src: config -> safety -> config"),
        "{in_macro:?}"
    );
}

/// Re-exported names are followed to the module that defines the item: a
/// ring closed only through `lib.rs`'s `pub use` (`crate::Rules`), and one
/// inside a folder closed through its `mod.rs` re-exporting a child's item,
/// reached from the root in two hops (`crate::JobInfo` is
/// `model::JobInfo` is `model::status::JobInfo`).
#[test]
fn the_check_follows_re_exports() {
    let root_ring = planted(&[
        (
            "lib.rs",
            "pub mod config;\npub mod safety;\npub use safety::{Rules as Policy};\n",
        ),
        ("config.rs", "use crate::Policy;\npub struct Config;\n"),
        (
            "safety/mod.rs",
            "pub struct Rules;\nfn f() { let _ = crate::config::Config; }\n",
        ),
    ]);
    assert_eq!(root_ring.len(), 1, "{root_ring:?}");
    assert!(
        root_ring[0].contains("src: config -> safety -> config"),
        "{root_ring:?}"
    );

    let model = |status: &'static str| {
        planted(&[
            ("lib.rs", "pub mod model;\npub use model::JobInfo;\n"),
            (
                "model/mod.rs",
                "mod spec;\nmod status;\npub use status::JobInfo;\npub struct Own;\n",
            ),
            ("model/spec.rs", "pub fn f(_: crate::JobInfo) {}\n"),
            ("model/status.rs", status),
        ])
    };
    // The parent's own item is no edge, re-exported or not.
    let ok = model("pub struct JobInfo;\nfn g() { let _ = crate::model::Own; }\n");
    assert!(ok.is_empty(), "{ok:?}");
    let child_ring = model("pub struct JobInfo;\nfn g() { super::spec::f; }\n");
    assert_eq!(child_ring.len(), 1, "{child_ring:?}");
    assert!(child_ring[0].starts_with("  model: "), "{child_ring:?}");
    for edge in ["spec -> status", "status -> spec"] {
        assert!(child_ring[0].contains(edge), "{edge}: {child_ring:?}");
    }
}

/// Every source file ARCHITECTURE.md names (`manager/admit.rs`, `pool.rs`),
/// in prose or in its diagrams, exists in the crate (a path ending with that
/// name): the map must not point at rooms that were merged away or renamed.
#[test]
fn architecture_md_names_only_files_that_exist() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut files = Vec::new();
    let mut stack = vec![root.join("src"), root.join("tests"), root.join("benches")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(root) {
                files.push(format!("/{}", rel.display()));
            }
        }
    }
    let named = named_files(&text);
    assert!(named.len() > 20, "the map names files: {named:?}");
    let missing: Vec<&&str> = named
        .iter()
        .filter(|n| {
            !files
                .iter()
                .any(|f| f.ends_with(&format!("/{}", n.trim_start_matches('/'))))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names files that do not exist: {missing:?}"
    );
}

/// The `.rs` names of a text, backquoted or not (the diagrams name files
/// bare, `read.rs/scan.rs` two at once); a pattern (`*.rs`) names none.
fn named_files(text: &str) -> std::collections::BTreeSet<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '/' | '.' | '-')))
        .flat_map(|w| w.split_inclusive(".rs/"))
        .map(|w| w.trim_end_matches('/').trim_end_matches('.'))
        .filter(|w| w.ends_with(".rs") && w.len() > ".rs".len() && !w.ends_with("/.rs"))
        .collect()
}
