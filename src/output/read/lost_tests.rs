//! A failing disk: batches the store cannot write leave gaps that every
//! read says, page by page, exactly once, before and after the store
//! recovers.

use super::super::*;
use crate::events::EventLog;
use crate::model::{Gap, JobId};
use crate::store::{Store, StoreHealth};
use crate::watch::Watchers;
use std::time::{Duration, Instant};

/// Every page from seq 1 with `limit`: (seqs, gaps, the largest page).
fn read_all(out: &JobOutput, limit: usize) -> (Vec<u64>, Vec<Gap>, usize) {
    let (mut seqs, mut gaps, mut biggest) = (Vec::new(), Vec::new(), 0);
    let mut since = 1;
    loop {
        let page = out
            .read(&LogQuery {
                since: Some(since),
                limit: Some(limit),
                ..Default::default()
            })
            .unwrap();
        biggest = biggest.max(page.lines.len());
        // A page's lines and gaps lie in [since, next_seq), in order.
        for g in &page.lost {
            assert!(
                since <= g.from && g.to < page.next_seq,
                "{g:?} outside {since}..{}",
                page.next_seq
            );
        }
        seqs.extend(page.lines.iter().map(|l| l.seq));
        gaps.extend(page.lost);
        if !page.has_more {
            assert_eq!(page.next_seq, page.last_seq + 1);
            return (seqs, gaps, biggest);
        }
        since = page.next_seq;
    }
}

fn write_lines(w: &mut crate::output::StreamWriter, seqs: std::ops::RangeInclusive<u64>) {
    let seqs: Vec<u64> = seqs.collect();
    for ten in seqs.chunks(10) {
        let text: String = ten.iter().map(|s| format!("line {s}\n")).collect();
        w.write(text.as_bytes());
    }
}

fn wait_for(store: &Store, healthy: bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.health().is_degraded() == healthy {
        assert!(
            Instant::now() < deadline,
            "the store's health never became {healthy}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_failed_batch_is_a_gap_said_once_and_paged_exactly_around() {
    let dir = tempfile::tempdir().unwrap();
    // 16 KiB of each job's output is held while the store cannot write.
    let store = Store::open_with(&dir.path().join("berth.db"), 256 << 20, 16 << 10).unwrap();
    let out = JobOutput::create(
        JobId::from_number(1),
        &dir.path().join("job-1"),
        4096,
        Watchers::default(),
        EventLog::new(),
        store.clone(),
        1,
    )
    .unwrap();
    let mut w = out.writer(Stream::Stdout).unwrap();
    write_lines(&mut w, 1..=1000);
    store.flush();
    store.fail_writes(true);
    write_lines(&mut w, 1001..=3000);
    wait_for(&store, false);
    assert!(matches!(store.health(), StoreHealth::Degraded { reason, .. } if reason.contains("injected")));
    // Held output is bounded: about 16 KiB of whole chunks, as their
    // memory counts (ten ~10-byte lines and a header: ~200 bytes).
    let check = |seqs: &[u64], gaps: &[Gap], last: u64| {
        assert_eq!(gaps.len(), 1, "one gap: {gaps:?}");
        let gap = gaps[0];
        assert_eq!(gap.from, 1001, "the gap starts at the first line not written");
        let held = 3000 - gap.to;
        assert!((500..=1000).contains(&held), "kept the newest {held} lines");
        let expected: Vec<u64> = (1..=1000).chain(gap.to + 1..=last).collect();
        assert_eq!(seqs, expected, "every other line, once, in order");
    };
    let (seqs, gaps, biggest) = read_all(&out, 100);
    assert!(biggest <= 100);
    check(&seqs, &gaps, 3000);
    // A tail across the gap says it too.
    let tail = out
        .read(&LogQuery {
            tail: Some(1000),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(tail.lost, gaps);
    assert_eq!(tail.lines.last().map(|l| l.seq), Some(3000));

    // Space comes back: the writer stores what it held by itself.
    store.fail_writes(false);
    wait_for(&store, true);
    assert_eq!(store.held_bytes(), 0);
    write_lines(&mut w, 3001..=3100);
    w.finish();
    let (seqs, after, _) = read_all(&out, 100);
    assert_eq!(after, gaps, "the same gap, now on disk");
    check(&seqs, &after, 3100);
    // A reader that pages with other limits sees the same.
    let (seqs7, gaps7, _) = read_all(&out, 7);
    assert_eq!((seqs7, gaps7), (seqs, after));
}
