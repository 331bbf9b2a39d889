//! The manual's configuration reference (`docs/src/reference/config.md`),
//! generated from the key table: one row per `berth config` line, with its
//! default, its `BERTH_*` variable, whether a project file setting it
//! loosens the sandbox, and the row's own `///` doc.
//!
//! Generated rather than written because the table is the truth: a key
//! added to `keys.rs` or to the loosening table appears in the manual by
//! itself, and the unit test below fails when the committed page is older
//! than the code (`BERTH_BLESS=1 cargo test --lib config_reference`
//! rewrites it). `berth config --reference` prints the same page.

use super::keys::KEY_DOCS;
use super::table::env_name;
use super::{Config, loosen};

/// Defaults that depend on the machine, the engine or the caller (a path,
/// the host's CPUs, the images built, the caller's uid): said in words, so the page is the same on
/// every machine.
const MACHINE_DEFAULTS: &[(&str, &str)] = &[
    (
        "state_dir",
        "`$XDG_STATE_HOME/berth`, else `~/.local/state/berth`",
    ),
    (
        "workspace",
        "the `berth.toml` directory, else the current directory",
    ),
    (
        "user",
        "the caller's `uid:gid` (a root caller: the workspace's owner, or `65534:65534`)",
    ),
    ("cpus", "`2` (at most the host's CPUs)"),
    (
        "image",
        "unset: the devcontainer's image, else `berth/dev:latest` when the engine has it, else `berth/sandbox:latest`",
    ),
    ("safety.security_log", "`<state_dir>/<instance>/security.log`"),
];

/// The whole page, as committed.
pub fn reference_markdown() -> String {
    let defaults = Config::default();
    let mut out = String::from(HEADER);
    out.push_str("| key | default | env | a project file loosens | what it is |\n");
    out.push_str("|---|---|---|---|---|\n");
    for (name, key, value) in defaults.describe_rows() {
        let (env, doc) = key_env_doc(key);
        let default = MACHINE_DEFAULTS
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, d)| d.to_string())
            .unwrap_or_else(|| code_or_unset(&value));
        let loosens = loosen::loosening(name).unwrap_or("no");
        out.push_str(&format!(
            "| `{name}` | {} | {} | {} | {} |\n",
            cell(&default),
            env,
            cell(loosens),
            cell(&doc)
        ));
    }
    out
}

const HEADER: &str = "# Configuration reference

<!-- Generated from the key table (src/config/keys.rs, src/config/loosen.rs) by
`berth config --reference`; do not edit by hand:
`BERTH_BLESS=1 cargo test --lib config_reference` rewrites it. -->

Every key of `berth.toml` and of your own config, in `berth config`'s order.
*default* is the value with no file, variable or flag; *env* the variable
that sets it (the table of `[safety]` is only set in files); *a project file
loosens* whether a `berth.toml` setting it needs `berth trust` first (see
[Trust](../configuration.md#trust)).

";

/// The `BERTH_*` variable (`—` for a key with no reader) and the one-line
/// doc of the row that owns `key`.
fn key_env_doc(key: &str) -> (String, String) {
    let Some((_, reader, attrs)) = KEY_DOCS.iter().find(|(k, _, _)| *k == key) else {
        return ("—".into(), String::new());
    };
    let env = match *reader {
        "none" => "—".to_string(),
        _ => format!("`{}`", env_name(key)),
    };
    (env, doc_text(attrs))
}

/// The `///` lines of a row, joined into one line. A doc attribute reads
/// `doc = r" text"` (or `r#" … "# ` when the text holds a quote): the text
/// is what lies between the first and the last quote.
fn doc_text(attrs: &[&str]) -> String {
    let lines: Vec<&str> = attrs
        .iter()
        .filter(|a| a.trim_start().starts_with("doc"))
        .filter_map(|a| {
            let (start, end) = (a.find('"')?, a.rfind('"')?);
            (end > start).then(|| a[start + 1..end].trim())
        })
        .collect();
    lines.join(" ")
}

/// A default as `berth config` prints it, in code; an empty one is unset.
fn code_or_unset(value: &str) -> String {
    match value {
        "" => "unset".into(),
        v => format!("`{v}`"),
    }
}

/// Text fit for a table cell: a `|` would end it.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The committed page is what the key table generates now.
    #[test]
    fn config_reference_is_up_to_date() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/reference/config.md");
        if !path.parent().unwrap().exists() {
            // A packaged crate carries no manual (Cargo.toml's `include`).
            eprintln!("no {}: not a checkout, nothing to compare", path.display());
            return;
        }
        let now = reference_markdown();
        if std::env::var_os("BERTH_BLESS").is_some_and(|v| v == "1") {
            std::fs::write(&path, &now).unwrap();
            return;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == now,
            "{} is out of date with the key table: run `BERTH_BLESS=1 cargo test --lib config_reference` and commit it",
            path.display()
        );
    }

    /// Every key has a doc, and every key the loosening table names is a key.
    #[test]
    fn config_reference_has_every_key_with_a_doc() {
        let page = reference_markdown();
        for (key, _, attrs) in KEY_DOCS {
            assert!(
                !doc_text(attrs).is_empty(),
                "key `{key}` has no `///` doc in keys.rs"
            );
            assert!(
                page.contains(&format!("| `{key}")),
                "`{key}` is not in the reference"
            );
        }
        for key in ["runner", "max_children", "state_dir", "safety.allow_env"] {
            assert!(loosen::loosening(key).is_some(), "{key}");
        }
        assert_eq!(loosen::loosening("max_jobs"), None);
    }

    #[test]
    fn doc_text_reads_plain_and_raw_hash_strings() {
        let attrs = [
            r#"doc = r" Where jobs run: `auto`.""#,
            r##"doc = r#" with "quotes""#"##,
            "serde(default)",
        ];
        assert_eq!(doc_text(&attrs), r#"Where jobs run: `auto`. with "quotes""#);
    }
}
