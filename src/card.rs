//! Cards: the one human-readable shape of a job, shared by the CLI, MCP
//! answers and the TUI details header (DESIGN §9):
//!
//! ```text
//! ● Shell (npm run dev)
//!   └ Status: running · job-3 · docker · 127.0.0.1:49153→3000
//!     Command: npm run dev
//!     Sandbox: user 1000:1000 · cpus 2 · memory 2 GiB · pids 512 · network berth-app-1a2b3c4d-net-0 · egress proxy
//!     Image: berth/dev:latest (the project names no image and berth/dev … is built)
//!     Reason: moved to background by user (Ctrl+R)
//!     Last log:
//!         ready on http://localhost:3000
//! ```
//!
//! The dot is green while running, gray when completed, red on failure;
//! colour is only used when asked for (a terminal), never in MCP text.

use crate::model::{JobInfo, JobStatus, StopCause};

/// Most lines of "Last log" shown on a card.
pub const CARD_LOG_LINES: usize = 2;

/// A job's traffic-light colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Light {
    Green,
    Gray,
    Red,
}

pub fn light(status: &JobStatus) -> Light {
    if status.is_active() {
        Light::Green
    } else if status.is_failure() {
        Light::Red
    } else {
        Light::Gray
    }
}

/// Status words for the card: `running`, `failed (code 1)`, `killed by user`, …
pub fn status_text(info: &JobInfo) -> String {
    match &info.status {
        JobStatus::Exited { code: 0 } => "completed (code 0)".into(),
        JobStatus::Exited { code } => format!("failed (code {code})"),
        JobStatus::Signaled { signal } => format!("failed (signal {signal})"),
        JobStatus::Killed {
            ended_by,
            reason: StopCause::Oom,
            ..
        } => {
            format!("failed (out of memory, ended by {ended_by})")
        }
        JobStatus::Killed { ended_by, .. } => format!("killed by {ended_by}"),
        JobStatus::TimedOut => "failed (timed out)".into(),
        JobStatus::Lost { .. } => "lost".into(),
        JobStatus::StartFailed { .. } => "failed to start".into(),
        JobStatus::Starting => match (&info.pulling, &info.building) {
            (Some(p), _) => format!("starting (pulling {}%)", p.percent()),
            (None, Some(b)) if b.steps > 0 => format!("starting (building step {}/{})", b.step, b.steps),
            (None, Some(_)) => "starting (building)".into(),
            (None, None) => "starting".into(),
        },
        JobStatus::Queued => match info.queue_position {
            Some(p) => format!("queued (#{p} in line)"),
            None => "queued".into(),
        },
        other => other.name().into(),
    }
}

/// `127.0.0.1:49153→3000, …` for a container job; a host job has no
/// mapping: where it listens (`0.0.0.0:8000` as seen bound while it runs,
/// else `port 8000`).
pub fn ports_text(info: &JobInfo) -> String {
    let host = info.runner == Some(crate::model::RunnerKind::Host);
    info.ports
        .iter()
        .map(|m| match (host, &m.listen) {
            (true, Some(listen)) => listen.clone(),
            (true, None) => format!("port {}", m.host_port),
            (false, _) => format!("{}:{}→{}", m.host_ip, m.host_port, m.port),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `user 1000:1000 · cpus 2 · memory 2 GiB · pids 512 · network …` for a
/// container job (what the container was made with; `user root` when it
/// runs as root), `None` for host jobs.
pub fn sandbox_text(info: &JobInfo) -> Option<String> {
    let l = &info.limits;
    let user = l.user.as_ref()?;
    let mut parts = vec![format!("user {user}")];
    if let Some(c) = l.cpus {
        parts.push(format!("cpus {c}"));
    }
    if let Some(m) = l.memory {
        parts.push(format!("memory {}", bytes(m)));
    }
    if let Some(p) = l.pids {
        parts.push(format!("pids {p}"));
    }
    if let Some(n) = &l.network {
        parts.push(format!("network {n}"));
    }
    if let Some(e) = &l.egress {
        parts.push(format!("egress {e}"));
    }
    // The default is said by its absence; a second kernel is named.
    if let Some(i) = l.isolation.as_deref().filter(|i| *i != "container") {
        parts.push(i.to_string());
    }
    if info.spec.engine == Some(crate::model::EngineAccess::Scoped) {
        parts.push("engine scoped".into());
    }
    // Taken from a spare (`warm_pool`): its name and labels are the spare's.
    if l.warm {
        parts.push("warm start".into());
    }
    Some(parts.join(" · "))
}

/// `layer job-4 (default (write)) · 3 files changed …`: how the job writes
/// its workspace and why; in `layer` mode, what its layer holds once it ended.
pub fn writes_text(info: &JobInfo) -> Option<String> {
    let w = info.writes.as_ref()?;
    let mut text = match &w.layer {
        Some(layer) => format!("layer {layer} ({})", w.why),
        None => format!("{} ({})", w.mode, w.why),
    };
    match (w.sentence(), &w.changed) {
        (Some(s), _) => text += &format!(" · {s}"),
        (None, Some(_)) => text += " · nothing changed",
        (None, None) => {}
    }
    Some(text)
}

/// A size as every face prints it: `900 B`, `512 MiB`, `1.5 GiB` (the
/// one formatter of sizes: cards, `ps`, the TUI, MCP answers, `doctor`).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v.fract() < 0.05 || v >= 100.0 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// The job's workspace in a few characters: `~/src/app`, `…/deep/app`, `-`.
pub fn workspace_short(info: &JobInfo) -> String {
    const WIDTH: usize = 18;
    let Some(ws) = &info.workspace else {
        return "-".into();
    };
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let text = match home.as_deref().and_then(|h| ws.strip_prefix(h).ok()) {
        Some(rest) if rest.as_os_str().is_empty() => "~".to_string(),
        Some(rest) => format!("~/{}", rest.display()),
        None => ws.display().to_string(),
    };
    let n = text.chars().count();
    if n <= WIDTH {
        return text;
    }
    let tail: String = text.chars().skip(n - (WIDTH - 1)).collect();
    format!("…{tail}")
}

/// Render a card. `snippet` is the job's recent output; `color` adds ANSI colour.
/// Text a job or its caller controls (label, command, paths, image, reason,
/// output) is shown inert (`crate::inert`): escapes, not terminal commands.
pub fn render(info: &JobInfo, snippet: &str, color: bool) -> String {
    use crate::inert::visible as v;
    let mut out = render_head(info, color);
    out += "    Last log:\n";
    let lines: Vec<&str> = snippet.lines().collect();
    if lines.is_empty() {
        out += "        (no output)\n";
    }
    for l in lines.iter().skip(lines.len().saturating_sub(CARD_LOG_LINES)) {
        let l = v(l);
        let l = if color {
            format!("\x1b[2m{l}\x1b[0m")
        } else {
            l.into_owned()
        };
        out += &format!("        {l}\n");
    }
    out
}

/// A card without its "Last log": for an answer that shows the output
/// itself right after (the MCP promotion answer), so no line comes twice.
pub fn render_head(info: &JobInfo, color: bool) -> String {
    use crate::inert::visible as v;
    let (dot, head) = match light(&info.status) {
        Light::Green => ("\x1b[32m●\x1b[0m", "Shell"),
        Light::Gray => ("\x1b[90m●\x1b[0m", "Shell"),
        Light::Red => ("\x1b[31m●\x1b[0m", "Failed"),
    };
    let dot = if color { dot } else { "●" };
    let mut status = vec![status_text(info), info.id.to_string()];
    if let Some(r) = info.runner {
        // A job `auto` sent to the host because no engine answered says so.
        status.push(match (&info.runner_note, r) {
            (Some(_), crate::model::RunnerKind::Host) => "host (no engine)".to_string(),
            _ => r.to_string(),
        });
    }
    let ports = ports_text(info);
    if !ports.is_empty() {
        status.push(ports);
    }
    let mut out = format!("{dot} {head} ({})\n", v(&info.label));
    out += &format!("  └ Status: {}\n", v(&status.join(" · ")));
    out += &format!("    Command: {}\n", v(&info.command));
    if let Some(ws) = &info.workspace {
        out += &format!("    Workspace: {}\n", v(&ws.display().to_string()));
    }
    if let Some(node) = &info.node {
        out += &format!("    Node: {}\n", v(node));
    }
    if let Some(sandbox) = sandbox_text(info) {
        out += &format!("    Sandbox: {}\n", v(&sandbox));
    }
    if let Some(w) = writes_text(info) {
        out += &format!("    Writes: {}\n", v(&w));
    }
    // What the job did not get as asked, and what a remote engine changed
    // (its workspace a copy, its egress): said, not hidden in the JSON.
    for note in &info.limits.not_enforced {
        out += &format!("    Note: {}\n", v(note));
    }
    if !info.children.is_empty() {
        out += &format!("    Children: {}\n", info.children.len());
        for c in &info.children {
            out += &format!("        {}\n", v(&c.summary()));
        }
    }
    if let Some(n @ 1..) = info.setid_cleared {
        let files = if n == 1 { "file" } else { "files" };
        out += &format!("    Cleared: set-uid/set-gid bits of {n} {files} the job left in the workspace\n");
    }
    if let Some(image) = &info.image {
        let pulled = match (image.pull_ms, image.build_ms) {
            (Some(ms), _) => format!("; pulled in {:.1}s", ms as f64 / 1000.0),
            (None, Some(ms)) => format!("; built in {:.1}s", ms as f64 / 1000.0),
            (None, None) => String::new(),
        };
        out += &format!("    Image: {} ({}{pulled})\n", v(&image.name), v(&image.why));
    }
    let reason = info
        .reason
        .clone()
        .or_else(|| info.promotion_reason.clone())
        .or_else(|| info.status.is_active().then(|| info.start_mode.to_string()));
    if let Some(r) = reason {
        out += &format!("    Reason: {}\n", v(&r));
    }
    if info.watch_hits_dropped > 0 {
        out += &format!(
            "    Watch: {} hits not stored (over {}/s; see `watch_dropped` events)\n",
            info.watch_hits_dropped,
            crate::watch::HITS_PER_SEC
        );
    }
    if let Some(note) = &info.store_note {
        out += &format!("    Store: {note}\n");
    }
    out
}

/// `mm:ss`, or `h:mm:ss` from an hour on: the one clock (`model/words.rs`).
pub use crate::model::clock;

/// Keep the head and tail of `text` within `max` bytes, saying what was cut.
/// Returns the text and how many bytes were cut.
pub fn cap_head_tail(text: &str, max: usize) -> (String, usize) {
    if text.len() <= max {
        return (text.to_string(), 0);
    }
    let half = max / 2;
    let mut head_end = half;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - half;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let cut = tail_start - head_end;
    (
        format!(
            "{}\n… [{cut} bytes cut; read the rest by seq or from the log files] …\n{}",
            &text[..head_end],
            &text[tail_start..]
        ),
        cut,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_cards_show_user_limits_and_network() {
        use crate::model::{JobId, JobSpec, LogPaths, RunnerKind, StartMode};
        let spec = JobSpec::shell("true");
        let mut info = JobInfo {
            id: JobId::from_number(1),
            label: "true".into(),
            command: "true".into(),
            runner: Some(RunnerKind::Docker),
            exit_code: None,
            ended_by: None,
            reason: None,
            status: JobStatus::Running,
            start_mode: StartMode::Background,
            created_at: chrono::Utc::now(),
            started_at: None,
            ended_at: None,
            promotion_reason: None,
            pid: None,
            container_id: None,
            node: None,
            ports: Vec::new(),
            limits: Default::default(),
            usage: None,
            logs: LogPaths {
                stdout: "/s/o".into(),
                stderr: "/s/e".into(),
            },
            spec,
            last_seq: 0,
            queue_position: None,
            image: None,
            pulling: None,
            building: None,
            setid_cleared: None,
            store_note: None,
            runner_note: None,
            workspace: None,
            project_note: None,
            recovered: false,
            watch_hits_dropped: 0,
            children: Vec::new(),
            writes: None,
        };
        assert_eq!(sandbox_text(&info), None, "host jobs have no sandbox line");
        info.limits = crate::model::AppliedLimits {
            cpus: Some(2.0),
            memory: Some(2 << 30),
            pids: Some(512),
            user: Some("root".into()),
            network: Some("none".into()),
            egress: Some("none".into()),
            isolation: None,
            warm: false,
            not_enforced: vec![],
        };
        let card = render(&info, "", false);
        assert!(
            card.contains(
                "    Sandbox: user root · cpus 2 · memory 2 GiB · pids 512 · network none · egress none\n"
            ),
            "{card}"
        );
        info.limits.warm = true;
        assert!(
            sandbox_text(&info).is_some_and(|t| t.ends_with("egress none · warm start")),
            "{:?}",
            sandbox_text(&info)
        );
        assert_eq!(bytes(64 << 20), "64 MiB");
        assert_eq!(bytes(3 << 29), "1.5 GiB");
    }

    #[test]
    fn caps_keep_head_and_tail() {
        let text = format!("{}{}", "a".repeat(100), "b".repeat(100));
        let (capped, cut) = cap_head_tail(&text, 50);
        assert_eq!(cut, 150);
        assert!(capped.starts_with(&"a".repeat(25)));
        assert!(capped.ends_with(&"b".repeat(25)));
        assert!(capped.contains("150 bytes cut"));
        assert_eq!(cap_head_tail("short", 50), ("short".to_string(), 0));
    }
}
