//! A `layer` job's changes, back from a swarm node.
//!
//! berth reaches a task's node only through the swarm's manager, and of
//! what the manager relays only the service log crosses from the node: the
//! archive and exec calls are the node engine's own. So the task's last
//! step (`spec.rs`) packs the workspace once the job ended and writes the
//! archive on stdout as numbered base64 lines behind a marker of the job's
//! own (`MARKER<N> <76 characters>`), then `MARKER end RC` with tar's exit
//! status: a line missing from the log breaks the count, not the archive.
//! berth takes those lines out of the job's output as they come
//! ([`Frame::split`]); once the job ended, the final read of the log
//! decodes them, and the difference from the upload is laid into the
//! layer as for a remote engine (`runner/docker/remote_layer.rs`).
//!
//! The job can read its marker and write such lines itself: that gives it
//! nothing it could not write into its own layer anyway (the archive's
//! names are checked, and a layer reaches the checkout only through
//! `apply`). A frame that lacks its end, whose tar failed or that does not
//! decode is not applied at all (a cut archive would read as deletions),
//! and the job's record says its changes were lost, and why.

use memchr::memmem::Finder;

/// Most bytes of the archive a swarm job sends back (held in memory, and
/// a third more on the log).
pub const MAX_BYTES: usize = 64 << 20;

/// The lines of a `layer` job's workspace archive in its stdout.
pub struct Frame {
    marker: Finder<'static>,
    /// The base64 text the final read took so far.
    text: Vec<u8>,
    /// tar's exit status, from the frame's last line.
    end: Option<i32>,
    /// Lines taken, and whether one came out of its turn.
    lines: u64,
    broken: bool,
    /// Keep the text: only the final read's is kept (the follow's would be
    /// read again).
    collect: bool,
    over: bool,
}

impl Frame {
    pub fn new(marker: &str) -> Frame {
        Frame {
            marker: Finder::new(marker.as_bytes()).into_owned(),
            text: Vec::new(),
            end: None,
            lines: 0,
            broken: false,
            collect: false,
            over: false,
        }
    }

    /// A read of the log from its start: what was taken goes; `collect`
    /// keeps the frame's text this time.
    pub fn restart(&mut self, collect: bool) {
        self.text = Vec::new();
        self.end = None;
        self.lines = 0;
        self.broken = false;
        self.over = false;
        self.collect = collect;
    }

    /// Hand what of `msg` is the job's own output to `out`, the frame's
    /// lines taken out (a line the job left without its newline ends where
    /// the marker starts).
    pub fn split(&mut self, msg: &[u8], mut out: impl FnMut(&[u8])) {
        let mut rest = msg;
        while let Some(at) = self.marker.find(rest) {
            if at > 0 {
                out(&rest[..at]);
            }
            let after = &rest[at + self.marker.needle().len()..];
            let (line, next) = match memchr::memchr(b'\n', after) {
                Some(nl) => (&after[..nl], &after[nl + 1..]),
                None => (after, &[][..]),
            };
            self.take(line);
            rest = next;
        }
        if !rest.is_empty() {
            out(rest);
        }
    }

    fn take(&mut self, line: &[u8]) {
        if let Some(rc) = line.strip_prefix(b"end ") {
            let rc = std::str::from_utf8(rc).ok().and_then(|r| r.trim().parse().ok());
            self.end = Some(rc.unwrap_or(-1));
            return;
        }
        if !self.collect || self.over {
            return;
        }
        let (n, line) = line.split_at(memchr::memchr(b' ', line).unwrap_or(0));
        self.lines += 1;
        if std::str::from_utf8(n).ok().and_then(|n| n.parse().ok()) != Some(self.lines) {
            self.broken = true;
        }
        let line = line.strip_prefix(b" ").unwrap_or(line);
        if self.text.len() + line.len() > MAX_BYTES.div_ceil(3) * 4 {
            self.over = true;
            self.text = Vec::new();
            return;
        }
        self.text.extend_from_slice(line);
    }

    /// The archive the frame carried, or why there is none.
    pub fn archive(self) -> Result<Vec<u8>, String> {
        use base64::Engine as _;
        if self.over {
            return Err(format!(
                "its workspace packs to more than the {} MiB a swarm job sends back",
                MAX_BYTES >> 20
            ));
        }
        match self.end {
            Some(0) => {}
            None => {
                return Err("the task ended before it sent its workspace back (killed when its stop grace ran out, or its image lacks tar, base64 or sed)".into());
            }
            Some(rc) => {
                return Err(format!(
                    "packing its workspace on the node failed (tar exited {rc})"
                ));
            }
        }
        if self.broken {
            return Err("lines of its workspace's archive were missing from the service log".into());
        }
        base64::engine::general_purpose::STANDARD
            .decode(&self.text)
            .map_err(|e| format!("its workspace came back damaged ({e})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    const MARK: &str = "berth-layer-job-7-1f:";

    /// `archive` as the task's last step writes it: base64 in 76-character
    /// lines behind the marker, then the end line.
    fn framed(archive: &[u8], rc: i32) -> Vec<String> {
        let text = base64::engine::general_purpose::STANDARD.encode(archive);
        let mut lines: Vec<String> = text
            .as_bytes()
            .chunks(76)
            .enumerate()
            .map(|(i, c)| format!("{MARK}{} {}\n", i + 1, std::str::from_utf8(c).unwrap()))
            .collect();
        lines.push(format!("{MARK}end {rc}\n"));
        lines
    }

    /// Feed `messages` through a final read; the job's output and the archive.
    fn read(messages: &[String]) -> (String, Result<Vec<u8>, String>) {
        let mut frame = Frame::new(MARK);
        let mut out = Vec::new();
        // What the follow took is read again by the final read.
        for m in messages {
            frame.split(m.as_bytes(), |b| out.extend_from_slice(b));
        }
        out.clear();
        frame.restart(true);
        for m in messages {
            frame.split(m.as_bytes(), |b| out.extend_from_slice(b));
        }
        (String::from_utf8(out).unwrap(), frame.archive())
    }

    #[test]
    fn the_archive_comes_out_of_the_output_whole_and_the_output_stays_the_jobs() {
        let archive: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 256) as u8).collect();
        let mut messages = vec!["building\n".to_string(), "no newline".to_string()];
        let mut frame = framed(&archive, 0);
        // The job's last line had no newline: the marker follows it on
        // the same log line.
        frame[0] = format!("no newline{}", frame[0]);
        messages.pop();
        messages.extend(frame.iter().take(10).cloned());
        // A process the job left behind still writes, between frame lines.
        messages.push("late line\n".into());
        messages.extend(frame.iter().skip(10).cloned());
        let (out, got) = read(&messages);
        assert_eq!(out, "building\nno newlinelate line\n");
        assert_eq!(got.unwrap(), archive);
    }

    #[test]
    fn a_frame_without_its_end_a_failed_tar_or_damage_is_never_an_archive() {
        let archive = vec![1u8; 3000];
        let mut cut = framed(&archive, 0);
        cut.pop();
        assert!(read(&cut).1.unwrap_err().contains("ended before it sent"));
        let failed = framed(&archive, 2);
        assert!(read(&failed).1.unwrap_err().contains("tar exited 2"));
        let mut damaged = framed(&archive, 0);
        damaged[3] = format!("{MARK}4 !!not base64!!\n");
        assert!(read(&damaged).1.unwrap_err().contains("damaged"));
        let mut short = framed(&archive, 0);
        short.remove(2);
        assert!(read(&short).1.unwrap_err().contains("missing"));
    }

    #[test]
    fn an_archive_over_the_bound_is_dropped_not_held() {
        let mut frame = Frame::new(MARK);
        frame.restart(true);
        for n in 1..=(MAX_BYTES / 57 + 2) {
            let line = format!("{MARK}{n} {}\n", "A".repeat(76));
            frame.split(line.as_bytes(), |_| {});
        }
        assert!(frame.text.len() <= MAX_BYTES.div_ceil(3) * 4);
        frame.split(format!("{MARK}end 0\n").as_bytes(), |_| {});
        assert!(frame.archive().unwrap_err().contains("64 MiB"));
    }

    /// The task's last step (`spec.rs`), run here by `/bin/sh` with the
    /// workspace's parts in `parts`: the job's output, its exit code, and
    /// the frame, as the service log would carry them.
    fn run_step(dir: &std::path::Path, job: &str, stop_after: Option<&str>) -> (i32, Vec<u8>) {
        use std::io::BufRead;
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        let step = super::super::spec::UNPACK_AND_SEND
            .replace("/run/berth-workspace", dir.join("parts").to_str().unwrap());
        let ws = dir.join("ws");
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", &step, "berth-workspace"])
            .args([&ws, &ws])
            .args([MARK, "sh", "-c", job])
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        // A step that does not end the job on a stop would hang the test:
        // its whole group is killed after a minute (the test then fails).
        let (done, guard) = std::sync::mpsc::channel::<()>();
        let group = nix::unistd::Pid::from_raw(-(child.id() as i32));
        std::thread::spawn(move || {
            if guard.recv_timeout(std::time::Duration::from_secs(60)).is_err() {
                let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
            }
        });
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut out = Vec::new();
        if let Some(line) = stop_after {
            // The job said it runs: the stop comes to the step (PID 1's
            // child), as the node's stop signal does.
            while !out.ends_with(format!("{line}\n").as_bytes()) {
                assert_ne!(stdout.read_until(b'\n', &mut out).unwrap(), 0, "no `{line}`");
            }
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            )
            .unwrap();
        }
        std::io::Read::read_to_end(&mut stdout, &mut out).unwrap();
        let status = child.wait().unwrap();
        let _ = done.send(());
        (status.code().unwrap_or(128 + status.signal().unwrap_or(0)), out)
    }

    #[test]
    fn the_tasks_last_step_sends_back_what_the_job_changed_and_keeps_its_status() {
        use crate::layers::tree::{Kind, Node};
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("parts")).unwrap();
        let mut b = tar::Builder::new(Vec::new());
        for (name, text) in [("a.txt", "one"), ("gone.txt", "x"), ("keep.txt", "k")] {
            let mut h = tar::Header::new_gnu();
            h.set_mode(0o644);
            h.set_size(text.len() as u64);
            b.append_data(&mut h, name, text.as_bytes()).unwrap();
        }
        let upload = b.into_inner().unwrap();
        // Cut in two, as configs are.
        std::fs::write(tmp.path().join("parts/0000"), &upload[..700]).unwrap();
        std::fs::write(tmp.path().join("parts/0001"), &upload[700..]).unwrap();
        for (job, stop, code) in [
            (
                "echo two > a.txt; rm gone.txt; mkdir out; echo r > out/r.txt; echo job-out; exit 3",
                None,
                3,
            ),
            (
                "trap 'echo two > a.txt; rm gone.txt; mkdir out; echo r > out/r.txt; echo job-out; exit 5' TERM; echo up; while :; do sleep 0.1; done",
                Some("up"),
                5,
            ),
        ] {
            let ws = tmp.path().join("ws");
            let upper = tmp.path().join("upper");
            for d in [&ws, &upper] {
                let _ = std::fs::remove_dir_all(d);
                std::fs::create_dir(d).unwrap();
            }
            let (got, log) = run_step(tmp.path(), job, stop);
            assert_eq!(got, code, "the job's status: {}", String::from_utf8_lossy(&log));
            let mut frame = Frame::new(MARK);
            frame.restart(true);
            let mut out = Vec::new();
            for line in log.split_inclusive(|b| *b == b'\n') {
                frame.split(line, |b| out.extend_from_slice(b));
            }
            let want = if stop.is_some() {
                "up\njob-out\n"
            } else {
                "job-out\n"
            };
            assert_eq!(String::from_utf8_lossy(&out), want);
            let archive = frame.archive().unwrap();
            let n = crate::runner::docker::remote_layer::read_back(
                (&upload, std::path::Path::new("")),
                &archive,
                &ws,
                &upper,
            )
            .unwrap();
            assert_eq!(n, 4, "a.txt, out, out/r.txt, the whiteout of gone.txt");
            assert_eq!(std::fs::read_to_string(upper.join("a.txt")).unwrap(), "two\n");
            assert_eq!(std::fs::read_to_string(upper.join("out/r.txt")).unwrap(), "r\n");
            assert!(!upper.join("keep.txt").exists());
            let gone = Node::open(&upper)
                .unwrap()
                .stat("gone.txt".as_ref())
                .unwrap()
                .unwrap();
            assert_eq!(gone.kind, Kind::Whiteout);
        }
    }
}
