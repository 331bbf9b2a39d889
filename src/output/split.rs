//! Bytes to lines: `\n` ends a line (a `\r` before it is dropped), lines over
//! [`MAX_LINE_BYTES`] are cut at a UTF-8 boundary, and a last line without a
//! newline is kept.

use memchr::{memchr, memrchr};

use super::MAX_LINE_BYTES;
use crate::model::LineBuf;

/// Splits a byte stream into lines: `\n` ends a line (a `\r` before it is
/// dropped), lines over [`MAX_LINE_BYTES`] are cut at a UTF-8 boundary, and
/// [`LineSplitter::finish`] delivers a last line that had no newline.
#[derive(Default)]
pub struct LineSplitter {
    buf: Vec<u8>,
}

impl LineSplitter {
    pub fn push(&mut self, mut chunk: &[u8], out: &mut LineBuf) {
        // The common case: no line begun before this read, and the read's
        // whole lines plain and short: taken in one copy, not line by line.
        if self.buf.is_empty()
            && let Some(last) = memrchr(b'\n', chunk)
            && out.push_lines(&chunk[..=last], MAX_LINE_BYTES)
        {
            chunk = &chunk[last + 1..];
        }
        while let Some(pos) = memchr(b'\n', chunk) {
            let (line, rest) = (&chunk[..pos], &chunk[pos + 1..]);
            chunk = rest;
            if self.buf.is_empty() && line.len() <= MAX_LINE_BYTES {
                // The common case: a whole line inside this read, copied once.
                out.push(line.strip_suffix(b"\r").unwrap_or(line));
                continue;
            }
            self.buf.extend_from_slice(line);
            self.split_long(out);
            if self.buf.last() == Some(&b'\r') {
                self.buf.pop();
            }
            out.push(&self.buf);
            self.buf.clear();
        }
        self.buf.extend_from_slice(chunk);
        self.split_long(out);
    }

    /// Bytes of the line started but not ended yet.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// Flush a final line without newline.
    pub fn finish(&mut self, out: &mut LineBuf) {
        if !self.buf.is_empty() {
            out.push(&self.buf);
            self.buf.clear();
        }
    }

    /// Emit full-size pieces while the pending line is over the limit.
    fn split_long(&mut self, out: &mut LineBuf) {
        while self.buf.len() > MAX_LINE_BYTES {
            let mut cut = MAX_LINE_BYTES;
            // Back up over UTF-8 continuation bytes so no character is cut in two.
            while cut > MAX_LINE_BYTES - 4 && (self.buf[cut] & 0xC0) == 0x80 {
                cut -= 1;
            }
            out.push(&self.buf[..cut]);
            self.buf.drain(..cut);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn split(chunks: &[&[u8]]) -> Vec<String> {
        let mut s = LineSplitter::default();
        let mut out = LineBuf::default();
        for c in chunks {
            s.push(c, &mut out);
        }
        s.finish(&mut out);
        out.to_strings()
    }

    #[test]
    fn splits_lines_and_keeps_last_partial() {
        assert_eq!(split(&[b"a\nb\nc"]), vec!["a", "b", "c"]);
        assert_eq!(split(&[b"a", b"b\r\n", b"\n", b"c\n"]), vec!["ab", "", "c"]);
        assert_eq!(split(&[b""]), Vec::<String>::new());
        // A long line in one read and a short one across reads.
        let long = "x".repeat(MAX_LINE_BYTES + 5);
        let got = split(&[format!("{long}\nsh").as_bytes(), b"ort\r\n"]);
        assert_eq!(
            got,
            vec!["x".repeat(MAX_LINE_BYTES), "x".repeat(5), "short".into()]
        );
    }

    /// What splitting means, one line at a time: each line cut into
    /// pieces of at most [`MAX_LINE_BYTES`] at a character boundary, a `\r`
    /// before its `\n` dropped, a last line without one kept.
    fn by_hand(input: &[u8]) -> Vec<String> {
        let mut out = LineBuf::default();
        let pieces: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
        for (i, mut line) in pieces.iter().copied().enumerate() {
            let ended = i + 1 < pieces.len();
            while line.len() > MAX_LINE_BYTES {
                let mut cut = MAX_LINE_BYTES;
                while cut > MAX_LINE_BYTES - 4 && (line[cut] & 0xC0) == 0x80 {
                    cut -= 1;
                }
                out.push(&line[..cut]);
                line = &line[cut..];
            }
            let line = if ended {
                line.strip_suffix(b"\r").unwrap_or(line)
            } else {
                line
            };
            if ended || !line.is_empty() {
                out.push(line);
            }
        }
        out.to_strings()
    }

    #[test]
    fn reads_taken_whole_split_as_line_by_line() {
        // Bytes that take each path: short and long lines, `\r`s, bytes to
        // escape (0xF4, 0xFF), multi-byte characters; cut into reads of
        // every size, so lines and words straddle them.
        let alphabet: &[&[u8]] = &[
            b"a",
            b"bc",
            b"\n",
            b"\n",
            b"\r",
            b"\r\n",
            "\u{e9}".as_bytes(),
            b"\xf4",
            b"\xff",
        ];
        let mut x: u32 = 7;
        let mut next = |n: u32| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) % n
        };
        for case in 0..200 {
            let mut input = Vec::new();
            for _ in 0..next(3000) {
                // Now and then a line past the limit, mostly plain text.
                if next(50) == 0 {
                    input.extend(std::iter::repeat_n(b'x', MAX_LINE_BYTES - 2 + next(6) as usize));
                }
                // Some cases plain, so whole reads take the one-copy path.
                let pick = if case % 2 == 0 {
                    next(4)
                } else {
                    next(alphabet.len() as u32)
                };
                input.extend_from_slice(alphabet[pick as usize]);
            }
            let mut reads = Vec::new();
            let mut rest = &input[..];
            while !rest.is_empty() {
                let most = if case % 3 == 0 { 3 * MAX_LINE_BYTES } else { 9000 };
                let n = (next(most as u32) as usize + 1).min(rest.len());
                reads.push(&rest[..n]);
                rest = &rest[n..];
            }
            assert_eq!(split(&reads), by_hand(&input), "case {case}");
        }
    }

    #[test]
    fn long_lines_are_split_at_char_boundaries() {
        let long = "é".repeat(MAX_LINE_BYTES); // 2 bytes each
        let out = split(&[long.as_bytes(), b"\n"]);
        assert_eq!(out.concat(), long);
        assert!(out.iter().all(|l| l.len() <= MAX_LINE_BYTES));
        assert_eq!(out.len(), 2);
    }
}
