//! The module graph of a crate's sources, read with a real parser (syn):
//! every `use` tree (groups included) and every path in the code, resolved
//! from `crate::`, `self::`, `super::` (repeated) or a child module's name,
//! at every folder level. Items under `#[cfg(test)]`, and files that are
//! test modules (`#[cfg(test)] mod tests;` in their parent), are left out:
//! tests may reach anywhere.
//!
//! An edge joins two sibling modules: a file of module `a::b::c` using
//! `crate::a::d::x` makes the edge `b -> d` in folder `a` (and nothing at
//! the top, where both are `a`). Only names that are modules count; a
//! parent's own items (`super::Launched`) make no edge. A re-exported name
//! is followed to the module that defines the item (`architecture/
//! reexports.rs`): `crate::Manager` is a use of `manager`. Paths inside
//! macro calls (`vec![…]`, `tokio::select! {…}`, `tracing::debug!(…)`) count
//! too: their tokens are read for `a::b` sequences, since syn leaves them
//! unparsed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

use super::reexports::Reexports;

/// folder (`a/b`, "" for the crate root) → module → module it uses → files.
pub type Graphs = BTreeMap<String, BTreeMap<String, BTreeMap<String, BTreeSet<String>>>>;

/// A module path: its names below `crate`.
pub(super) type Module = Vec<String>;

struct Source {
    rel: String,
    module: Module,
}

/// Every `.rs` file under `dir` (the length check reads them too).
pub(super) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `a/b.rs` and `a/b/mod.rs` are module `a::b`; `lib.rs` and `main.rs` the root.
fn module_of(rel: &Path) -> Module {
    let mut names: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    let last = names.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !(stem == "mod" || (names.is_empty() && (stem == "lib" || stem == "main"))) {
        names.push(stem.to_string());
    }
    names
}

/// `#[cfg(test)]`.
pub(super) fn is_test_attr(attrs: &[syn::Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test"))
}

/// The child modules a file declares `#[cfg(test)]` (`mod tests;`).
fn test_children(file: &syn::File) -> BTreeSet<String> {
    file.items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Mod(m) if m.content.is_none() && is_test_attr(&m.attrs) => Some(m.ident.to_string()),
            _ => None,
        })
        .collect()
}

/// Every path a file's non-test code names, resolved to crate modules'
/// paths where it can be (`None` for other crates and std).
struct Paths<'a> {
    modules: &'a BTreeSet<Module>,
    /// The module the code being visited is in (inline `mod x { }` pushes).
    at: Module,
    found: Vec<Module>,
}

/// `segs` as written in module `at`, as a path from the crate root: from
/// `crate::`, `self::`, `super::` (repeated) or a child module's name
/// (`None` for other crates and std).
pub(super) fn resolve(modules: &BTreeSet<Module>, at: &Module, segs: &[String]) -> Option<Module> {
    let first = segs.first()?;
    let (mut base, rest): (Module, &[String]) = match first.as_str() {
        "crate" => (Vec::new(), &segs[1..]),
        "self" => (at.clone(), &segs[1..]),
        "super" => {
            let ups = segs.iter().take_while(|s| *s == "super").count();
            let keep = at.len().checked_sub(ups)?;
            (at[..keep].to_vec(), &segs[ups..])
        }
        // A child module of the current one, named directly.
        name => {
            let mut child = at.clone();
            child.push(name.to_string());
            if !modules.contains(&child) {
                return None;
            }
            (at.clone(), segs)
        }
    };
    base.extend(rest.iter().cloned());
    Some(base)
}

impl Paths<'_> {
    fn add(&mut self, segs: Vec<String>) {
        if let Some(p) = resolve(self.modules, &self.at, &segs) {
            self.found.push(p);
        }
    }

    /// Every `a::b::c` (or lone name) in a macro call's tokens.
    fn tokens(&mut self, stream: proc_macro2::TokenStream) {
        use proc_macro2::TokenTree;
        let mut segs: Vec<String> = Vec::new();
        let mut colons = 0;
        for t in stream {
            match t {
                TokenTree::Ident(i) if colons == 2 || segs.is_empty() => {
                    segs.push(i.to_string());
                    colons = 0;
                    continue;
                }
                TokenTree::Punct(p) if p.as_char() == ':' && !segs.is_empty() && colons < 2 => {
                    colons += 1;
                    continue;
                }
                TokenTree::Group(g) => {
                    self.flush(&mut segs);
                    self.tokens(g.stream());
                }
                TokenTree::Ident(i) => {
                    self.flush(&mut segs);
                    segs.push(i.to_string());
                }
                _ => self.flush(&mut segs),
            }
            colons = 0;
        }
        self.flush(&mut segs);
    }

    fn flush(&mut self, segs: &mut Vec<String>) {
        if segs.len() > 1
            || segs
                .first()
                .is_some_and(|s| s != "self" && s != "super" && s != "crate")
        {
            self.add(std::mem::take(segs));
        }
        segs.clear();
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut segs = prefix.clone();
                if n.ident != "self" {
                    segs.push(n.ident.to_string());
                }
                self.add(segs);
            }
            syn::UseTree::Rename(r) => {
                let mut segs = prefix.clone();
                segs.push(r.ident.to_string());
                self.add(segs);
            }
            syn::UseTree::Glob(_) => self.add(prefix.clone()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Trait(t) => &t.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if is_test_attr(attrs) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            self.at.push(m.ident.to_string());
            syn::visit::visit_item_mod(self, m);
            self.at.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.add(segs);
        syn::visit::visit_path(self, p);
    }
}

/// The graphs of every folder of the crate whose sources are under `src`.
pub fn graphs(src: &Path) -> Graphs {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut sources = Vec::new();
    let mut parsed = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap().to_path_buf();
        // The binary's `main.rs` is another crate (it says `berth::`), and
        // would take `lib.rs`'s place as the root, whose re-exports count.
        if rel == Path::new("main.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", rel.display()));
        let module = module_of(&rel);
        parsed.insert(module.clone(), ast);
        sources.push(Source {
            rel: rel.to_string_lossy().into_owned(),
            module,
        });
    }
    let modules: BTreeSet<Module> = sources.iter().map(|s| s.module.clone()).collect();
    // Test-only modules: declared `#[cfg(test)]` by their parent, and below.
    let mut test_only: BTreeSet<Module> = BTreeSet::new();
    for (module, ast) in &parsed {
        for child in test_children(ast) {
            let mut m = module.clone();
            m.push(child);
            test_only.insert(m);
        }
    }
    let reexports = Reexports::read(
        parsed
            .iter()
            .filter(|(m, _)| !test_only.iter().any(|t| m.starts_with(t))),
        &modules,
    );
    let mut graphs = Graphs::new();
    for s in &sources {
        if s.module.is_empty() || test_only.iter().any(|t| s.module.starts_with(t)) {
            continue;
        }
        let mut v = Paths {
            modules: &modules,
            at: s.module.clone(),
            found: Vec::new(),
        };
        v.visit_file(&parsed[&s.module]);
        for p in v.found.into_iter().map(|p| reexports.follow(&modules, p)) {
            let common = s.module.iter().zip(&p).take_while(|(a, b)| a == b).count();
            if common >= s.module.len() || common >= p.len() {
                continue;
            }
            let target: Module = p[..=common].to_vec();
            if !modules.contains(&target) {
                continue;
            }
            let folder = p[..common].join("/");
            graphs
                .entry(folder)
                .or_default()
                .entry(s.module[common].clone())
                .or_default()
                .entry(p[common].clone())
                .or_default()
                .insert(s.rel.clone());
        }
    }
    graphs
}
