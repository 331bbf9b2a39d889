//! A job's bytes kept exact inside berth's text lines.
//!
//! Lines are `String`s from the splitter to the store to every face, but a
//! job may print bytes that are not UTF-8 (a binary, a Latin-1 file, a
//! multi-byte character cut by the line-length limit). Replacing them with
//! U+FFFD loses them: `logs --raw` promised the job's bytes. So a byte that
//! is not part of valid UTF-8 is kept as one character of a reserved range,
//! U+10FF00 + the byte (the end of plane 16's private use area, which text
//! does not use); a character the job really printed in that range is kept
//! as its four bytes, each escaped the same way, so decoding is exact for
//! any input. Raw faces (`logs --raw`, the foreground stream) decode back
//! to bytes; text faces show an escaped byte as `\xNN` (`inert.rs`); the
//! API's JSON carries the characters as they are (documented in API.md).

use std::borrow::Cow;

/// The first character of the reserved range; U+10FF00 + b is byte b.
pub const ESCAPE_BASE: u32 = 0x10FF00;

/// The UTF-8 lead byte of every character in the reserved range.
const LEAD: u8 = 0xF4;

/// The byte an escape character stands for, if `c` is one.
pub fn escaped_byte(c: char) -> Option<u8> {
    let c = c as u32;
    (c >= ESCAPE_BASE).then(|| (c - ESCAPE_BASE) as u8)
}

/// `bytes` as text when they are their own text: valid UTF-8 with nothing
/// in plane 16's last block (the common case; nothing to escape).
pub fn plain(bytes: &[u8]) -> Option<&str> {
    let s = std::str::from_utf8(bytes).ok()?;
    memchr::memchr(LEAD, bytes).is_none().then_some(s)
}

/// Append `bytes` to `text`, keeping every byte (see the module doc).
pub fn push(text: &mut String, bytes: &[u8]) {
    if let Some(s) = plain(bytes) {
        text.push_str(s);
        return;
    }
    for piece in bytes.utf8_chunks() {
        for c in piece.valid().chars() {
            match escaped_byte(c) {
                Some(_) => {
                    let mut buf = [0; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        text.push(escape(b));
                    }
                }
                None => text.push(c),
            }
        }
        for b in piece.invalid() {
            text.push(escape(*b));
        }
    }
}

fn escape(b: u8) -> char {
    char::from_u32(ESCAPE_BASE + b as u32).unwrap_or(char::REPLACEMENT_CHARACTER)
}

/// The job's bytes a line holds (borrowed when nothing was escaped).
pub fn bytes(text: &str) -> Cow<'_, [u8]> {
    if memchr::memchr(LEAD, text.as_bytes()).is_none() {
        return Cow::Borrowed(text.as_bytes());
    }
    let mut out = Vec::with_capacity(text.len());
    let mut buf = [0; 4];
    for c in text.chars() {
        match escaped_byte(c) {
            Some(b) => out.push(b),
            None => out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes()),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_bytes_come_back_exact() {
        let mut cases: Vec<Vec<u8>> = vec![
            b"plain".to_vec(),
            vec![0xff, b'a', 0xc3],
            "\u{10FF41} and \u{10FFFF}".as_bytes().to_vec(),
            vec![0xF4, 0x8F, 0xBD],
        ];
        // Every byte value, and a pseudo-random run of them.
        cases.push((0..=255).collect());
        let mut x: u32 = 12345;
        cases.push(
            (0..10_000)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) as u8
                })
                .collect(),
        );
        for case in cases {
            let mut text = String::new();
            push(&mut text, &case);
            assert_eq!(bytes(&text).as_ref(), case.as_slice());
        }
        let mut text = String::new();
        push(&mut text, "héllo".as_bytes());
        assert_eq!(text, "héllo");
        assert!(matches!(bytes(&text), Cow::Borrowed(_)));
    }
}
