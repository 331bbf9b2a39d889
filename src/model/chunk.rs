//! Lines held back to back: what one read of a stream became.
//!
//! A busy job prints hundreds of thousands of lines a second; one allocation
//! (and, on another thread, one free) per line was most of what ingest cost.
//! So a read's lines are kept as one text buffer plus their end offsets: the
//! ring holds these chunks and the store's writer encodes from the same
//! chunk (it is shared, never copied), and a [`Line`] is only made when a
//! reader asks for one.

use chrono::{DateTime, Utc};

use super::{Line, Stream};

/// Lines being collected (by the splitter) for the next chunk.
#[derive(Debug, Default)]
pub struct LineBuf {
    text: String,
    ends: Vec<u32>,
}

impl LineBuf {
    /// Append a line (without its newline); bytes that are not UTF-8 are
    /// kept as escapes (`exact.rs`).
    pub fn push(&mut self, bytes: &[u8]) {
        super::exact::push(&mut self.text, bytes);
        self.ends.push(self.text.len() as u32);
    }

    /// Append a line that is a line's text already (its escapes kept as
    /// they are: pushing its bytes would escape them twice).
    pub fn push_text(&mut self, text: &str) {
        self.text.push_str(text);
        self.ends.push(self.text.len() as u32);
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
                let s = self.text[start..e as usize].to_string();
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

/// Consecutive lines of one stream with one timestamp, numbered from `first_seq`.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub first_seq: u64,
    pub stream: Stream,
    pub ts: DateTime<Utc>,
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
        self.text.len()
    }

    /// The text of the `i`-th line.
    pub fn text(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
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
