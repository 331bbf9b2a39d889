//! What a project Dockerfile asks the engine to fetch by itself: `ADD` of a
//! URL. The classic builder downloads such a source in the engine's own
//! network namespace, the host's, before any `RUN` and outside every
//! network the build is given: `127.0.0.1`, the LAN and the whole internet
//! are in reach, past the project's egress policy. Since the Dockerfile is
//! the agent's to write (only `berth.toml` is trusted), berth refuses such
//! a build before it starts unless the user's own config allows it
//! (`build_add_urls`), naming the line.
//!
//! Read as the builder reads it: instructions without regard to case, line
//! continuations with the file's escape character (`# escape=` included),
//! comment lines inside a continued instruction skipped, flags
//! (`--checksum=…`, `--chown=…`) before the sources, the JSON form, and
//! each source word unquoted and unescaped as the builder's word expansion
//! does. A source holding a variable (`$URL`, `${URL}`) is refused too: its
//! value is not known before the build (a build arg may name a URL).
//! `ONBUILD ADD` counts as well (a later build `FROM` this image runs it).

/// An `ADD` that would fetch: its line (1-based) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    pub line: usize,
    /// The instruction as written (continuations joined), cut to 200 characters.
    pub instruction: String,
}

/// The first `ADD` of `text` that fetches a URL (or may: a variable).
pub fn first_fetch(text: &[u8]) -> Option<Fetch> {
    let text = String::from_utf8_lossy(text);
    let escape = escape_char(&text);
    instructions(&text, escape)
        .into_iter()
        .find_map(|(line, joined)| {
            let (mut word, mut rest) = first_word(&joined);
            if word.eq_ignore_ascii_case("ONBUILD") {
                (word, rest) = first_word(rest);
            }
            (word.eq_ignore_ascii_case("ADD") && fetches(rest, escape)).then(|| Fetch {
                line,
                instruction: joined.trim().chars().take(200).collect(),
            })
        })
}

/// The first word of `s` and what follows it.
fn first_word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    }
}

/// The escape character a leading `# escape=` directive sets (`\` else).
fn escape_char(text: &str) -> char {
    for line in text.lines() {
        let t = line.trim();
        let Some(directive) = t.strip_prefix('#') else {
            // Directives are only at the very top.
            break;
        };
        let Some((key, value)) = directive.split_once('=') else {
            break;
        };
        if key.trim().eq_ignore_ascii_case("escape") {
            return match value.trim() {
                "`" => '`',
                _ => '\\',
            };
        }
    }
    '\\'
}

/// Instructions with their first line: continued lines joined, comment and
/// empty lines inside a continuation skipped.
fn instructions(text: &str, escape: char) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (n, raw) in text.lines().enumerate() {
        let trimmed = raw.trim_start();
        let continuing = current.is_some();
        if trimmed.starts_with('#') || (continuing && trimmed.trim().is_empty()) {
            continue;
        }
        let body = raw.trim_end();
        let (part, more) = match body.strip_suffix(escape) {
            Some(p) => (p, true),
            None => (body, false),
        };
        let (line, mut joined) = current.take().unwrap_or((n + 1, String::new()));
        joined.push_str(part);
        joined.push(' ');
        match more {
            true => current = Some((line, joined)),
            false if !joined.trim().is_empty() => out.push((line, joined)),
            false => {}
        }
    }
    out.extend(current);
    out
}

/// Whether `ADD`'s arguments `rest` name a URL (or a variable) as a source.
fn fetches(rest: &str, escape: char) -> bool {
    let mut words: Vec<&str> = rest.split_whitespace().collect();
    // Flags come first: `--checksum=sha256:…`, `--chown=…`, `--link`.
    while words.first().is_some_and(|w| w.starts_with("--")) {
        words.remove(0);
    }
    let args = words.join(" ");
    let sources: Vec<(String, bool)> = match serde_json::from_str::<Vec<String>>(args.trim()) {
        // The JSON form: the builder still expands variables in it.
        Ok(list) => list.into_iter().map(|w| (w.clone(), w.contains('$'))).collect(),
        Err(_) => words.iter().map(|w| unquote(w, escape)).collect(),
    };
    let Some((_dest, sources)) = sources.split_last() else {
        return false;
    };
    sources.iter().any(|(word, variable)| {
        let w = word.to_ascii_lowercase();
        *variable || w.contains("://") || w.starts_with("git@")
    })
}

/// A word as the builder's expansion reads it: quotes removed, escaped
/// characters kept as themselves; and whether it holds a variable.
fn unquote(word: &str, escape: char) -> (String, bool) {
    let (mut out, mut variable) = (String::new(), false);
    let mut chars = word.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (Some('\''), _) => out.push(c),
            (_, c) if c == escape => out.extend(chars.next()),
            (_, '$') => {
                variable = true;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    (out, variable)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Option<usize> {
        first_fetch(text.as_bytes()).map(|f| f.line)
    }

    #[test]
    fn urls_in_add_are_found_however_written() {
        assert_eq!(line("FROM x\nADD http://127.0.0.1:8/x /x\n"), Some(2));
        assert_eq!(line("FROM x\n  add HTTPS://[::1]/x /x\n"), Some(2));
        assert_eq!(
            line("FROM x\nADD --checksum=sha256:00 https://e.x/a /a\n"),
            Some(2)
        );
        assert_eq!(
            line("FROM x\nADD --chown=1:1 local http://10.0.0.1/y /d/\n"),
            Some(2)
        );
        assert_eq!(line("FROM x\nADD [\"http://h/x\", \"/x\"]\n"), Some(2));
        assert_eq!(
            line("FROM x\nADD \\\n  # a comment\n\n  http://h/x \\\n  /x\n"),
            Some(2)
        );
        assert_eq!(line("# escape=`\nFROM x\nADD `\n http://h/x /x\n"), Some(3));
        assert_eq!(
            line("FROM x\nADD h\\ttp://h/x /x\n"),
            Some(2),
            "an escape inside the word"
        );
        assert_eq!(line("FROM x\nADD \"http://h/x\" /x\n"), Some(2));
        assert_eq!(line("FROM x\nADD 'ht'tp://h/x /x\n"), Some(2));
        assert_eq!(
            line("FROM x\nARG U=http://h/x\nADD $U /x\n"),
            Some(3),
            "a variable"
        );
        assert_eq!(line("FROM x\nADD [\"${U}\", \"/x\"]\n"), Some(2));
        assert_eq!(line("FROM x\nADD git@github.com:a/b.git /src\n"), Some(2));
        assert_eq!(line("FROM x\nADD git://h/r.git /src\n"), Some(2));
        assert_eq!(line("FROM x\nONBUILD ADD http://h/x /x\n"), Some(2));
        assert_eq!(line("FROM x\nonbuild add http://h/x /x\n"), Some(2));
    }

    #[test]
    fn local_sources_and_other_instructions_pass() {
        assert_eq!(line("FROM x\nADD app.tar.gz /opt/\nCOPY . /src\n"), None);
        assert_eq!(
            line("FROM x\nADD a b /dest/$HOME/\n"),
            None,
            "the destination may hold a variable"
        );
        assert_eq!(line("FROM x\nRUN echo ADD http://h/x /x\n"), None);
        assert_eq!(line("FROM x\n# ADD http://h/x /x\n"), None);
        assert_eq!(line("FROM x\nLABEL url=http://h/x\n"), None);
        assert_eq!(line("FROM x\nADD\n"), None);
    }
}
