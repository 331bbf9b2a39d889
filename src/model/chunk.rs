//! Lines held back to back: what one read of a stream became.
//!
//! A busy job prints millions of lines a second; one allocation (and, on
//! another thread, one free) per line was most of what ingest cost, and
//! with short lines any work per line still was, down to keeping where
//! each line ends. So a read's lines are kept as one text buffer, each line
//! followed by its `\n` (a line's text never holds one), and a count: a
//! read of whole plain lines is taken with one copy and a count of its
//! newlines ([`LineBuf::push_lines`]), a run of lines goes to a terminal, a
//! frame or a store block as one slice ([`Chunk::lines_text`]), the ring
//! holds these chunks and the store's writer encodes from the same chunk
//! (it is shared, never copied). Where line `i` starts is found by counting
//! newlines when asked (a page or a block boundary: once per page, not per
//! line), and a [`Line`] is only made when a reader asks for one.

use chrono::{DateTime, Utc};
use memchr::{memchr, memrchr};

use super::{Line, Stream};

/// Lines being collected (by the splitter) for the next chunk.
#[derive(Debug, Default)]
pub struct LineBuf {
    /// Every line followed by `\n` (a line's text never holds one).
    text: String,
    /// How many lines `text` holds (its newlines).
    lines: usize,
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
        self.lines += 1;
    }

    /// Append `bytes`, whole lines each ending in `\n`, with one copy when
    /// they are their lines already: plain text (nothing to escape), no
    /// `\r` (dropped before a `\n`) and no line over `max_line` bytes (cut
    /// in pieces). Returns false, having added nothing, when they are not.
    /// Nothing here is done per line: each check is a search over the
    /// bytes, and the lines are counted, not located.
    pub fn push_lines(&mut self, bytes: &[u8], max_line: usize) -> bool {
        if bytes.last() != Some(&b'\n') || memchr(b'\r', bytes).is_some() || has_long_line(bytes, max_line) {
            return false;
        }
        let Some(text) = super::exact::plain(bytes) else {
            return false;
        };
        self.text.push_str(text);
        self.lines += count_newlines(bytes);
        true
    }

    pub fn len(&self) -> usize {
        self.lines
    }

    pub fn is_empty(&self) -> bool {
        self.lines == 0
    }

    /// Make room for `bytes` more of text.
    pub fn reserve(&mut self, bytes: usize) {
        self.text.reserve(bytes);
    }

    /// Forget the first `n` lines (a replay of what is stored already).
    pub fn drop_first(&mut self, n: usize) {
        let n = n.min(self.lines);
        if n == 0 {
            return;
        }
        let cut = after_newlines(self.text.as_bytes(), n);
        self.text.drain(..cut);
        self.lines -= n;
    }

    /// The lines as strings (for tests and small callers).
    pub fn to_strings(&self) -> Vec<String> {
        Lines::new(&self.text, 1, self.lines)
            .map(|(_, l)| l.to_string())
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
            lines: std::mem::take(&mut self.lines),
        }
    }
}

/// Whether a line of `bytes` (whole lines, the last ending in `\n`) is
/// longer than `max`: a search per `max` bytes, not per line (every line
/// starting in a window of `max + 1` bytes ends by the window's last `\n`).
fn has_long_line(bytes: &[u8], max: usize) -> bool {
    let mut at = 0;
    while at < bytes.len() {
        let window = &bytes[at..bytes.len().min(at.saturating_add(max).saturating_add(1))];
        match memrchr(b'\n', window) {
            Some(nl) => at += nl + 1,
            None => return true,
        }
    }
    false
}

/// The newlines in `bytes` (a loop the compiler makes vector code of).
fn count_newlines(bytes: &[u8]) -> usize {
    let mut n = 0;
    // Counted in `u8` lanes a block at a time, so no lane can overflow.
    for block in bytes.chunks(255) {
        n += usize::from(block.iter().fold(0u8, |n, &b| n + u8::from(b == b'\n')));
    }
    n
}

/// The offset just past the `k`-th newline of `text` (its length when it
/// has fewer): where line `k` starts, counting from 0.
pub(crate) fn after_newlines(text: &[u8], k: usize) -> usize {
    if k == 0 {
        return 0;
    }
    let (mut seen, mut at) = (0, 0);
    for block in text.chunks(255) {
        let here = count_newlines(block);
        if seen + here >= k {
            let nth = memchr::memchr_iter(b'\n', block)
                .nth(k - seen - 1)
                .expect("counted");
            return at + nth + 1;
        }
        seen += here;
        at += block.len();
    }
    text.len()
}

/// Consecutive lines of one stream with one timestamp, numbered from `first_seq`.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub first_seq: u64,
    pub stream: Stream,
    pub ts: DateTime<Utc>,
    /// As in [`LineBuf`]: each line followed by `\n`.
    text: String,
    lines: usize,
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
        self.lines
    }

    pub fn is_empty(&self) -> bool {
        self.lines == 0
    }

    pub fn last_seq(&self) -> u64 {
        self.first_seq + self.lines as u64 - 1
    }

    /// Bytes of text (newlines not counted).
    pub fn text_bytes(&self) -> usize {
        self.text.len() - self.lines
    }

    /// Memory the chunk holds: what a bound in bytes counts it as.
    pub fn cost(&self) -> usize {
        self.text.capacity() + std::mem::size_of::<Chunk>() + 32
    }

    /// Where line `i` starts in the text (its length for `i` = `len`).
    fn start(&self, i: usize) -> usize {
        if i >= self.lines {
            return self.text.len();
        }
        after_newlines(self.text.as_bytes(), i)
    }

    /// The text of lines `range`, each followed by `\n`: one slice.
    pub fn lines_text(&self, range: std::ops::Range<usize>) -> &str {
        if range.is_empty() {
            return "";
        }
        let start = self.start(range.start);
        let end = match range.end >= self.lines {
            true => self.text.len(),
            false => start + after_newlines(&self.text.as_bytes()[start..], range.len()),
        };
        &self.text[start..end]
    }

    /// The end of the lines from `start` on that a page of at most `lines`
    /// and about `bytes` takes (newlines counted): lines are taken while
    /// less than `bytes` is taken, so at least one when there is room.
    pub fn fit(&self, start: usize, lines: usize, bytes: usize) -> usize {
        let last = self.lines.min(start.saturating_add(lines));
        if start >= last || bytes == 0 {
            return start;
        }
        let base = self.start(start);
        let text = self.text.as_bytes();
        // The last line taken is the first to end `bytes` or more past `base`.
        let cut = base.saturating_add(bytes - 1);
        let by_bytes = match cut < text.len() {
            true => {
                let nl = cut + memchr(b'\n', &text[cut..]).expect("the text ends with a newline");
                start + count_newlines(&text[base..=nl])
            }
            false => self.lines,
        };
        by_bytes.min(last)
    }

    /// `(seq, text)` of lines `from..` in order (and from the end, newest
    /// first): one search for where they start, then line after line.
    pub fn texts_from(&self, from: usize) -> Lines<'_> {
        let from = from.min(self.lines);
        Lines::new(
            &self.text[self.start(from)..],
            self.first_seq + from as u64,
            self.lines - from,
        )
    }

    /// `(seq, text)` of every line, in order.
    pub fn iter(&self) -> Lines<'_> {
        Lines::new(&self.text, self.first_seq, self.lines)
    }

    /// Lines `range` as owned [`Line`]s.
    pub fn lines(&self, range: std::ops::Range<usize>) -> impl Iterator<Item = Line> + '_ {
        let end = range.end.min(self.lines);
        self.texts_from(range.start)
            .take(end.saturating_sub(range.start))
            .map(|(seq, text)| self.line_of(seq, text))
    }

    /// The line numbered `seq` with `text`, of this chunk's stream and time.
    pub fn line_of(&self, seq: u64, text: &str) -> Line {
        Line {
            seq,
            stream: self.stream,
            ts: self.ts,
            text: text.to_string(),
        }
    }

    /// Line `i` (one search: for many, [`Chunk::lines`]).
    pub fn line(&self, i: usize) -> Line {
        self.lines(i..i + 1).next().expect("a line of the chunk")
    }

    /// Index of the line with `seq` (clamped to the chunk).
    pub fn index_of(&self, seq: u64) -> usize {
        (seq.saturating_sub(self.first_seq) as usize).min(self.lines)
    }
}

/// `(seq, text)` of consecutive lines held back to back, each followed by
/// `\n`; from either end.
#[derive(Debug, Clone)]
pub struct Lines<'a> {
    /// The lines not handed out yet.
    text: &'a str,
    front_seq: u64,
    left: usize,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str, first_seq: u64, lines: usize) -> Lines<'a> {
        Lines {
            text,
            front_seq: first_seq,
            left: lines,
        }
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = (u64, &'a str);

    fn next(&mut self) -> Option<(u64, &'a str)> {
        if self.left == 0 {
            return None;
        }
        let nl = memchr(b'\n', self.text.as_bytes()).unwrap_or(self.text.len());
        let line = &self.text[..nl];
        self.text = self.text.get(nl + 1..).unwrap_or("");
        self.left -= 1;
        self.front_seq += 1;
        Some((self.front_seq - 1, line))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<'a> DoubleEndedIterator for Lines<'a> {
    fn next_back(&mut self) -> Option<(u64, &'a str)> {
        if self.left == 0 {
            return None;
        }
        // The text ends with the last line's newline.
        let body = self.text.strip_suffix('\n').unwrap_or(self.text);
        let start = memrchr(b'\n', body.as_bytes()).map_or(0, |nl| nl + 1);
        self.text = &self.text[..start];
        self.left -= 1;
        Some((self.front_seq + self.left as u64, &body[start..]))
    }
}

impl ExactSizeIterator for Lines<'_> {}

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
        let newest: Vec<(u64, &str)> = c.iter().rev().take(2).collect();
        assert_eq!(newest, vec![(10, "bad \u{10ffff}"), (9, "f\u{e9}")]);
    }

    /// Where a chunk's lines are found by counting (a page's start and end,
    /// a slice of lines, lines from either end) agrees with where they
    /// are, for lines of every length, empty ones and a chunk of none.
    #[test]
    fn lines_found_by_counting_are_where_they_are() {
        let mut x: u32 = 11;
        let mut next = |n: u32| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) % n
        };
        for case in 0..300 {
            let lines: Vec<String> = (0..next(700))
                .map(|i| {
                    "ab\u{e9}".repeat(next(if case % 3 == 0 { 200 } else { 3 }) as usize)
                        + &i.to_string()[..next(2) as usize]
                })
                .collect();
            let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
            let mut buf = LineBuf::default();
            assert!(buf.push_lines(text.as_bytes(), 1 << 20) || text.is_empty());
            let c = buf.seal(5, Stream::Stdout, Utc::now());
            assert_eq!(c.len(), lines.len());
            // Where each line ends, found the slow way.
            let ends: Vec<usize> = lines
                .iter()
                .scan(0, |at, l| {
                    *at += l.len() + 1;
                    Some(*at)
                })
                .collect();
            let start = |i: usize| if i == 0 { 0 } else { ends[i - 1] };
            let n = lines.len();
            let (a, b) = (next(n as u32 + 1) as usize, next(n as u32 + 1) as usize);
            let (a, b) = (a.min(b), a.max(b));
            assert_eq!(c.lines_text(a..b), &text[start(a)..start(b)], "case {case}");
            let (most, bytes) = (next(50) as usize + 1, next(3000) as usize);
            let want = (a..n.min(a + most))
                .take_while(|&i| i == a || ends[i - 1] - start(a) < bytes)
                .count();
            let want = if bytes == 0 { a } else { a + want };
            assert_eq!(
                c.fit(a, most, bytes),
                want,
                "case {case}: fit({a}, {most}, {bytes})"
            );
            let from: Vec<(u64, String)> = c.texts_from(a).map(|(s, t)| (s, t.to_string())).collect();
            let want: Vec<(u64, String)> = (a..n).map(|i| (5 + i as u64, lines[i].clone())).collect();
            assert_eq!(from, want, "case {case}");
            let back: Vec<String> = c.iter().rev().map(|(_, t)| t.to_string()).collect();
            assert_eq!(back, lines.iter().rev().cloned().collect::<Vec<_>>());
            let mut dropped = LineBuf::default();
            assert!(dropped.push_lines(text.as_bytes(), 1 << 20) || text.is_empty());
            dropped.drop_first(a);
            assert_eq!(dropped.to_strings(), lines[a..].to_vec());
        }
    }
}
