//! The store behind [`crate::persist`]'s traits: a job's output and the
//! event log persist through them, each method the store's own.

use std::sync::Arc;

use super::Store;
use crate::error::Result;
use crate::model::{Chunk, Event, Gap, JobId, Line, Stream};
use crate::persist::{EventStore, OutputStore, StoredPage, Wait};

impl OutputStore for Store {
    fn put_chunk(&self, job: &JobId, chunk: Arc<Chunk>) {
        Store::put_chunk(self, job, chunk)
    }

    fn took(&self, job: &JobId, last: u64) {
        Store::took(self, job, last)
    }

    fn room(&self) -> Wait<'_> {
        Box::pin(Store::room(self))
    }

    fn flush(&self) {
        Store::flush(self)
    }

    fn page(
        &self,
        job: &JobId,
        range: (u64, u64),
        bounds: (usize, usize),
        stream: Option<Stream>,
    ) -> Result<StoredPage> {
        Store::page(self, job, range, bounds, stream)
    }

    fn tail(
        &self,
        job: &JobId,
        range: (usize, u64),
        max_bytes: usize,
        stream: Option<Stream>,
    ) -> Result<(Vec<Line>, Vec<Gap>)> {
        Store::tail_page(self, job, range, max_bytes, stream)
    }

    fn dropped_before(&self, job: &JobId) -> Result<u64> {
        Store::dropped_before(self, job)
    }

    fn raw_file_cap(&self) -> u64 {
        Store::raw_file_cap(self)
    }
}

impl EventStore for Store {
    fn put_event(&self, event: &Event) {
        Store::put_event(self, event)
    }

    fn flush(&self) {
        Store::flush(self)
    }

    fn events(&self, since: u64, limit: usize) -> Result<Vec<Event>> {
        Store::events(self, since, limit)
    }

    fn max_event_seq(&self) -> Result<u64> {
        Store::max_event_seq(self)
    }
}
