//! The crate's layering, checked: the top-level modules of `src/` (`model`,
//! `store`, `output`, `manager`, `daemon` …), and the files inside each of
//! them, must form graphs without cycles, so that each can be read knowing only the ones below it. An edge
//! is any `crate::NAME` path in a module's code (comments and in-file test
//! modules left out: tests may reach anywhere). The test names the cycle and
//! the files that make each of its edges.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// module → module it uses → files making that edge.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without its comments and its `#[cfg(test)] mod tests`.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `NAME`s of every `crate::NAME` in `code`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    paths_after(code, "crate::")
}

/// The `NAME`s of every `PREFIXNAME` in `code` where the prefix is not the
/// tail of a longer path (`super::x` does not match inside `super::super::x`).
fn paths_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (i, _) in code.match_indices(prefix) {
        let name: String = code[i + prefix.len()..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        // `$crate::` in a macro, `a::super::`: not a path from here.
        let before = code[..i].chars().next_back();
        let part_of_longer =
            before.is_some_and(|c| c == '$' || c == ':' || c == '_' || c.is_ascii_alphanumeric());
        if !name.is_empty() && name != "super" && !part_of_longer {
            found.insert(name);
        }
    }
    found
}

/// The graph between the submodules of the directory module `top`
/// (`src/top/NAME.rs` or `src/top/NAME/`): `crate::top::NAME` paths, and
/// `super::NAME` (`super::super::NAME` one level further down) to a sibling.
fn inner_graph(src: &Path, top: &str) -> Graph {
    let dir = src.join(top);
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let node_of = |rel: &str| rel.split('/').next().unwrap().trim_end_matches(".rs").to_string();
    let nodes: BTreeSet<String> = files
        .iter()
        .map(|f| node_of(&f.strip_prefix(&dir).unwrap().to_string_lossy()))
        .filter(|n| n != "mod" && n != "tests")
        .collect();
    let mut graph = Graph::new();
    for file in files {
        let rel = file.strip_prefix(&dir).unwrap().to_string_lossy().to_string();
        let node = node_of(&rel);
        if !nodes.contains(&node) || rel.contains("/tests") {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        let depth = rel.matches('/').count();
        let to_parent = match (depth, rel.ends_with("/mod.rs")) {
            (0, _) | (1, true) => "super::",
            _ => "super::super::",
        };
        let mut used = paths_after(&code, &format!("crate::{top}::"));
        used.extend(paths_after(&code, to_parent));
        let edges = graph.entry(node.clone()).or_default();
        for u in used.into_iter().filter(|u| *u != node && nodes.contains(u)) {
            edges.entry(u).or_default().insert(format!("{top}/{rel}"));
        }
    }
    graph
}

fn module_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph = Graph::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap().to_string_lossy().to_string();
        let top = rel.split('/').next().unwrap().trim_end_matches(".rs").to_string();
        // Test-only files (`tests.rs`, `tests_*.rs`, `tests/`) may reach anywhere.
        let name = rel.rsplit('/').next().unwrap_or_default();
        if top == "lib" || top == "main" || name.starts_with("tests") || rel.contains("/tests/") {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        let node = graph.entry(top.clone()).or_default();
        for used in crate_paths(&code) {
            if used != top {
                node.entry(used).or_default().insert(rel.clone());
            }
        }
    }
    graph
}

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

#[test]
fn the_top_level_modules_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src);
    assert!(
        graph.len() > 10,
        "the walk found the crate's modules: {:?}",
        graph.keys()
    );
    if let Some(cycle) = find_cycle(&graph) {
        let edges: Vec<String> = cycle
            .windows(2)
            .map(|w| format!("  {} -> {} in {:?}", w[0], w[1], graph[&w[0]][&w[1]]))
            .collect();
        panic!(
            "the module graph has a cycle: {}\n{}\nmove the shared part into a module below both (plain data goes to `model`)",
            cycle.join(" -> "),
            edges.join("\n")
        );
    }
    // The leaf stays a leaf: `model` uses nothing else in the crate.
    assert_eq!(
        graph.get("model").map(|e| e.keys().collect::<Vec<_>>()),
        Some(vec![])
    );
}

#[test]
fn the_submodules_of_each_module_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut cycles = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_dir() {
            continue;
        }
        let top = path.file_name().unwrap().to_string_lossy().to_string();
        let graph = inner_graph(&src, &top);
        if let Some(cycle) = find_cycle(&graph) {
            let edges: Vec<String> = cycle
                .windows(2)
                .map(|w| format!("    {} -> {} in {:?}", w[0], w[1], graph[&w[0]][&w[1]]))
                .collect();
            cycles.push(format!("  {top}: {}\n{}", cycle.join(" -> "), edges.join("\n")));
        }
    }
    assert!(
        cycles.is_empty(),
        "submodules with a cycle:\n{}\nmove what both use into a third file",
        cycles.join("\n")
    );
}

#[test]
fn the_check_sees_a_cycle_when_there_is_one() {
    let mut graph = Graph::new();
    let edge = |g: &mut Graph, a: &str, b: &str| {
        g.entry(a.into())
            .or_default()
            .entry(b.into())
            .or_default()
            .insert(format!("{a}.rs"));
    };
    edge(&mut graph, "store", "model");
    edge(&mut graph, "output", "store");
    assert_eq!(find_cycle(&graph), None);
    edge(&mut graph, "store", "output");
    assert_eq!(
        find_cycle(&graph),
        Some(vec![
            "output".to_string(),
            "store".to_string(),
            "output".to_string()
        ])
    );
    assert_eq!(
        crate_paths("use crate::model::{A, B};\nlet x = crate::store::open(); $crate::x"),
        ["model", "store"].iter().map(|s| s.to_string()).collect()
    );
    assert_eq!(
        paths_after("use super::app::App; super::super::io::x; a::super::b", "super::"),
        ["app"].iter().map(|s| s.to_string()).collect()
    );
}
