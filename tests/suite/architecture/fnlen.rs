//! No function of the crate's non-test code is longer than [`MAX_LINES`]:
//! a longer one is split into named steps. Lines are counted as the
//! review's scanner counts them (`rsscan.py src fnlen`), from the `fn`
//! line to its closing brace, nested functions inside, so the two agree:
//! comments and string and char literals are blanked first (a brace in
//! them does not count), `#[cfg(test)]` items and test modules' files are
//! left out. A text scan rather than syn: syn gives no line numbers
//! without the `span-locations` feature, which would rebuild its users.

use super::graph::rust_files;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use regex::Regex;

/// The longest a function may be, in lines.
const MAX_LINES: usize = 120;

/// `text` with comments and the contents of string and char literals
/// blanked; newlines kept, so that line numbers hold.
fn strip(text: &str) -> String {
    let t: Vec<char> = text.chars().collect();
    let n = t.len();
    let blank = |cs: &[char]| -> String { cs.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }).collect() };
    let word = |i: usize| i > 0 && (t[i - 1].is_alphanumeric() || t[i - 1] == '_');
    let at = |i: usize, s: &str| s.chars().enumerate().all(|(k, c)| t.get(i + k) == Some(&c));
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < n {
        let c = t[i];
        if at(i, "//") {
            let j = (i..n).find(|&j| t[j] == '\n').unwrap_or(n);
            out.push_str(&blank(&t[i..j]));
            i = j;
        } else if at(i, "/*") {
            let (mut depth, mut j) = (1, i + 2);
            while j < n && depth > 0 {
                if at(j, "/*") {
                    depth += 1;
                    j += 2;
                } else if at(j, "*/") {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            let j = j.min(n);
            out.push_str(&blank(&t[i..j]));
            i = j;
        } else if c == 'r' && !word(i) && raw_hashes(&t[i..]).is_some() {
            // r"…", r#"…"#: ends at the quote followed by as many hashes.
            let hashes = raw_hashes(&t[i..]).unwrap_or(0);
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let from = i + 2 + hashes;
            let end = (from..n)
                .find(|&j| t[j..].starts_with(&close))
                .map_or(n, |j| j + 1 + hashes);
            out.push_str("\"\"");
            out.push_str(&blank(&t[(i + 2).min(end)..end]));
            i = end;
        } else if c == 'b' && at(i, "b\"") && !word(i) {
            out.push('b');
            i += 1;
        } else if c == '"' {
            let mut j = i + 1;
            while j < n && t[j] != '"' {
                j += if t[j] == '\\' { 2 } else { 1 };
            }
            let inner = &t[(i + 1).min(n)..j.min(n)];
            out.push('"');
            out.push_str(&blank(inner));
            out.push('"');
            i = j + 1;
        } else if c == '\'' {
            match char_literal(&t[i..]) {
                Some(len) => {
                    out.push_str("' '");
                    out.push_str(&" ".repeat(len - 3));
                    i += len;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The hashes of a raw string opening `r#*"` at the start of `t`.
fn raw_hashes(t: &[char]) -> Option<usize> {
    let hashes = t.iter().skip(1).take_while(|&&c| c == '#').count();
    (t.first() == Some(&'r') && t.get(1 + hashes) == Some(&'"') && hashes + 2 <= 10).then_some(hashes)
}

/// The length of a char literal at the start of `t` (`'x'`, `'\n'`,
/// `'\u{1F600}'`), as the scanner's `'(\\.[^']*|[^\\'])'` matches it;
/// `None` for a lifetime.
fn char_literal(t: &[char]) -> Option<usize> {
    match t.get(1)? {
        '\\' => {
            if *t.get(2)? == '\n' {
                return None;
            }
            let close = (3..t.len()).find(|&j| t[j] == '\'')?;
            Some(close + 1)
        }
        '\'' => None,
        _ => (t.get(2) == Some(&'\'')).then_some(3),
    }
}

/// The index of the brace closing the one at `open` (the last byte if none).
fn match_brace(s: &[u8], open: usize) -> usize {
    let mut depth = 0i64;
    for (k, &b) in s.iter().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    s.len().saturating_sub(1)
}

fn cfg_test_mod() -> Regex {
    Regex::new(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*(\{|;)").unwrap()
}

/// Blank inline `#[cfg(test)] mod x { … }` blocks and `#[cfg(test)]` items.
fn mask_tests(stripped: &str) -> String {
    let item = Regex::new(
        r"#\[cfg\(test\)\]\s*(#\[[^\]]*\]\s*)*(pub(\([^)]*\))?\s+)?(async\s+)?(fn|impl|struct|enum|const|static|use)\b",
    )
    .unwrap();
    let mut s = stripped.as_bytes().to_vec();
    for (rx, is_mod) in [(cfg_test_mod(), true), (item, false)] {
        let text = String::from_utf8(s.clone()).unwrap();
        for m in rx.captures_iter(&text) {
            let whole = m.get(0).unwrap();
            if is_mod && &m[4] == ";" {
                continue;
            }
            let from = whole.end() - 1;
            let brace = text[from..].find('{').map(|k| k + from);
            let semi = text[from..].find(';').map(|k| k + from);
            let end = match (brace, semi) {
                (Some(k), Some(sc)) if !is_mod && sc < k => Some(sc),
                (None, sc) if !is_mod => sc,
                (Some(k), _) => Some(match_brace(text.as_bytes(), k)),
                (None, _) => Some(text.len() - 1),
            };
            let Some(end) = end else { continue };
            for b in &mut s[whole.start()..=end] {
                if *b != b'\n' {
                    *b = b' ';
                }
            }
        }
    }
    String::from_utf8(s).unwrap()
}

/// A function: its length in lines, file (relative to `src`'s parent), line, name.
pub type FnLen = (usize, String, usize, String);

/// Every function of the non-test code under `src`, with its length.
pub fn fn_lengths(src: &Path) -> Vec<FnLen> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let stripped: Vec<(PathBuf, String)> = files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, strip(&text))
        })
        .collect();
    // Files that are test modules: `#[cfg(test)] mod x;` in their parent.
    let mut test_mods = BTreeSet::new();
    for (p, s) in &stripped {
        let name = p.file_name().unwrap().to_string_lossy();
        let base = match name.as_ref() {
            "mod.rs" | "lib.rs" | "main.rs" => p.parent().unwrap().to_path_buf(),
            _ => p.with_extension(""),
        };
        for m in cfg_test_mod().captures_iter(s) {
            if &m[4] == ";" {
                test_mods.insert(base.join(&m[3]));
            }
        }
    }
    let fn_rx = Regex::new(r"\bfn\s+(\w+)").unwrap();
    let root = src.parent().unwrap_or(src);
    let mut found = Vec::new();
    for (p, s) in &stripped {
        let module = match p.file_name().is_some_and(|n| n == "mod.rs") {
            true => p.parent().unwrap().to_path_buf(),
            false => p.with_extension(""),
        };
        if test_mods.iter().any(|t| module.starts_with(t)) {
            continue;
        }
        let s = mask_tests(s);
        let b = s.as_bytes();
        let rel = p.strip_prefix(root).unwrap_or(p).display().to_string();
        for m in fn_rx.captures_iter(&s) {
            let whole = m.get(0).unwrap();
            let Some(open) = body_start(b, whole.end()) else {
                continue;
            };
            let end = match_brace(b, open);
            let first = b[..whole.start()].iter().filter(|&&c| c == b'\n').count() + 1;
            let last = b[..end].iter().filter(|&&c| c == b'\n').count() + 1;
            found.push((last - first + 1, rel.clone(), first, m[1].to_string()));
        }
    }
    found
}

/// Where a function's body opens: the first `{` after its signature
/// outside parentheses and brackets; `None` for a declaration (`;`).
fn body_start(s: &[u8], from: usize) -> Option<usize> {
    let mut depth = 0i64;
    for (k, &c) in s.iter().enumerate().skip(from) {
        match c {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            b';' if depth == 0 => return None,
            b'{' if depth == 0 => return Some(k),
            _ => {}
        }
    }
    None
}

/// The functions under `src` longer than [`MAX_LINES`], longest first,
/// each as `length  path:line  name`.
fn too_long(src: &Path) -> Vec<String> {
    let mut long: Vec<FnLen> = fn_lengths(src).into_iter().filter(|f| f.0 > MAX_LINES).collect();
    long.sort_by(|a, b| b.cmp(a));
    long.iter()
        .map(|(len, path, line, name)| format!("  {len:5}  {path}:{line}  {name}"))
        .collect()
}

#[test]
fn no_function_of_the_crate_is_over_120_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let all = fn_lengths(&src);
    assert!(
        all.len() > 1000,
        "the walk found the crate's functions: {}",
        all.len()
    );
    let long = too_long(&src);
    assert!(
        long.is_empty(),
        "functions over {MAX_LINES} lines (split each into named steps):\n{}",
        long.join("\n")
    );
}

/// A planted long function is named; one under `#[cfg(test)]`, one in a
/// test module's file, and braces in strings, chars and comments are not
/// counted.
#[test]
fn the_length_check_names_a_long_function_and_skips_tests() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    let body = |n: usize| "    let _ = 1;\n".repeat(n);
    let long = format!(
        "//! x\npub fn short() {{ let _ = \"}}\"; let _ = '{{'; }}\n\n/// y\npub fn long<'a>(x: &'a str) -> &'a str {{\n    // }}\n{}    x\n}}\n",
        body(117)
    );
    let tests = format!(
        "#[cfg(test)]\nmod tests {{\n    fn inline() {{\n{}    }}\n}}\n#[cfg(test)]\nmod more;\n",
        body(130)
    );
    std::fs::write(src.join("lib.rs"), "mod a;\n").unwrap();
    std::fs::write(src.join("a.rs"), format!("{long}{tests}")).unwrap();
    std::fs::write(
        src.join("a/more.rs"),
        format!("fn in_tests() {{\n{}}}\n", body(130)),
    )
    .unwrap();
    let found = too_long(&src);
    assert_eq!(found, vec!["    121  src/a.rs:5  long".to_string()], "{found:?}");
}
