//! The panel's one-shot requests (kill, background, resume, a layer's diff,
//! older lines, a whole log, the job list): each asks the manager once, as
//! a background task of [`Io`](super::Io), and sends its answer back as a
//! [`Reply`], a failure as a notice the panel shows.

use tokio::sync::mpsc::UnboundedSender;

use super::{Msg, Reply, whole_log};
use crate::api::client::Client;
use crate::manager::KillRequest;
use crate::model::{EndedBy, JobId};
use crate::output::LogQuery;
use crate::tui::logpane::OlderPage;

/// A line for the panel's notice bar.
fn say(tx: &UnboundedSender<Reply>, text: String) {
    let _ = tx.send(Reply::App(Msg::Notice(text)));
}

/// Stop `id` as its user; the notice says how it ended.
pub(super) async fn kill(c: Client, tx: UnboundedSender<Reply>, id: JobId) {
    let req = KillRequest {
        ended_by: Some(EndedBy::User),
        reason: Some("killed by user (berth tui)".into()),
        ..Default::default()
    };
    let text = match c.kill(&id, &req).await {
        Ok(out) if out.result == crate::manager::KillResult::AlreadyFinished => {
            format!("{id} had already ended ({})", out.status.name())
        }
        Ok(out) => format!("{id} stopped ({}, ended by user)", out.status.name()),
        Err(e) => format!("could not stop {id}: {e}"),
    };
    say(&tx, text);
}

/// Move `id` to the background, releasing its caller.
pub(super) async fn background(c: Client, tx: UnboundedSender<Reply>, id: JobId) {
    let text = match c.background(&id, EndedBy::User).await {
        Ok(_) => format!("{id} moved to background by user: its caller is released"),
        Err(e) => format!("could not move {id} to background: {e}"),
    };
    say(&tx, text);
}

/// Resume `id`; the app opens the job that resumes it.
pub(super) async fn resume(c: Client, tx: UnboundedSender<Reply>, id: JobId) {
    let msg = match c.resume(&id).await {
        Ok(view) => Msg::Resumed {
            from: id,
            view: Box::new(view),
        },
        Err(e) => Msg::Notice(format!("could not resume {id}: {e}")),
    };
    let _ = tx.send(Reply::App(msg));
}

/// The diff of `id`'s layer, as a text for the open pane.
pub(super) async fn layer_diff(c: Client, tx: UnboundedSender<Reply>, id: JobId) {
    let req = crate::api::DiffRequest {
        patch: true,
        ..Default::default()
    };
    let text = match c.layer_diff(id.as_str(), &req).await {
        Ok(d) => d.text,
        Err(e) => format!("{id} has no layer to show: {e}"),
    };
    let _ = tx.send(Reply::App(Msg::Text(id, text)));
}

/// The page of `id`'s log before the lines the pane holds.
pub(super) async fn load_older(c: Client, tx: UnboundedSender<Reply>, id: JobId, older: OlderPage) {
    let q = LogQuery {
        since: Some(older.since),
        limit: Some(older.limit),
        ..Default::default()
    };
    let msg = match c.logs(&id, &q).await {
        Ok(page) => Msg::LogPage(id, page),
        Err(e) => Msg::Notice(format!("could not read older lines of {id}: {e}")),
    };
    let _ = tx.send(Reply::App(msg));
}

/// The whole log of `id`, for the clipboard.
pub(super) async fn copy(c: Client, tx: UnboundedSender<Reply>, id: JobId) {
    let reply = match whole_log(&c, &id).await {
        Ok((text, lines)) => Reply::CopyText { job: id, text, lines },
        Err(e) => Reply::App(Msg::Notice(format!("could not read the log of {id}: {e}"))),
    };
    let _ = tx.send(reply);
}

/// Every job, for the list (nothing when the manager does not answer).
pub(super) async fn refresh_all(c: Client, tx: UnboundedSender<Reply>) {
    if let Ok(jobs) = c.panel_jobs().await {
        let _ = tx.send(Reply::App(Msg::Jobs(jobs)));
    }
}
