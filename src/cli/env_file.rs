//! `--env-file FILE` for `berth run`, read as `docker run --env-file` reads
//! it: one `KEY=VALUE` a line, the value taken literally (quotes included);
//! `KEY` alone takes this shell's value; blank lines and `#` comments are
//! skipped; an `export ` before the key is allowed (many `.env` files have
//! it). A line that is none of these is refused with the file and line
//! number, never its content (it may hold a secret), and nothing starts.

use std::path::Path;

use crate::error::Error;

/// Largest env file read (real ones are a few KiB).
const MAX_BYTES: u64 = 1 << 20;

/// The variables of `path`, in file order.
pub fn read(path: &Path) -> Result<Vec<(String, String)>, Error> {
    let too_big = std::fs::metadata(path)
        .map_err(|e| Error::io("read env file", path, e))?
        .len()
        > MAX_BYTES;
    if too_big {
        return Err(bad(path, 0, "larger than 1 MiB"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| Error::io("read env file", path, e))?;
    parse(&text, |k| std::env::var(k).ok()).map_err(|(n, why)| bad(path, n, why))
}

fn bad(path: &Path, line: usize, why: &str) -> Error {
    Error::InvalidValue {
        what: "env file",
        input: match line {
            0 => path.display().to_string(),
            n => format!("{}:{n}", path.display()),
        },
        message: why.into(),
    }
}

/// The variables of an env file's `text`; `Err((line, why))` for the first
/// line that is not one.
fn parse(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, (usize, &'static str)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let trimmed = trimmed.strip_prefix("export ").unwrap_or(trimmed);
        let (key, value) = match trimmed.split_once('=') {
            Some((k, v)) => (k.trim_end(), Some(v)),
            None => (trimmed.trim_end(), None),
        };
        let valid = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err((n, "expected KEY=VALUE, or KEY set in this environment"));
        }
        let value = match value {
            Some(v) => v.to_string(),
            None => lookup(key).ok_or((n, "KEY without a value is not set in this environment"))?,
        };
        out.push((key.to_string(), value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_as_docker_reads_them() {
        let text = "# comment\n\nA=1\nexport B=two words\nC=\"quoted\"\nD=x=y\nHOME_FROM_SHELL\n";
        let vars = parse(text, |k| (k == "HOME_FROM_SHELL").then(|| "/h".to_string())).unwrap();
        let want = [
            ("A", "1"),
            ("B", "two words"),
            ("C", "\"quoted\""),
            ("D", "x=y"),
            ("HOME_FROM_SHELL", "/h"),
        ];
        assert_eq!(vars, want.map(|(k, v)| (k.to_string(), v.to_string())));
    }

    #[test]
    fn a_bad_line_is_refused_by_its_number_without_its_content() {
        assert_eq!(parse("A=1\n1BAD=secret\n", |_| None).unwrap_err().0, 2);
        assert_eq!(parse("UNSET_HERE\n", |_| None).unwrap_err().0, 1);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join(".env");
        std::fs::write(&f, "OK=1\nnot a line: hunter2\n").unwrap();
        let msg = read(&f).unwrap_err().to_string();
        assert!(msg.contains(".env:2") && !msg.contains("hunter2"), "{msg}");
    }
}
