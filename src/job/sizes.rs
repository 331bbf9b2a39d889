//! How big the parts of a job's record may be. A queued job's record is
//! held in memory and every list answer carries it, so what a caller can
//! put in one is bounded (the red team's 2,000 queued jobs with 100 KB
//! labels held 712 MiB): a label, the environment, names, ports. Watch
//! patterns are bounded in `crate::watch`; the command itself by the
//! filter's 64 KiB (`crate::safety`) and the API's 1 MiB body.

use crate::error::{Error, Result};
use crate::model::JobSpec;

/// Longest `label`, in bytes.
pub const MAX_LABEL_BYTES: usize = 256;
/// Most variables in a job's `env`.
pub const MAX_ENV_VARS: usize = 256;
/// Longest variable name in a job's `env`, in bytes.
pub const MAX_ENV_NAME_BYTES: usize = 256;
/// Longest variable value in a job's `env`, in bytes (a token or a path
/// list fits; a file's contents belong in the workspace).
pub const MAX_ENV_VALUE_BYTES: usize = 32 << 10;
/// Longest `image` name or `client_ref`, in bytes.
pub const MAX_NAME_BYTES: usize = 512;
/// Most published ports of one job.
pub const MAX_PORTS: usize = 64;
/// Most readiness conditions of one job.
pub const MAX_READY: usize = 16;
/// Longest reason a client gives for stopping a job (kept on its record).
pub const MAX_REASON_BYTES: usize = 1024;

impl JobSpec {
    /// What a job's record keeps is bounded: a queued job is held in memory
    /// and every list answer carries its record.
    pub(super) fn validate_sizes(&self) -> Result<()> {
        let too_big = |what: &'static str, text: &str, max: usize, fix: &str| Error::InvalidValue {
            what,
            input: format!(
                "{}… ({} bytes)",
                text.chars().take(24).collect::<String>(),
                text.len()
            ),
            message: format!("may be at most {max} bytes; {fix}"),
        };
        if let Some(label) = self.label.as_deref().filter(|l| l.len() > MAX_LABEL_BYTES) {
            return Err(too_big("label", label, MAX_LABEL_BYTES, "use a shorter name"));
        }
        if self.env.len() > MAX_ENV_VARS {
            return Err(Error::InvalidValue {
                what: "env",
                input: format!("{} variables", self.env.len()),
                message: format!("a job may set at most {MAX_ENV_VARS} variables"),
            });
        }
        for (name, value) in &self.env {
            if name.len() > MAX_ENV_NAME_BYTES {
                return Err(too_big(
                    "env name",
                    name,
                    MAX_ENV_NAME_BYTES,
                    "use a shorter name",
                ));
            }
            if value.len() > MAX_ENV_VALUE_BYTES {
                return Err(Error::InvalidValue {
                    what: "env value",
                    input: format!("{name}=… ({} bytes)", value.len()),
                    message: format!(
                        "may be at most {MAX_ENV_VALUE_BYTES} bytes; pass large data in a file in the workspace instead"
                    ),
                });
            }
        }
        if self.image.as_deref().is_some_and(|i| i.trim().is_empty()) {
            return Err(Error::InvalidValue {
                what: "image",
                input: String::new(),
                message:
                    "is empty: name an image (e.g. berth/sandbox:latest) or leave it out for the project's"
                        .into(),
            });
        }
        for (what, text) in [("client_ref", &self.client_ref), ("image", &self.image)] {
            if let Some(t) = text.as_deref().filter(|t| t.len() > MAX_NAME_BYTES) {
                return Err(too_big(what, t, MAX_NAME_BYTES, "use a shorter one"));
            }
        }
        if self.ready.len() > MAX_READY {
            return Err(Error::InvalidValue {
                what: "ready",
                input: format!("{} conditions", self.ready.len()),
                message: format!("a job may have at most {MAX_READY} readiness conditions"),
            });
        }
        if self.ports.len() > MAX_PORTS {
            return Err(Error::InvalidValue {
                what: "ports",
                input: format!("{} ports", self.ports.len()),
                message: format!("a job may publish at most {MAX_PORTS} ports"),
            });
        }
        Ok(())
    }
}

/// A client's reason for stopping a job: kept on the record, so bounded.
pub fn check_reason(reason: Option<&str>) -> Result<()> {
    match reason {
        Some(r) if r.len() > MAX_REASON_BYTES => Err(Error::InvalidValue {
            what: "reason",
            input: format!("{}… ({} bytes)", r.chars().take(24).collect::<String>(), r.len()),
            message: format!("may be at most {MAX_REASON_BYTES} bytes"),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record's parts are bounded: a label of 256 bytes passes, 257 (or
    /// the red team's 100 KB) is refused naming the field and the bound;
    /// so are too many variables, a long name or value, and too many ports.
    #[test]
    fn spec_sizes_are_bounded() {
        let with = |f: &dyn Fn(&mut JobSpec)| {
            let mut s = JobSpec::argv(["true"]);
            f(&mut s);
            s.validate()
        };
        assert!(with(&|s| s.label = Some("x".repeat(MAX_LABEL_BYTES))).is_ok());
        for n in [MAX_LABEL_BYTES + 1, 100_000] {
            let e = with(&|s| s.label = Some("x".repeat(n))).unwrap_err().to_string();
            assert!(
                e.contains("invalid label") && e.contains("at most 256 bytes"),
                "{e}"
            );
            assert!(e.len() < 200, "one short line: {e}");
        }
        let e = with(&|s| {
            s.env
                .insert("TOKEN".into(), "v".repeat(MAX_ENV_VALUE_BYTES + 1))
                .map_or((), drop)
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("TOKEN=") && e.contains("32768 bytes"), "{e}");
        assert!(
            with(&|s| s
                .env
                .insert("TOKEN".into(), "v".repeat(MAX_ENV_VALUE_BYTES))
                .map_or((), drop))
            .is_ok()
        );
        let e = with(&|s| {
            s.env = (0..=MAX_ENV_VARS)
                .map(|i| (format!("V{i}"), "1".into()))
                .collect();
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("at most 256 variables"), "{e}");
        let e = with(&|s| s.env.insert("N".repeat(300), "1".into()).map_or((), drop))
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid env name"), "{e}");
        let e = with(&|s| s.ports = (1..=65).map(|p| format!("{p}").parse().unwrap()).collect())
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most 64 ports"), "{e}");
        let e = with(&|s| s.ready = vec![crate::model::ReadyCondition::Port(80); 17])
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most 16 readiness conditions"), "{e}");
        assert!(check_reason(Some(&"r".repeat(MAX_REASON_BYTES))).is_ok());
        let e = check_reason(Some(&"r".repeat(5000))).unwrap_err().to_string();
        assert!(
            e.contains("invalid reason") && e.contains("at most 1024 bytes"),
            "{e}"
        );
        let e = with(&|s| s.watch = (0..33).map(|i| format!("w{i}")).collect())
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most 32 watch patterns"), "{e}");
    }
}
