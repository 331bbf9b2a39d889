//! Bash brace expansion of one word: comma lists (`s{u,x}do`) and sequence
//! expressions (`{a..p}`, `{1..10..2}`), over the whole word as the shell
//! does it, before quote removal. A word is a list of [`Piece`]s: characters
//! of its unquoted text are live (`{`, `,`, `}` and `..` mean something),
//! every other part (quoted text, `$x`, `$(…)`) is one fixed piece, so
//! `{,x}''{sudo,}` expands across the quotes (to `sudo`, ``, `xsudo`, `x`)
//! and a substitution inside a brace list is kept whole, to be evaluated
//! once however many words it ends up in.

use super::{MAX_BRACE_TEXT, MAX_BRACE_WORDS};

/// One piece of a word for brace expansion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    /// A character of unquoted text.
    Live(char),
    /// A part taken whole (its index in the word).
    Fixed(usize),
}

/// The words `pieces` expands to, or `None` when that is more than
/// [`MAX_BRACE_WORDS`] (or more work than that many words take).
pub fn expand(pieces: &[Piece]) -> Option<Vec<Vec<Piece>>> {
    if pieces.len() > MAX_BRACE_TEXT {
        return None;
    }
    // Each call produces at least one word or fails, so this bounds the work.
    let mut calls = 4 * MAX_BRACE_WORDS;
    expand_in(pieces, &mut calls)
}

/// Brace expansion of plain unquoted text.
pub fn braces(s: &str) -> Option<Vec<String>> {
    let pieces: Vec<Piece> = s.chars().map(Piece::Live).collect();
    Some(
        expand(&pieces)?
            .into_iter()
            .map(|w| {
                w.into_iter()
                    .map(|p| match p {
                        Piece::Live(c) => c,
                        Piece::Fixed(_) => '?',
                    })
                    .collect()
            })
            .collect(),
    )
}

/// The alternatives of the brace expression at `b[open..=close]`, if it is one.
enum Group {
    /// Split at these top-level commas.
    List(Vec<usize>),
    /// A sequence expression's words.
    Seq(Vec<String>),
}

fn expand_in(b: &[Piece], calls: &mut usize) -> Option<Vec<Vec<Piece>>> {
    *calls = calls.checked_sub(1)?;
    // One pass: the leftmost `{` whose matching `}` makes a valid expression.
    let mut stack: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut first: Option<(usize, usize, Group)> = None;
    for (j, p) in b.iter().enumerate() {
        match p {
            Piece::Live('{') => stack.push((j, Vec::new())),
            Piece::Live(',') => {
                if let Some(top) = stack.last_mut() {
                    top.1.push(j);
                }
            }
            Piece::Live('}') => {
                let Some((open, commas)) = stack.pop() else {
                    continue;
                };
                if first.as_ref().is_some_and(|f| f.0 < open) {
                    continue;
                }
                let group = if !commas.is_empty() {
                    Some(Group::List(commas))
                } else {
                    sequence(&b[open + 1..j]).map(Group::Seq)
                };
                if let Some(g) = group {
                    first = Some((open, j, g));
                }
            }
            _ => {}
        }
    }
    let Some((open, close, group)) = first else {
        return Some(vec![b.to_vec()]);
    };
    let (prefix, suffix) = (&b[..open], &b[close + 1..]);
    let items: Vec<Vec<Piece>> = match group {
        Group::List(commas) => {
            let mut bounds = vec![open];
            bounds.extend(&commas);
            bounds.push(close);
            bounds.windows(2).map(|w| b[w[0] + 1..w[1]].to_vec()).collect()
        }
        Group::Seq(words) => words
            .into_iter()
            .map(|w| w.chars().map(Piece::Live).collect())
            .collect(),
    };
    let mut out = Vec::new();
    for item in items {
        let mut word = prefix.to_vec();
        word.extend(item);
        word.extend_from_slice(suffix);
        for rest in expand_in(&word, calls)? {
            out.push(rest);
            if out.len() > MAX_BRACE_WORDS {
                return None;
            }
        }
    }
    Some(out)
}

/// The words of a sequence expression's inside (`a..p`, `1..10`, `10..1..3`,
/// `01..10`), if it is one. Too many words is `Some` of more than the cap,
/// which the caller refuses.
fn sequence(inner: &[Piece]) -> Option<Vec<String>> {
    let text: String = inner
        .iter()
        .map(|p| match p {
            Piece::Live(c) => Some(*c),
            Piece::Fixed(_) => None,
        })
        .collect::<Option<String>>()?;
    let parts: Vec<&str> = text.split("..").collect();
    let (a, z, step) = match parts.as_slice() {
        [a, z] => (*a, *z, 1i64),
        [a, z, s] => (*a, *z, s.parse::<i64>().ok()?.checked_abs()?.max(1)),
        _ => return None,
    };
    let cap = MAX_BRACE_WORDS as i64 + 1;
    if let (Ok(x), Ok(y)) = (a.parse::<i64>(), z.parse::<i64>()) {
        let width = if [a, z]
            .iter()
            .any(|s| s.trim_start_matches('-').starts_with('0') && s.len() > 1)
        {
            a.len().max(z.len())
        } else {
            0
        };
        let dir = if x <= y { 1 } else { -1 };
        let count = ((y - x).abs() / step + 1).min(cap);
        return Some(
            (0..count)
                .map(|k| format!("{:0width$}", x + dir * k * step))
                .collect(),
        );
    }
    let (mut ca, mut cz) = (a.chars(), z.chars());
    let (Some(x), None, Some(y), None) = (ca.next(), ca.next(), cz.next(), cz.next()) else {
        return None;
    };
    if !(x.is_ascii_alphabetic() && y.is_ascii_alphabetic()) {
        return None;
    }
    let (x, y) = (x as i64, y as i64);
    let dir = if x <= y { 1 } else { -1 };
    let count = ((y - x).abs() / step + 1).min(cap);
    Some(
        (0..count)
            .filter_map(|k| char::from_u32((x + dir * k * step) as u32))
            .map(String::from)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn comma_lists() {
        assert_eq!(braces("{sudo,id}").unwrap(), vec!["sudo", "id"]);
        assert_eq!(braces("s{u,x}do").unwrap(), vec!["sudo", "sxdo"]);
        assert_eq!(braces("{a,b}{c,d}").unwrap(), vec!["ac", "ad", "bc", "bd"]);
        assert_eq!(braces("{x}").unwrap(), vec!["{x}"]);
        assert_eq!(braces("a{b,{c,d}}").unwrap(), vec!["ab", "ac", "ad"]);
        assert!(braces(&"{a,b}".repeat(8)).is_none(), "2^8 words is too many");
    }

    #[test]
    fn sequences() {
        assert_eq!(braces("{a..d}").unwrap(), vec!["a", "b", "c", "d"]);
        assert_eq!(braces("{s..s}udo").unwrap(), vec!["sudo"]);
        assert_eq!(braces("{3..1}").unwrap(), vec!["3", "2", "1"]);
        assert_eq!(braces("{1..7..3}").unwrap(), vec!["1", "4", "7"]);
        assert_eq!(braces("{08..10}").unwrap(), vec!["08", "09", "10"]);
        assert_eq!(braces("{a..1}").unwrap(), vec!["{a..1}"], "not a sequence");
        assert!(braces("{1..1000}").is_none(), "too many words");
        assert_eq!(braces("{a..p}").unwrap().len(), 16);
    }

    #[test]
    fn fixed_pieces_pass_through_and_quotes_split_nothing() {
        use Piece::{Fixed, Live};
        // `{,x}''{sudo,}`: the quotes are one fixed piece.
        let mut w: Vec<Piece> = "{,x}".chars().map(Live).collect();
        w.push(Fixed(1));
        w.extend("{sudo,}".chars().map(Live));
        let words: Vec<String> = expand(&w)
            .unwrap()
            .into_iter()
            .map(|w| {
                w.iter()
                    .map(|p| match p {
                        Live(c) => c.to_string(),
                        Fixed(i) => format!("<{i}>"),
                    })
                    .collect()
            })
            .collect();
        assert_eq!(words, vec!["<1>sudo", "<1>", "x<1>sudo", "x<1>"]);
    }
}
