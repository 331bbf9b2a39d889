//! Lines held back to back: what one read of a stream became.
//!
//! A busy job prints millions of lines a second; one allocation (and, on
//! another thread, one free) per line was most of what ingest cost, and
//! with short lines any work per line still was. So a read's lines are kept
//! as one text buffer, each line followed by its `\n`, plus their end
//! offsets: a read of whole plain lines is taken with one copy
//! ([`LineBuf::push_lines`]), a run of lines goes to a terminal, a frame or
//! a store block as one slice ([`Chunk::lines_text`]), the ring holds these
//! chunks and the store's writer encodes from the same chunk (it is shared,
//! never copied), and a [`Line`] is only made when a reader asks for one.

use chrono::{DateTime, Utc};

use super::{Line, Stream};

/// Lines being collected (by the splitter) for the next chunk.
#[derive(Debug, Default)]
pub struct LineBuf {
    /// Every line followed by `\n` (a line's text never holds one).
    text: String,
    /// Offset just past each line's `\n`.
    ends: Vec<u32>,
}

impl LineBuf {
    /// Append a line (without its newline); bytes that are not UTF-8 are
    /// kept as escapes (`exact.rs`).
    pub fn push(&mut self, bytes: &[u8]) {
        super::exact::push(&mut self.text, bytes);
        self.end_line();
    }

    /// Append a line that is a line's text already (its escapes kept as
    /// they are: pushing its bytes would escape them twice).
    pub fn push_text(&mut self, text: &str) {
        self.text.push_str(text);
        self.end_line();
    }

    fn end_line(&mut self) {
        self.text.push('\n');
        self.ends.push(self.text.len() as u32);
    }

    /// Append `bytes`, whole lines each ending in `\n`, with one copy when
    /// they are their lines already: plain text (nothing to escape), no
    /// `\r` (dropped before a `\n`) and no line over `max_line` bytes (cut
    /// in pieces). Returns false, having added nothing, when they are not.
    pub fn push_lines(&mut self, bytes: &[u8], max_line: usize) -> bool {
        let Some(text) = super::exact::plain(bytes) else {
            return false;
        };
        let (base, had) = (self.text.len(), self.ends.len());
        // A word at a time (a search call per line cost more than the line
        // itself when lines are short): the newlines of 8 bytes at once.
        let mut start = 0;
        let mut words = bytes.chunks_exact(8);
        let mut at = 0;
        let mut fits = true;
        // Whether the line ending at `nl` is short enough to be kept whole.
        let mut line_end = |nl: usize, ends: &mut Vec<u32>| {
            let short = nl - start <= max_line;
            start = nl + 1;
            ends.push((base + start) as u32);
            short
        };
        for word in &mut words {
            let word = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            if bytes_equal_to(word, b'\r') != 0 {
                fits = false;
                break;
            }
            let mut newlines = bytes_equal_to(word, b'\n');
            while newlines != 0 {
                fits &= line_end(at + newlines.trailing_zeros() as usize / 8, &mut self.ends);
                newlines &= newlines - 1;
            }
            at += 8;
        }
        for (i, &b) in words.remainder().iter().enumerate() {
            fits &= b != b'\r';
            if b == b'\n' {
                fits &= line_end(at + i, &mut self.ends);
            }
        }
        if !fits {
            self.ends.truncate(had);
            return false;
        }
        self.text.push_str(text);
        true
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Make room for `bytes` more of text.
    pub fn reserve(&mut self, bytes: usize) {
        self.text.reserve(bytes);
    }

    /// Forget the first `n` lines (a replay of what is stored already).
    pub fn drop_first(&mut self, n: usize) {
        let n = n.min(self.ends.len());
        if n == 0 {
            return;
        }
        let cut = self.ends[n - 1];
        self.text.drain(..cut as usize);
        self.ends.drain(..n);
        for e in &mut self.ends {
            *e -= cut;
        }
    }

    /// The lines as strings (for tests and small callers).
    pub fn to_strings(&self) -> Vec<String> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&e| {
                let s = self.text[start..e as usize - 1].to_string();
                start = e as usize;
                s
            })
            .collect()
    }

    /// Seal the collected lines into a chunk numbered from `first_seq`,
    /// leaving this buffer empty.
    pub fn seal(&mut self, first_seq: u64, stream: Stream, ts: DateTime<Utc>) -> Chunk {
        Chunk {
            first_seq,
            stream,
            ts,
            text: std::mem::take(&mut self.text),
            ends: std::mem::take(&mut self.ends),
        }
    }
}

/// The high bit of each byte of `word` that equals `b`, and no other bit
/// (exact: no carry crosses a byte).
fn bytes_equal_to(word: u64, b: u8) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let t = word ^ (0x0101_0101_0101_0101 * u64::from(b));
    !(((t & LOW7) + LOW7) | t) & !LOW7
}

/// Consecutive lines of one stream with one timestamp, numbered from `first_seq`.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub first_seq: u64,
    pub stream: Stream,
    pub ts: DateTime<Utc>,
    /// As in [`LineBuf`]: each line followed by `\n`.
    text: String,
    ends: Vec<u32>,
}

impl Chunk {
    /// Consecutive lines of one stream (as the store's tests and replays
    /// hand them over), keeping the first line's timestamp.
    pub fn from_lines(lines: &[Line]) -> Chunk {
        let mut buf = LineBuf::default();
        for l in lines {
            buf.push_text(&l.text);
        }
        let first = lines.first().map(|l| (l.seq, l.stream, l.ts));
        let (seq, stream, ts) = first.unwrap_or((1, Stream::Stdout, Utc::now()));
        buf.seal(seq, stream, ts)
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn last_seq(&self) -> u64 {
        self.first_seq + self.ends.len() as u64 - 1
    }

    /// Bytes of text (newlines not counted).
    pub fn text_bytes(&self) -> usize {
        self.text.len() - self.ends.len()
    }

    /// Memory the chunk holds: what a bound in bytes counts it as.
    pub fn cost(&self) -> usize {
        self.text.capacity() + self.ends.capacity() * 4 + std::mem::size_of::<Chunk>() + 32
    }

    /// Where line `i` starts in the text.
    fn start(&self, i: usize) -> usize {
        if i == 0 { 0 } else { self.ends[i - 1] as usize }
    }

    /// The text of the `i`-th line.
    pub fn text(&self, i: usize) -> &str {
        &self.text[self.start(i)..self.ends[i] as usize - 1]
    }

    /// The text of lines `range`, each followed by `\n`: one slice.
    pub fn lines_text(&self, range: std::ops::Range<usize>) -> &str {
        if range.is_empty() {
            return "";
        }
        &self.text[self.start(range.start)..self.ends[range.end - 1] as usize]
    }

    /// The end of the lines from `start` on that a page of at most `lines`
    /// and about `bytes` takes (newlines counted): lines are taken while
    /// less than `bytes` is taken, so at least one when there is room.
    pub fn fit(&self, start: usize, lines: usize, bytes: usize) -> usize {
        let last = self.len().min(start.saturating_add(lines));
        if start >= last || bytes == 0 {
            return start;
        }
        let base = self.start(start);
        // Line `start` is taken; each next one while what came before it is under `bytes`.
        start + 1 + self.ends[start..last - 1].partition_point(|&e| (e as usize - base) < bytes)
    }

    /// The `i`-th line as an owned [`Line`].
    pub fn line(&self, i: usize) -> Line {
        Line {
            seq: self.first_seq + i as u64,
            stream: self.stream,
            ts: self.ts,
            text: self.text(i).to_string(),
        }
    }

    /// `(seq, text)` of every line, in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, &str)> + '_ {
        (0..self.ends.len()).map(|i| (self.first_seq + i as u64, self.text(i)))
    }

    /// Index of the line with `seq` (clamped to the chunk).
    pub fn index_of(&self, seq: u64) -> usize {
        (seq.saturating_sub(self.first_seq) as usize).min(self.ends.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_made_into_a_chunk_again_keep_their_escapes() {
        let mut buf = LineBuf::default();
        buf.push(b"a\xffb");
        let c = buf.seal(1, Stream::Stdout, Utc::now());
        let line = c.line(0);
        let again = Chunk::from_lines(std::slice::from_ref(&line));
        assert_eq!(again.line(0).text, line.text);
        assert_eq!(
            super::super::exact::bytes(&again.line(0).text).as_ref(),
            b"a\xffb"
        );
    }

    #[test]
    fn a_chunk_gives_back_its_lines() {
        let mut buf = LineBuf::default();
        for l in ["one", "", "three", "f\u{e9}"] {
            buf.push(l.as_bytes());
        }
        buf.push(b"bad \xff");
        buf.drop_first(1);
        let c = buf.seal(7, Stream::Stderr, Utc::now());
        assert!(buf.is_empty());
        let got: Vec<(u64, &str)> = c.iter().collect();
        assert_eq!(
            got,
            vec![(7, ""), (8, "three"), (9, "f\u{e9}"), (10, "bad \u{10ffff}")]
        );
        assert_eq!(
            (c.last_seq(), c.index_of(9), c.line(1).text),
            (10, 2, "three".into())
        );
    }
}
