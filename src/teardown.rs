//! Where a manager's life ends. Everything that must happen so that nothing
//! outlives berth starts from here: the signals that end serving (SIGINT,
//! SIGTERM), and the pieces both the daemon and `berth mcp` run on the way
//! out.

/// SIGINT or SIGTERM.
pub async fn signals() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
