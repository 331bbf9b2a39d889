//! What a follow hands out: a [`Batch`] of lines in seq order, as pieces
//! of chunks, with what a terminal or a frame needs from it (runs of one
//! stream as text, lines made on request); and the [`FollowPage`] that
//! bounds a batch.

use super::{ChunkPiece, Line, Stream};
use crate::model::Gap;

/// How much one batch of a follow holds, and of which stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FollowPage {
    /// Most lines in a batch.
    pub lines: usize,
    /// About the most text in a batch (checked while lines come from the ring).
    pub bytes: usize,
    /// Only this stream's lines (both when `None`).
    pub stream: Option<Stream>,
    /// The reader is the job's foreground (one per job): the ring keeps
    /// what it has not read yet, within a bound (`ingest.rs`).
    pub hold: bool,
}

/// Lines in seq order, as pieces of the ring's chunks (a line is only made
/// when a reader asks for one).
#[derive(Debug, Default)]
pub struct Batch {
    pub pieces: Vec<ChunkPiece>,
    /// The output cap dropped the lines before this seq before the follower
    /// read them: this batch starts after that gap.
    pub truncated_before: Option<u64>,
    /// Lines lost (the store could not be written) between the previous
    /// batch and this one.
    pub lost: Vec<Gap>,
}

impl Batch {
    /// Number of lines.
    pub fn len(&self) -> usize {
        self.pieces.iter().map(|(_, r)| r.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.pieces.iter().all(|(_, r)| r.is_empty())
    }

    /// Bytes of text, a newline per line included.
    pub fn text_bytes(&self) -> usize {
        self.pieces
            .iter()
            .map(|(c, r)| c.lines_text(r.clone()).len())
            .sum()
    }

    /// Each line as a [`Line`].
    pub fn lines(&self) -> impl Iterator<Item = Line> + '_ {
        self.pieces.iter().flat_map(|(c, r)| c.lines(r.clone()))
    }

    /// Call `each` once per run of one stream with the run's text, every
    /// line followed by `\n`: what a terminal or a frame takes as one write.
    /// A run of one piece is handed over as the chunk's own slice; longer
    /// runs are collected in `text` first.
    pub fn runs<E>(
        &self,
        text: &mut Vec<u8>,
        mut each: impl FnMut(Stream, &[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        text.clear();
        for (i, (chunk, range)) in self.pieces.iter().enumerate() {
            let piece = chunk.lines_text(range.clone()).as_bytes();
            let run_goes_on = self
                .pieces
                .get(i + 1)
                .is_some_and(|(c, _)| c.stream == chunk.stream);
            if text.is_empty() && !run_goes_on {
                each(chunk.stream, piece)?;
                continue;
            }
            text.extend_from_slice(piece);
            if !run_goes_on {
                each(chunk.stream, text)?;
                text.clear();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::sync::Arc;

    #[test]
    fn runs_join_lines_of_one_stream() {
        let mut a = crate::model::LineBuf::default();
        a.push(b"a1");
        a.push(b"a2");
        let mut b = crate::model::LineBuf::default();
        b.push(b"b1");
        let ts = chrono::Utc::now();
        let a = Arc::new(a.seal(1, Stream::Stdout, ts));
        let b = Arc::new(b.seal(3, Stream::Stdout, ts));
        let mut c = crate::model::LineBuf::default();
        c.push(b"c1");
        let c = Arc::new(c.seal(4, Stream::Stderr, ts));
        let batch = Batch {
            pieces: vec![(a, 1..2), (b, 0..1), (c, 0..1)],
            ..Default::default()
        };
        let mut runs = Vec::new();
        batch
            .runs(&mut Vec::new(), |s, t| {
                runs.push((s, String::from_utf8(t.to_vec()).unwrap()));
                Ok::<_, ()>(())
            })
            .unwrap();
        assert_eq!(
            runs,
            [
                (Stream::Stdout, "a2\nb1\n".to_string()),
                (Stream::Stderr, "c1\n".to_string())
            ]
        );
        assert_eq!((batch.len(), batch.text_bytes()), (3, 9));
    }
}
