//! Re-exports followed to the module that defines the item. A `pub use`
//! (any visibility but private) in `lib.rs` or in any module makes a name
//! that stands for a path elsewhere: `crate::Manager` is `lib.rs`'s
//! `pub use manager::Manager`, so it is a use of `manager`, not of the crate
//! root; `crate::model::JobInfo` is `model::status::JobInfo` when
//! `model/mod.rs` says `pub use status::JobInfo`. Without following them a
//! ring closed through a re-export passes unseen. A glob re-export
//! (`pub use a::*`) is followed for the names `a` defines or re-exports.
//! Re-exports under `#[cfg(test)]` and in test modules are left out, as the
//! graph leaves tests out.

use std::collections::{BTreeMap, BTreeSet};

use super::graph::{Module, is_test_attr, resolve};

/// What every module re-exports, and the names it defines (for globs).
#[derive(Default)]
pub(super) struct Reexports {
    /// (module, name it re-exports) → the path the name stands for.
    names: BTreeMap<(Module, String), Module>,
    /// module → the modules it re-exports whole (`pub use a::*`).
    globs: BTreeMap<Module, Vec<Module>>,
    /// module → the names of the items it defines at its top level.
    items: BTreeMap<Module, BTreeSet<String>>,
}

/// The name a top-level item defines, if it defines one.
fn item_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Mod(i) => &i.ident,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        _ => return None,
    };
    Some(ident.to_string())
}

impl Reexports {
    /// Read the top-level items of every (non-test) file.
    pub(super) fn read<'a>(
        files: impl Iterator<Item = (&'a Module, &'a syn::File)>,
        modules: &BTreeSet<Module>,
    ) -> Self {
        let mut r = Self::default();
        for (module, file) in files {
            for item in &file.items {
                match item {
                    syn::Item::Use(u)
                        if !matches!(u.vis, syn::Visibility::Inherited) && !is_test_attr(&u.attrs) =>
                    {
                        r.tree(modules, module, &mut Vec::new(), &u.tree);
                    }
                    other => {
                        if let Some(name) = item_name(other) {
                            r.items.entry(module.clone()).or_default().insert(name);
                        }
                    }
                }
            }
        }
        r
    }

    /// Record the names one `pub use` tree of `module` makes.
    fn tree(
        &mut self,
        modules: &BTreeSet<Module>,
        module: &Module,
        prefix: &mut Vec<String>,
        tree: &syn::UseTree,
    ) {
        let (name, segs) = match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.tree(modules, module, prefix, &p.tree);
                prefix.pop();
                return;
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.tree(modules, module, prefix, t);
                }
                return;
            }
            syn::UseTree::Glob(_) => {
                if let Some(target) = resolve(modules, module, prefix) {
                    self.globs.entry(module.clone()).or_default().push(target);
                }
                return;
            }
            // `pub use a::{self}` names `a` itself.
            syn::UseTree::Name(n) if n.ident == "self" => (prefix.last().cloned(), prefix.clone()),
            syn::UseTree::Name(n) => (
                Some(n.ident.to_string()),
                [prefix.as_slice(), &[n.ident.to_string()]].concat(),
            ),
            syn::UseTree::Rename(r) => (
                Some(r.rename.to_string()),
                [prefix.as_slice(), &[r.ident.to_string()]].concat(),
            ),
        };
        // `pub use a::Trait as _` makes no name to reach it by.
        if let (Some(name), Some(target)) = (name.filter(|n| n != "_"), resolve(modules, module, &segs)) {
            self.names.insert((module.clone(), name), target);
        }
    }

    /// `path` (from the crate root) with every re-export along it followed
    /// to the item's home, however many modules pass it on.
    pub(super) fn follow(&self, modules: &BTreeSet<Module>, mut path: Module) -> Module {
        // A bound, not a proof: rustc refuses re-export rings, but a name
        // this reading gets wrong must not hang the test.
        for _ in 0..32 {
            match self.step(modules, &path) {
                Some(next) => path = next,
                None => break,
            }
        }
        path
    }

    /// One re-export followed: the first name along `path` that is not a
    /// module, if its module re-exports it (by name, or through a glob).
    fn step(&self, modules: &BTreeSet<Module>, path: &[String]) -> Option<Module> {
        let k = (0..path.len()).find(|&k| !modules.contains(&path[..=k]))?;
        // `path[..k]` is a module (the root `[]` is `lib.rs`).
        let (head, name) = (&path[..k], &path[k]);
        if let Some(target) = self.names.get(&(head.to_vec(), name.clone())) {
            return Some([target.as_slice(), &path[k + 1..]].concat());
        }
        let from = self.globs.get(head)?.iter().find(|g| self.defines(g, name))?;
        Some([from.as_slice(), &path[k..]].concat())
    }

    /// Whether `module` has `name`, defined or re-exported.
    fn defines(&self, module: &Module, name: &str) -> bool {
        self.items.get(module).is_some_and(|i| i.contains(name))
            || self.names.contains_key(&(module.clone(), name.to_string()))
    }
}
