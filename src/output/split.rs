//! Bytes to lines: `\n` ends a line (a `\r` before it is dropped), lines over
//! [`MAX_LINE_BYTES`] are cut at a UTF-8 boundary, and a last line without a
//! newline is kept.

use memchr::memchr;

use super::MAX_LINE_BYTES;

/// Splits a byte stream into lines: `\n` ends a line (a `\r` before it is
/// dropped), lines over [`MAX_LINE_BYTES`] are cut at a UTF-8 boundary, and
/// [`LineSplitter::finish`] delivers a last line that had no newline.
#[derive(Default)]
pub struct LineSplitter {
    buf: Vec<u8>,
}

impl LineSplitter {
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<String>) {
        while let Some(pos) = memchr(b'\n', chunk) {
            self.buf.extend_from_slice(&chunk[..pos]);
            chunk = &chunk[pos + 1..];
            self.split_long(out);
            if self.buf.last() == Some(&b'\r') {
                self.buf.pop();
            }
            out.push(String::from_utf8_lossy(&self.buf).into_owned());
            self.buf.clear();
        }
        self.buf.extend_from_slice(chunk);
        self.split_long(out);
    }

    /// Flush a final line without newline.
    pub fn finish(&mut self, out: &mut Vec<String>) {
        if !self.buf.is_empty() {
            out.push(String::from_utf8_lossy(&self.buf).into_owned());
            self.buf.clear();
        }
    }

    /// Emit full-size pieces while the pending line is over the limit.
    fn split_long(&mut self, out: &mut Vec<String>) {
        while self.buf.len() > MAX_LINE_BYTES {
            let mut cut = MAX_LINE_BYTES;
            // Back up over UTF-8 continuation bytes so no character is cut in two.
            while cut > MAX_LINE_BYTES - 4 && (self.buf[cut] & 0xC0) == 0x80 {
                cut -= 1;
            }
            out.push(String::from_utf8_lossy(&self.buf[..cut]).into_owned());
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
        let mut out = Vec::new();
        for c in chunks {
            s.push(c, &mut out);
        }
        s.finish(&mut out);
        out
    }

    #[test]
    fn splits_lines_and_keeps_last_partial() {
        assert_eq!(split(&[b"a\nb\nc"]), vec!["a", "b", "c"]);
        assert_eq!(split(&[b"a", b"b\r\n", b"\n", b"c\n"]), vec!["ab", "", "c"]);
        assert_eq!(split(&[b""]), Vec::<String>::new());
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
