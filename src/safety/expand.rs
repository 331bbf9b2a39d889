//! The cheap, side-effect-free evaluations the normaliser uses to see what a
//! word becomes: brace expansion (`{su,}do`), lexical path clean-up (`/bin/..`
//! is `/`), and the few producers and filters worth evaluating inside a
//! command substitution (`echo`, `printf`, `base64 -d`, `rev`), with the
//! backslash escapes they (and `$'…'`) understand. Anything more is left
//! undecided, and an undecided command name is blocked by the filter.

/// Most words a brace expansion may produce before it counts as undecidable.
pub const MAX_BRACE_WORDS: usize = 64;

/// Longest unquoted text brace expansion is tried on; longer is undecidable.
pub const MAX_BRACE_TEXT: usize = 4096;

pub mod braces;
pub mod glob;

pub use braces::braces;
pub use glob::{ENGINE_SOCKETS, engine_socket_glob, glob_matches};

/// Lexical clean-up of a path argument: `//`, `/./` and `..` resolved without
/// touching the file system, `$HOME`'s value shown as `~`, `~root` as
/// `/root` and another user's home as `~name`. Other text is returned
/// unchanged.
pub fn clean_path(s: &str, home: Option<&str>) -> String {
    if let Some(rest) = s.strip_prefix("~root")
        && (rest.is_empty() || rest.starts_with('/'))
    {
        return clean_path(&format!("/root{rest}"), home);
    }
    let home = home.filter(|h| h.len() > 1).map(|h| h.trim_end_matches('/'));
    // `~` is the home directory: cleaned as the absolute path it is, so
    // `~/..` climbs out of it.
    if let (Some(h), Some(rest)) = (home, s.strip_prefix('~'))
        && (rest.is_empty() || rest.starts_with('/'))
    {
        return clean_path(&format!("{h}{rest}"), Some(h));
    }
    let user_home = s
        .strip_prefix('~')
        .map(|r| r.find('/').map_or(r.len(), |i| i) + 1);
    let (root, rest) = if let Some(r) = s.strip_prefix('/') {
        ("/", r)
    } else if let Some(end) = user_home.filter(|&e| is_user(&s[1..e])) {
        (&s[..end], &s[end..])
    } else {
        return s.to_string();
    };
    let mut parts: Vec<&str> = Vec::new();
    for p in rest.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let clean = match (root, parts.is_empty()) {
        (r, true) => r.to_string(),
        ("/", false) => format!("/{}", parts.join("/")),
        (r, false) => format!("{r}/{}", parts.join("/")),
    };
    // `$HOME`'s value is shown as `~`, so rules see one form.
    match home.and_then(|h| clean.strip_prefix(h)) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("~{rest}"),
        _ => clean,
    }
}

/// A user name as `~name` may spell it (empty: the caller's own home).
fn is_user(name: &str) -> bool {
    name.chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c))
}

/// `clean_path` of an argument, or of the value of a `KEY=path` or
/// `--option=path` argument (`of=/dev//sda`).
pub fn clean_arg(s: &str, home: Option<&str>) -> String {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() && (v.starts_with('/') || v.starts_with('~')) && !k.contains('/') => {
            format!("{k}={}", clean_path(v, home))
        }
        _ => clean_path(s, home),
    }
}

/// Standard base64 (whitespace ignored); `None` if it is not base64.
pub fn base64_decode(s: &str) -> Option<String> {
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for c in s.chars().filter(|c| !c.is_whitespace()) {
        let v = match c {
            'A'..='Z' => c as u32 - 'A' as u32,
            'a'..='z' => c as u32 - 'a' as u32 + 26,
            '0'..='9' => c as u32 - '0' as u32 + 52,
            '+' | '-' => 62,
            '/' | '_' => 63,
            '=' => break,
            _ => return None,
        };
        bits = (bits << 6) | v;
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
            bits &= (1 << n) - 1;
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// What `echo ARGS` prints. Escapes are decoded: dash's and busybox's echo
/// do so without `-e`, and seeing too much is the safe side here.
pub fn echo(args: &[String]) -> String {
    let mut newline = true;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let flag = a.len() > 1 && a.starts_with('-') && a[1..].chars().all(|c| "neE".contains(c));
        if !flag {
            break;
        }
        newline &= !a.contains('n');
        i += 1;
    }
    let mut out = decode_escapes(&args[i..].join(" "), false);
    if newline {
        out.push('\n');
    }
    out
}

/// What `printf FORMAT ARGS` prints, for `%s`, `%b`, `%c` and `%%` only.
pub fn printf(args: &[String]) -> Option<String> {
    let mut args = args.iter();
    let mut format = args.next()?;
    if format == "--" {
        format = args.next()?;
    }
    let format = decode_escapes(format, true);
    let mut args = args.peekable();
    let mut out = String::new();
    // The format is used again while arguments are left, as printf does:
    // `printf %s s udo` prints `sudo`.
    loop {
        let mut used = false;
        let mut chars = format.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            let conversion = chars.next()?;
            if conversion == '%' {
                out.push('%');
                continue;
            }
            used = true;
            let arg = args.next().cloned().unwrap_or_default();
            match conversion {
                's' => out.push_str(&arg),
                'b' => out.push_str(&decode_escapes(&arg, false)),
                'c' => out.extend(arg.chars().next()),
                _ => return None,
            }
        }
        if !used || args.peek().is_none() || out.len() > MAX_PRINTF {
            return Some(out);
        }
    }
}

/// Longest output of one `printf` the filter renders (the format repeats
/// per argument, so output can be far longer than the line).
const MAX_PRINTF: usize = 4096;

/// One filter stage of a substitution pipeline applied to `input`.
pub fn filter(program: &str, args: &[String], input: &str) -> Option<String> {
    match program {
        "base64" if args.iter().any(|a| a == "-d" || a == "--decode" || a == "-D") => base64_decode(input),
        "rev" if args.is_empty() => Some(
            input
                .lines()
                .map(|l| l.chars().rev().collect::<String>() + "\n")
                .collect(),
        ),
        "cat" if args.is_empty() => Some(input.to_string()),
        _ => None,
    }
}

/// Backslash escapes as `printf`/`echo -e`/`$'…'` read them: `\n`, `\t`,
/// `\\`, `\'`, `\"`, `\xHH`, `\uHHHH`, and octal: `\NNN` when `ansi`
/// (`$'…'`, printf's format), `\0NNN` otherwise (`echo`, `%b`). Anything
/// else keeps its backslash.
pub fn decode_escapes(raw: &str, ansi: bool) -> String {
    let c: Vec<char> = raw.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let radix_run = |i: &mut usize, radix: u32, max: usize| -> Option<u32> {
        let start = *i;
        let mut v = 0u32;
        while *i < c.len() && *i - start < max && c[*i].is_digit(radix) {
            v = v * radix + c[*i].to_digit(radix).unwrap_or(0);
            *i += 1;
        }
        (*i > start).then_some(v)
    };
    while i < c.len() {
        if c[i] != '\\' || i + 1 == c.len() {
            out.push(c[i]);
            i += 1;
            continue;
        }
        i += 2;
        let simple = match c[i - 1] {
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            'a' => Some('\u{7}'),
            'b' => Some('\u{8}'),
            'e' | 'E' => Some('\u{1b}'),
            'f' => Some('\u{c}'),
            'v' => Some('\u{b}'),
            '\\' => Some('\\'),
            '\'' => Some('\''),
            '"' => Some('"'),
            '?' => Some('?'),
            _ => None,
        };
        if let Some(ch) = simple {
            out.push(ch);
            continue;
        }
        let code = match c[i - 1] {
            'x' => radix_run(&mut i, 16, 2),
            'u' => radix_run(&mut i, 16, 4),
            'U' => radix_run(&mut i, 16, 8),
            '0'..='7' => {
                i -= 1;
                // `echo -e` writes octal as `\0NNN`; `$'…'` and printf as `\NNN`.
                if !ansi && c[i] == '0' {
                    i += 1;
                }
                radix_run(&mut i, 8, 3).or(Some(0))
            }
            _ => None,
        };
        match code.and_then(char::from_u32) {
            Some(ch) => out.push(ch),
            None => {
                out.push('\\');
                out.push(c[i - 1]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn paths_are_cleaned() {
        for (raw, clean) in [
            ("/", "/"),
            ("//", "/"),
            ("/./", "/"),
            ("/bin/..", "/"),
            ("/*", "/*"),
            ("~/", "~"),
            ("~/./x/../*", "~/*"),
            ("/home/me/", "~"),
            ("/home/me/src", "~/src"),
            ("/home/mer", "/home/mer"),
            ("rel/../x", "rel/../x"),
            ("~root", "/root"),
            ("~root/..", "/"),
            ("~bob/", "~bob"),
            ("~bob/../..", "~bob"),
            ("~+", "~+"),
        ] {
            assert_eq!(clean_path(raw, Some("/home/me")), clean, "{raw}");
        }
        assert_eq!(clean_arg("of=/dev//sda", None), "of=/dev/sda");
        assert_eq!(clean_arg("--output=/etc/./passwd", None), "--output=/etc/passwd");
        assert_eq!(clean_arg("a=b/../c", None), "a=b/../c");
    }

    #[test]
    fn producers_and_filters() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(echo(&s(&["-n", "su"])), "su");
        assert_eq!(echo(&s(&["a", "b"])), "a b\n");
        assert_eq!(printf(&s(&[r"\163\165%s", "do"])).unwrap(), "sudo");
        assert_eq!(printf(&s(&[r"\x73udo"])).unwrap(), "sudo");
        assert_eq!(printf(&s(&["%d", "3"])), None);
        assert_eq!(base64_decode("c3VkbyBpZA==").unwrap(), "sudo id");
        assert_eq!(filter("rev", &[], "odus\n").unwrap(), "sudo\n");
        assert_eq!(base64_decode("not base64!"), None);
    }
}
