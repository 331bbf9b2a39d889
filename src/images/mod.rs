//! Which image a container job runs in, and the words around it: the pull
//! policy (`pull = "missing" | "always" | "never"`), the choice of image for
//! a job ([`choose_image`]: asked → project → `berth/dev` → `berth/sandbox`,
//! with the reason said on every card), the registry an image name points
//! at, and the fix a failed pull suggests. Talking to the engine (pulling,
//! checking what it has) is the Docker runner's (`runner/docker/pull.rs`);
//! everything here is plain data so it can be tested without one. Project
//! images built from a Dockerfile are `build.rs` (the `[image]` table, tags,
//! progress) and `context.rs` (the files sent, their hash).

pub mod beneath;
pub mod build;
pub mod context;
mod devcontainer;
mod digest;
pub mod dockerfile;

use crate::config::{Config, DEFAULT_IMAGE, Source};
use crate::error::{Error, Result};
use crate::model::JobSpec;

pub use crate::model::{BuildProgress, ImageChoice, ImageValue, ProjectBuild, PullPolicy, PullProgress};
pub use devcontainer::{
    DevImage, DevSettings, read_devcontainer, read_settings as devcontainer_settings,
    trust_allows as devcontainer_trust_allows,
};

/// The toolchain image `images/build.sh dev` builds from Debian packages.
pub const DEV_IMAGE: &str = "berth/dev:latest";

impl std::str::FromStr for PullPolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "missing" => Ok(PullPolicy::Missing),
            "always" => Ok(PullPolicy::Always),
            "never" => Ok(PullPolicy::Never),
            _ => Err(Error::InvalidValue {
                what: "pull",
                input: s.into(),
                message: "expected missing, always or never".into(),
            }),
        }
    }
}

/// What [`choose_image`] decided: an image by name, or a project image to
/// build (its tag depends on the context's hash, known once it is walked).
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    Image(ImageChoice),
    Build { build: ProjectBuild, why: String },
}

/// Where `project` names its image (`image` or `[image] dockerfile` in
/// berth.toml, env or a flag), if it does: then [`choose_image`] never
/// looks at `berth/dev`.
pub fn image_named_in(project: &Config) -> Option<&Source> {
    project
        .sources
        .get("image")
        .filter(|s| !matches!(s, Source::Default))
}

/// Pick the image for `spec` in `project` (the job's effective config, whose
/// `workspace` is the project root): the spec's own image, else the
/// project's (`image` or `[image] dockerfile` in berth.toml/env/flag, else
/// `.devcontainer`'s image or build), else `berth/dev` when the engine has it
/// (`dev_present`), else the sandbox.
///
/// A build asked for by a devcontainer.json the user has not trusted is
/// refused (`berth trust`); a `berth.toml` build that is not trusted never
/// gets here (`Config::load` left it out and the start was refused).
pub fn choose_image(spec: &JobSpec, project: &Config, dev_present: bool) -> Result<Choice> {
    let choice = |name: &str, why: String| {
        Choice::Image(ImageChoice {
            name: name.to_string(),
            why,
            ..Default::default()
        })
    };
    if let Some(image) = spec.image.as_deref() {
        return Ok(choice(image, "asked for by the job (--image)".into()));
    }
    if let Some(source) = image_named_in(project) {
        return Ok(match &project.image_build {
            Some(build) => Choice::Build {
                build: build.clone(),
                why: format!("[image] dockerfile in {source}"),
            },
            None => choice(&project.image, format!("image in {source}")),
        });
    }
    // A devcontainer.json berth would not read is said on the choice.
    let mut unread = String::new();
    match read_devcontainer(&project.workspace, &project.trusted) {
        Some((DevImage::Image(name), path)) => {
            return Ok(choice(&name, format!("image in {}", path.display())));
        }
        Some((DevImage::Build { trusted: false, .. }, path)) => {
            return Err(Error::Untrusted {
                file: path,
                key: "build.dockerfile",
                value: "(a dev container image build)".into(),
            });
        }
        Some((DevImage::Build { build, trusted: true }, path)) => {
            return Ok(Choice::Build {
                build,
                why: format!("build.dockerfile in {}", path.display()),
            });
        }
        Some((DevImage::Refused(why), path)) => {
            unread = format!("; {} was not read: {why}", path.display());
        }
        None => {}
    }
    if dev_present {
        return Ok(choice(
            DEV_IMAGE,
            format!("the project names no image and berth/dev (the toolchain image) is built{unread}"),
        ));
    }
    Ok(choice(
        DEFAULT_IMAGE,
        format!(
            "the project names no image and berth/dev is not built (images/build.sh dev); busybox only{unread}"
        ),
    ))
}

/// The registry an image name points at (`docker.io` when it names none).
pub fn registry_of(image: &str) -> String {
    match image.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => {
            first.into()
        }
        _ => "docker.io".into(),
    }
}

/// The fix a failed pull suggests, from the engine's reason: words, as a
/// pull's failure mostly comes inside its stream (no status), and Docker
/// Hub answers a missing image and a denied one with the same 404.
pub fn pull_hint(image: &str, reason: &str) -> String {
    let registry = registry_of(image);
    let r = reason.to_ascii_lowercase();
    if r.contains("unauthorized") || r.contains("denied") || r.contains("authentication required") {
        format!("log in to {registry} (docker login {registry}), or check the image name")
    } else if r.contains("not found") || r.contains("manifest unknown") || r.contains("does not exist") {
        format!("check the image name and tag (is `{image}` on {registry}?)")
    } else if [
        "dial tcp",
        "connection refused",
        "no such host",
        "timeout",
        "network is unreachable",
        "tls",
        "eof",
    ]
    .iter()
    .any(|w| r.contains(w))
    {
        format!(
            "check that this machine reaches {registry} (network, proxy, DNS), or build the image locally"
        )
    } else {
        format!("check the image name, your login to {registry} and the network")
    }
}

#[cfg(test)]
mod tests;
