//! Reading interpreter code just enough to find the commands it runs:
//! identifiers outside string literals, string literals (with their
//! escapes, and whether they interpolate), and the arguments of a call when
//! every one of them is a literal (or a list of literals). Anything else is
//! `None`: the caller treats the call as code the filter cannot read.

use crate::safety::expand::decode_escapes;

/// The languages read here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lang {
    Python,
    Perl,
    Ruby,
    Node,
    Php,
    Awk,
    Lua,
}

/// One argument of a call: a string, or a list of strings.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Arg {
    Str(String),
    List(Vec<String>),
}

/// A string literal at the start of `s`: its value and its length in
/// bytes. `Some((None, len))` for a literal whose value is computed
/// (interpolation, an f-string); `None` when `s` does not start with one.
pub(super) fn literal(s: &str, lang: Lang) -> Option<(Option<String>, usize)> {
    let (prefix, raw, fstring) = python_prefix(s, lang);
    let body = &s[prefix..];
    if matches!(lang, Lang::Perl | Lang::Ruby)
        && let Some(op) = quote_op(body)
    {
        return quote_op_literal(body, op);
    }
    let q = body
        .chars()
        .next()
        .filter(|c| *c == '\'' || *c == '"' || *c == '`')?;
    if q == '`' && lang != Lang::Node {
        return None;
    }
    let triple = lang == Lang::Python && body.starts_with(&q.to_string().repeat(3));
    let delim = if triple {
        q.to_string().repeat(3)
    } else {
        q.to_string()
    };
    let Some(end) = closing(body, &delim) else {
        return Some((None, body.len() + prefix));
    };
    let inner = &body[delim.len()..end.min(body.len())];
    let len = prefix + end + delim.len();
    let single = q == '\'';
    if interpolates(lang, q, fstring, inner) {
        return Some((None, len));
    }
    let value = if raw || (single && matches!(lang, Lang::Perl | Lang::Ruby | Lang::Php)) {
        inner.replace("\\'", "'").replace("\\\\", "\\")
    } else {
        decode_escapes(inner, true)
    };
    Some((Some(value), len))
}

/// Python's string prefix (`r`, `f`, `b`, `u`, up to two of them) at the
/// start of `s`: its length and whether it makes the literal raw or an
/// f-string. Nothing when no quote follows it (`rb` is then a name).
fn python_prefix(s: &str, lang: Lang) -> (usize, bool, bool) {
    if lang != Lang::Python {
        return (0, false, false);
    }
    let (mut prefix, mut raw, mut fstring) = (0, false, false);
    for c in s.chars().take(2) {
        match c.to_ascii_lowercase() {
            'r' => raw = true,
            'f' => fstring = true,
            'b' | 'u' => {}
            _ => break,
        }
        prefix += 1;
    }
    if s[prefix..].starts_with(['\'', '"']) {
        (prefix, raw, fstring)
    } else {
        (0, false, false)
    }
}

/// The quote operator at the start of `body`, when one is followed by its
/// opening delimiter: Perl's q(), qq{}, qw[], qx//; Ruby's %q(), %Q(),
/// %w(), %x(). Longer operators are tried first (`qq` before `q`).
fn quote_op(body: &str) -> Option<&'static str> {
    ["qq", "qw", "qx", "q", "%q", "%Q", "%w", "%x"]
        .into_iter()
        .find(|op| body.starts_with(op) && body[op.len()..].starts_with(|c: char| "({[</|!".contains(c)))
}

/// The literal of quote operator `op` at the start of `body`, up to the
/// first closing delimiter (nesting is not counted); `None` when it is
/// never closed.
fn quote_op_literal(body: &str, op: &str) -> Option<(Option<String>, usize)> {
    let open = body[op.len()..].chars().next()?;
    let close = match open {
        '(' => ')',
        '{' => '}',
        '[' => ']',
        '<' => '>',
        c => c,
    };
    let inner_start = op.len() + 1;
    let end = body[inner_start..].find(close)? + inner_start;
    let inner = &body[inner_start..end];
    let interpolates = !matches!(op, "q" | "qw" | "%q" | "%w") && inner.contains(['$', '@', '#']);
    Some(((!interpolates).then(|| inner.to_string()), end + 1))
}

/// Where the first unescaped `delim` after the opening one (which is as
/// long as `delim`) starts in `body`; `None` when the literal runs to the end.
fn closing(body: &str, delim: &str) -> Option<usize> {
    let bytes = body.as_bytes();
    let mut i = delim.len();
    loop {
        if i >= body.len() {
            return None;
        }
        if bytes[i] == b'\\' {
            // The escaped character is skipped whole: it may be several bytes.
            i += 1;
            i += body[i..].chars().next().map_or(1, char::len_utf8);
            continue;
        }
        if body[i..].starts_with(delim) {
            return Some(i);
        }
        i += body[i..].chars().next().map_or(1, char::len_utf8);
    }
}

/// Whether a literal quoted with `q` whose text is `inner` is computed at
/// run time (interpolation, an f-string with a field) in `lang`.
fn interpolates(lang: Lang, q: char, fstring: bool, inner: &str) -> bool {
    let single = q == '\'';
    match lang {
        Lang::Python => fstring && inner.contains('{'),
        Lang::Perl | Lang::Php => !single && inner.contains(['$', '@']),
        Lang::Ruby => !single && inner.contains("#{"),
        Lang::Node => q == '`' && inner.contains("${"),
        Lang::Awk | Lang::Lua => false,
    }
}

/// The arguments of a call whose name ends at `s` (`(…)`, or for Perl and
/// Ruby a list up to the end of the statement): literals and lists of
/// literals only. Keyword arguments (`shell=True`) are skipped, except one
/// naming another program (`executable=`). `None`: not all literal.
pub(super) fn call_args(s: &str, lang: Lang) -> Option<Vec<Arg>> {
    let t = s.trim_start();
    let paren = t.starts_with('(');
    let mut rest = if paren { &t[1..] } else { t };
    if !paren && !matches!(lang, Lang::Perl | Lang::Ruby) {
        return None;
    }
    let mut args = Vec::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() || (paren && rest.starts_with(')')) || (!paren && ends_statement(rest)) {
            return Some(args);
        }
        if lang == Lang::Python
            && let Some((name, after)) = keyword(rest)
        {
            if name == "executable" {
                return None;
            }
            rest = skip_expression(after);
        } else if rest.starts_with(['[', '(']) || (lang == Lang::Perl && rest.starts_with("qw")) {
            let (items, after) = list(rest, lang)?;
            args.push(Arg::List(items));
            rest = after;
        } else {
            let (value, len) = literal(rest, lang)?;
            args.push(Arg::Str(value?));
            rest = &rest[len..];
            // `'su' + 'do'`, `"su" . "do"`, awk's `"su" "do"`: computed.
            let next = rest.trim_start();
            if !(next.is_empty() || next.starts_with([',', ')']) || (!paren && ends_statement(next))) {
                return None;
            }
        }
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
        }
    }
}

/// `qw(a b)` or `[lit, lit]`/`(lit, lit)`: a list of literals.
fn list(s: &str, lang: Lang) -> Option<(Vec<String>, &str)> {
    if lang == Lang::Perl && s.starts_with("qw") {
        let (value, len) = literal(s, lang)?;
        return Some((value?.split_whitespace().map(str::to_string).collect(), &s[len..]));
    }
    let close = if s.starts_with('[') { ']' } else { ')' };
    let mut rest = &s[1..];
    let mut items = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix(close) {
            return Some((items, r));
        }
        let (value, len) = literal(rest, lang)?;
        items.push(value?);
        rest = rest[len..].trim_start();
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
        } else if !rest.starts_with(close) {
            return None;
        }
    }
}

/// `name=` (not `==`) at the start of `s`: a Python keyword argument.
fn keyword(s: &str) -> Option<(&str, &str)> {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
    let after = s[end..].trim_start();
    (end > 0 && after.starts_with('=') && !after.starts_with("==")).then(|| (&s[..end], &after[1..]))
}

/// Skip one expression up to a top-level `,` or `)`.
pub(super) fn skip_expression(s: &str) -> &str {
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth == 0 => return &s[i..],
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => return &s[i..],
            _ => {}
        }
    }
    ""
}

/// The end of a Perl or Ruby statement (for calls without parentheses).
fn ends_statement(s: &str) -> bool {
    s.starts_with([';', '}', '\n'])
        || s.starts_with("or ")
        || s.starts_with("and ")
        || s.starts_with("||")
        || s.starts_with("&&")
        || s.starts_with("if ")
        || s.starts_with("unless ")
}

/// Identifiers in `code` outside string literals and comments, with the
/// byte offset just after each; and backtick (or `qx`/`%x`) literals, which
/// run commands, as `("`", offset)`.
pub(super) fn identifiers(code: &str, lang: Lang) -> Vec<(usize, usize)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'#' && matches!(lang, Lang::Python | Lang::Perl | Lang::Ruby | Lang::Awk) {
            // A comment (Ruby's `#{` only occurs inside strings).
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'\'' || c == b'"' || (c == b'`' && lang == Lang::Node) {
            match literal(&code[i..], lang) {
                Some((_, len)) => i += len.max(1),
                None => i += 1,
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((start, i));
            continue;
        }
        i += 1;
    }
    out
}

/// `items` as one shell line, each quoted as a single word.
pub(super) fn quoted(items: &[String]) -> String {
    items
        .iter()
        .map(|s| format!("'{}'", s.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_their_values() {
        assert_eq!(literal("'su' + 'do'", Lang::Python), Some((Some("su".into()), 4)));
        assert_eq!(literal(r"'\x73udo'", Lang::Python).unwrap().0.unwrap(), "sudo");
        assert_eq!(literal("f'{x}'", Lang::Python).unwrap().0, None);
        assert_eq!(literal("\"$x\"", Lang::Perl).unwrap().0, None);
        assert_eq!(literal("qx{sudo id}", Lang::Perl).unwrap().0.unwrap(), "sudo id");
        assert_eq!(literal("`sudo ${x}`", Lang::Node).unwrap().0, None);
    }

    #[test]
    fn calls_with_literal_arguments_only() {
        assert_eq!(
            call_args("(['sudo', 'id'], check=True)", Lang::Python),
            Some(vec![Arg::List(vec!["sudo".into(), "id".into()])])
        );
        assert_eq!(call_args("('su' + 'do id')", Lang::Python), None);
        assert_eq!(call_args("(cmd)", Lang::Python), None);
        assert_eq!(call_args("('x', executable='/bin/sh')", Lang::Python), None);
        assert_eq!(
            call_args(" \"sudo\", \"id\";", Lang::Perl),
            Some(vec![Arg::Str("sudo".into()), Arg::Str("id".into())])
        );
        assert_eq!(call_args("(\"su\" \"do id\")", Lang::Awk), None);
    }
}
