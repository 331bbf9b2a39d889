//! The store behind [`crate::persist`]'s traits: a job's output and the
//! event log persist through them, each method the store's own.

use std::sync::Arc;

use super::Store;
use crate::error::Result;
use crate::model::{Chunk, Event, JobId, Line, Stream};
use crate::persist::{EventStore, OutputStore, Wait};

impl OutputStore for Store {
    fn put_chunk(&self, job: &JobId, chunk: Arc<Chunk>) {
        Store::put_chunk(self, job, chunk)
    }

    fn room(&self) -> Wait<'_> {
        Box::pin(Store::room(self))
    }

    fn flush(&self) {
        Store::flush(self)
    }

    fn lines_and_start(
        &self,
        job: &JobId,
        from: u64,
        until: u64,
        limit: usize,
        stream: Option<Stream>,
    ) -> Result<(Vec<Line>, u64)> {
        Store::lines_and_start(self, job, from, until, limit, stream)
    }

    fn tail(&self, job: &JobId, n: usize, until: u64, stream: Option<Stream>) -> Result<Vec<Line>> {
        Store::tail(self, job, n, until, stream)
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
