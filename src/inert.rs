//! Job-controlled text made inert on its way to a person or a model.
//!
//! A job writes whatever bytes it likes, and its labels, commands and kill
//! reasons come from whoever started it. Shown raw, that text drives the
//! reader's terminal: OSC 52 sets the clipboard (`rm -rf ~/*` pasted
//! later), OSC 0 the window title, `ESC [2J` clears the screen, a bare CR
//! overwrites what was just printed, and bidi overrides (U+202E …) make a
//! line read differently from what it holds. Every human-facing face (the
//! CLI's `logs` to a terminal, `status`, `ps`, `events`, cards, the TUI) and
//! every MCP answer passes such text through this module, which shows those
//! characters as escapes instead (`\x1b`, `\r`, `\u202e`). The API and
//! `logs --raw` keep the bytes exact: they are for programs.
//!
//! What is escaped: C0 controls but the tab (NUL, ESC, CR, BEL, backspace
//! …), DEL, the C1 controls (U+0080–U+009F, which some terminals obey as
//! ESC sequences), and the bidi embeddings, overrides and isolates
//! (U+202A–U+202E, U+2066–U+2069). A newline is kept where the text is
//! several lines ([`visible_lines`]) and escaped where it is one
//! ([`visible`]). A backslash is not doubled: the escapes are for reading,
//! not for decoding back.

use std::borrow::Cow;
use std::fmt::Write;

/// True for a character that would act on a terminal (or hide what a line
/// says) rather than show: see the module doc.
pub fn is_active(c: char) -> bool {
    matches!(
        c,
        '\0'..='\x08'
            | '\n'..='\x1f'
            | '\x7f'
            | '\u{80}'..='\u{9f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            // A job's byte that is not UTF-8 (`model/exact.rs`).
            | '\u{10FF00}'..='\u{10FFFF}'
    )
}

/// `text` as one line with every active character (newlines included)
/// shown as an escape. Borrowed when there is nothing to escape.
pub fn visible(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// `text` with its newlines kept and every other active character shown
/// as an escape: for answers of several lines (MCP, error messages).
pub fn visible_lines(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

fn escape(text: &str, keep_newlines: bool) -> Cow<'_, str> {
    let acts = |c: char| is_active(c) && !(keep_newlines && c == '\n');
    let Some(first) = text.find(acts) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        if acts(c) {
            push_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The escape a reader sees for `c`: `\n`, `\r`, `\x1b`, `\u202e`.
fn push_escape(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        c if let Some(b) = crate::model::exact::escaped_byte(c) => {
            let _ = write!(out, "\\x{b:02x}");
        }
        c if c.is_ascii() => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
    }
}

/// Text for a cell of the terminal panel (the TUI): escape sequences are
/// dropped whole (a coloured log line reads as its words), tabs become
/// spaces to the next stop of 8 (so the cell's width is what ratatui
/// thinks), and any other active character is shown as an escape, as
/// everywhere else.
pub fn for_cell(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut col = 0usize;
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => match chars.peek() {
                // CSI: parameters and intermediates up to a final byte @..~.
                Some('[') => {
                    chars.next();
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC/DCS/…: up to BEL or ST (ESC \).
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    chars.next();
                    while let Some(c) = chars.next() {
                        if c == '\x07' {
                            break;
                        }
                        if c == '\x1b' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                // A lone ESC (or ESC + one character) is shown.
                _ => {
                    let before = out.len();
                    push_escape(&mut out, c);
                    col += out.len() - before;
                }
            },
            '\t' => {
                let pad = 8 - col % 8;
                out.extend(std::iter::repeat_n(' ', pad));
                col += pad;
            }
            c if is_active(c) => {
                let before = out.len();
                push_escape(&mut out, c);
                col += out.len() - before;
            }
            c => {
                out.push(c);
                col += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// The red team's forms: OSC 52 clipboard set, OSC 0 title, clear
    /// screen, CR overwrite, NUL and a bidi override all show as escapes.
    #[test]
    fn terminal_controls_show_as_escapes() {
        assert_eq!(
            visible("\x1b]52;c;cm0gLXJmIH4vKg==\x07"),
            "\\x1b]52;c;cm0gLXJmIH4vKg==\\x07"
        );
        assert_eq!(visible("\x1b]0;pwned\x1b\\"), "\\x1b]0;pwned\\x1b\\");
        assert_eq!(visible("\x1b[2J\x1b[H"), "\\x1b[2J\\x1b[H");
        assert_eq!(visible("safe\rEVIL"), "safe\\rEVIL");
        assert_eq!(visible("a\0b"), "a\\x00b");
        assert_eq!(visible("abc\u{202e}fed"), "abc\\u202efed");
        assert_eq!(visible("\u{2066}x\u{2069}"), "\\u2066x\\u2069");
        assert_eq!(visible("c1 \u{9b}31m"), "c1 \\u009b31m");
        assert_eq!(visible("del\x7f"), "del\\x7f");
        assert_eq!(visible("two\nlines"), "two\\nlines");
        assert_eq!(visible_lines("two\nlines\x1b"), "two\nlines\\x1b");
    }

    /// Ordinary text (tabs, backslashes, any script, emoji) is left alone
    /// and not copied.
    #[test]
    fn a_job_byte_that_is_not_utf8_shows_as_its_value() {
        let mut line = String::new();
        crate::model::exact::push(&mut line, b"a\xff\xc3b");
        assert_eq!(visible(&line), "a\\xff\\xc3b");
    }

    #[test]
    fn ordinary_text_is_borrowed_unchanged() {
        for text in [
            "plain",
            "a\tb",
            r"C:\path\x1b is text",
            "ünïcode → ✓ 日本語 עברית",
            "",
        ] {
            assert!(matches!(visible(text), Cow::Borrowed(t) if t == text), "{text:?}");
        }
    }

    #[test]
    fn cells_drop_sequences_expand_tabs_and_show_the_rest() {
        assert_eq!(for_cell("\x1b[31mred\x1b[0m plain"), "red plain");
        assert_eq!(for_cell("a\tb"), "a       b");
        assert_eq!(for_cell("\x1b]0;title\x07ok\r"), "ok\\r");
        assert_eq!(for_cell("\x1b]8;;http://x\x1b\\link"), "link");
        assert_eq!(for_cell("bell\x07 and \u{9b}c1"), "bell\\x07 and \\u009bc1");
        assert_eq!(for_cell("rtl\u{202e}x"), "rtl\\u202ex");
        assert_eq!(for_cell("ünïcode → fine"), "ünïcode → fine");
        assert_eq!(for_cell("\x1bx"), "\\x1bx");
    }
}
