//! The `copy_out` answer: what a job's archive holds, said for a model. A
//! single text file is its content (at most [`MAX_TEXT`], the rest cut with
//! a note); anything else is a list of entries and sizes, with the CLI
//! command that copies them. Control characters are made visible like all
//! job output an agent reads (`crate::inert`).

/// Most bytes of a file's text put in an answer.
pub const MAX_TEXT: usize = 64 << 10;
/// Most entries listed.
const MAX_ENTRIES: usize = 200;

/// The answer for `path`'s archive `tar`.
pub fn describe(path: &str, tar: &[u8]) -> String {
    let mut entries = Vec::new();
    let mut single: Option<Vec<u8>> = None;
    let mut archive = tar::Archive::new(tar);
    let Ok(iter) = archive.entries() else {
        return format!("{path}: the engine's archive could not be read\n");
    };
    for (i, e) in iter.enumerate() {
        let Ok(mut e) = e else { break };
        let name = e.path().map(|p| p.display().to_string()).unwrap_or_default();
        let size = e.header().size().unwrap_or(0);
        let file = e.header().entry_type().is_file();
        if i == 0 && file {
            let mut text = Vec::new();
            let _ =
                std::io::Read::read_to_end(&mut std::io::Read::take(&mut e, MAX_TEXT as u64 + 1), &mut text);
            single = Some(text);
        } else {
            single = None;
        }
        entries.push((name, size, file));
    }
    match (single, entries.len()) {
        (Some(text), 1) if std::str::from_utf8(&text[..text.len().min(MAX_TEXT)]).is_ok() => {
            let cut = text.len() > MAX_TEXT;
            let shown = String::from_utf8_lossy(&text[..text.len().min(MAX_TEXT)]).into_owned();
            let mut out = format!(
                "{path} ({} bytes):\n{}",
                entries[0].1,
                crate::inert::visible_lines(&shown)
            );
            if !out.ends_with('\n') {
                out.push('\n');
            }
            if cut {
                out += &format!(
                    "(cut at {} KiB: `berth cp` copies the whole file)\n",
                    MAX_TEXT >> 10
                );
            }
            out
        }
        _ => {
            let mut out = format!("{path}: {} entries\n", entries.len());
            for (name, size, file) in entries.iter().take(MAX_ENTRIES) {
                let kind = if *file {
                    format!("{size} bytes")
                } else {
                    "dir/link".into()
                };
                out += &format!("  {} ({kind})\n", crate::inert::visible(name));
            }
            if entries.len() > MAX_ENTRIES {
                out += &format!("  … {} more\n", entries.len() - MAX_ENTRIES);
            }
            out += "Copy them with `berth cp JOB:PATH DEST`.\n";
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, data) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            b.append_data(&mut h, name, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn a_text_file_is_its_content_and_the_rest_a_listing() {
        let one = describe("report.xml", &tar_of(&[("report.xml", b"<ok/>\n")]));
        assert_eq!(one, "report.xml (6 bytes):\n<ok/>\n");
        let big = vec![b'a'; MAX_TEXT + 10];
        assert!(describe("big", &tar_of(&[("big", &big)])).contains("cut at 64 KiB"));
        let bin = describe("b", &tar_of(&[("b", &[0xff, 0xfe, 0])]));
        assert!(bin.contains("1 entries") && bin.contains("berth cp"), "{bin}");
        let two = describe("out", &tar_of(&[("out/a", b"1"), ("out/b", b"22")]));
        assert!(
            two.contains("out/a (1 bytes)") && two.contains("out/b (2 bytes)"),
            "{two}"
        );
        let escape = describe("e", &tar_of(&[("e", b"\x1b]0;title\x07 text\n")]));
        assert!(!escape.contains('\x1b'), "{escape:?}");
    }
}
