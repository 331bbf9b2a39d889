//! Progress from the engine's streams (pulls, builds), reported at most
//! every [`REPORT_EVERY`]: a report held back is sent once the stream goes
//! quiet (a long `RUN` step, a stalled layer), so the latest state always
//! shows, however the engine's messages are spaced.

use std::time::Duration;

use futures_util::{Stream, StreamExt};
use tokio::time::Instant;

/// Least time between two progress reports.
pub const REPORT_EVERY: Duration = Duration::from_millis(250);

pub(super) struct Throttle {
    last: Option<Instant>,
    held: bool,
}

impl Throttle {
    pub fn new() -> Self {
        Throttle {
            last: None,
            held: false,
        }
    }

    /// The stream's next item; while a report is held back and nothing comes
    /// by its time, `report` is called with it first.
    pub async fn next<S: Stream + Unpin>(
        &mut self,
        stream: &mut S,
        mut report: impl FnMut(),
    ) -> Option<S::Item> {
        loop {
            match (self.held, self.last) {
                (true, Some(last)) => match tokio::time::timeout_at(last + REPORT_EVERY, stream.next()).await
                {
                    Ok(item) => return item,
                    Err(_) => {
                        self.sent();
                        report();
                    }
                },
                _ => return stream.next().await,
            }
        }
    }

    /// The state changed: `report` now when one is due, else hold it back.
    pub fn changed(&mut self, report: impl FnOnce()) {
        if self.last.is_none_or(|t| t.elapsed() >= REPORT_EVERY) {
            self.sent();
            report();
        } else {
            self.held = true;
        }
    }

    fn sent(&mut self) {
        self.last = Some(Instant::now());
        self.held = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two messages close together, then a long quiet: the second is
    /// reported during the quiet, not only when the stream ends.
    #[tokio::test(start_paused = true)]
    async fn a_held_report_goes_out_when_the_stream_is_quiet() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
        let mut stream = tokio_stream::wrappers::UnboundedReceiverStream::new(rx);
        let reports = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        tx.send(1).unwrap();
        tx.send(2).unwrap();
        let sender = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            drop(tx);
        });
        let mut throttle = Throttle::new();
        let mut state = 0;
        loop {
            let r = reports.clone();
            let seen = state;
            let Some(item) = throttle
                .next(&mut stream, || r.lock().unwrap().push((seen, Instant::now())))
                .await
            else {
                break;
            };
            state = item;
            let r = reports.clone();
            throttle.changed(|| r.lock().unwrap().push((item, Instant::now())));
        }
        sender.await.unwrap();
        let reports = reports.lock().unwrap().clone();
        let states: Vec<u32> = reports.iter().map(|(s, _)| *s).collect();
        assert_eq!(states, vec![1, 2]);
        // The held one went out at its time, long before the stream ended.
        assert!(reports[1].1 - reports[0].1 <= REPORT_EVERY + Duration::from_millis(1));
    }
}
