//! Getting a job's image onto the engine: the pull policy, a pull with no
//! artificial limit but `pull_timeout`, progress folded from the engine's
//! per-layer stream into one [`PullProgress`] handed out at most a few times
//! a second, and errors that name the image, the registry and the engine's
//! reason with the fix it suggests. Dropping the future cancels the pull:
//! the request's connection closes and the engine stops fetching.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::DockerClient;
use bollard::models::CreateImageInfo;
use bollard::query_parameters::CreateImageOptions;

use super::throttle::Throttle;
use crate::error::{Error, Result};
use crate::images::{PullPolicy, PullProgress, pull_hint, registry_of};

/// Where progress goes (the manager records it and emits `pulling` events).
pub type ProgressFn = Arc<dyn Fn(PullProgress) + Send + Sync>;

/// The images this manager has seen on its engine (inspected, pulled), so
/// that the next job of the same image skips the look: one engine call
/// fewer on every start. Only ever a hint: an image removed behind berth's
/// back (`docker rmi`) fails the create with "no such image", and the
/// launch forgets it here, makes it present again as the job's policy says
/// and creates once more (`launch/attempts.rs`), as if it had looked.
#[derive(Default)]
pub struct Present(std::sync::Mutex<std::collections::HashSet<String>>);

/// More names than any project uses; past it the set starts over.
const MOST_PRESENT: usize = 256;

impl Present {
    pub fn knows(&self, image: &str) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).contains(image)
    }

    pub fn saw(&self, image: &str) {
        let mut set = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if set.len() >= MOST_PRESENT {
            set.clear();
        }
        set.insert(image.to_string());
    }

    pub fn forget(&self, image: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(image);
    }
}

/// Make `image` present as `policy` says. `Some(ms)` when it was pulled.
/// `seen`: the caller has just found it present (no second look).
pub(super) async fn ensure(
    docker: &DockerClient,
    image: &str,
    seen: bool,
    policy: PullPolicy,
    limit: Duration,
    progress: &ProgressFn,
) -> Result<Option<u64>> {
    let present = seen
        || match docker.inspect_image(image).await {
            Ok(_) => true,
            Err(e) if e.engine_status() == Some(404) => false,
            Err(e) => return Err(e),
        };
    // berth/… and project images exist only where they were built: never pulled.
    let local_only = image.starts_with("berth/") || image.starts_with("berth-project/");
    match (policy, present) {
        (PullPolicy::Missing | PullPolicy::Never, true) => return Ok(None),
        (PullPolicy::Always, true) if local_only => return Ok(None),
        (_, false) if local_only => {
            return Err(Error::ImageMissing {
                image: image.into(),
                hint: "build it with `berth images build` (images/build.sh; `dev` for berth/dev)".into(),
            });
        }
        (PullPolicy::Never, false) => {
            return Err(Error::ImageMissing {
                image: image.into(),
                hint: format!(
                    "pull = \"never\": pull it first (`berth images pull {image}`) or start with --pull missing"
                ),
            });
        }
        _ => {}
    }
    let started = Instant::now();
    match tokio::time::timeout(limit, pull(docker, image, progress)).await {
        Ok(Ok(())) => Ok(Some(started.elapsed().as_millis() as u64)),
        Ok(Err(reason)) => Err(Error::PullFailed {
            image: image.into(),
            registry: registry_of(image),
            hint: pull_hint(image, &reason),
            reason,
        }),
        Err(_) => Err(Error::PullFailed {
            image: image.into(),
            registry: registry_of(image),
            reason: format!("no end within pull_timeout ({}s)", limit.as_secs()),
            hint: "raise pull_timeout in berth.toml, or pull it beforehand with `berth images pull`".into(),
        }),
    }
}

/// Pull `image` (`:latest` when it names no tag), reporting progress. The
/// error is the engine's reason.
pub async fn pull(
    docker: &DockerClient,
    image: &str,
    progress: &ProgressFn,
) -> std::result::Result<(), String> {
    // Without a tag the engine would pull every tag of the repository.
    let last = image.rsplit('/').next().unwrap_or(image);
    let tagged = last.contains(':') || last.contains('@');
    let opts = CreateImageOptions {
        from_image: Some(image.into()),
        tag: (!tagged).then(|| "latest".into()),
        ..Default::default()
    };
    let mut fold = Fold::new(image);
    let mut throttle = Throttle::new();
    let mut stream = std::pin::pin!(docker.pull_image(image, opts));
    while let Some(item) = throttle.next(&mut stream, || progress(fold.progress())).await {
        let info = item.map_err(|e| e.engine_reason())?;
        if let Some(detail) = &info.error_detail {
            return Err(detail
                .message
                .clone()
                .unwrap_or_else(|| "the engine reported an error".into()));
        }
        fold.add(&info);
        throttle.changed(|| progress(fold.progress()));
    }
    // A stream can end without an error and without the image (engine cut off).
    docker
        .inspect_image(image)
        .await
        .map_err(|e| format!("the pull ended but the image is not there: {}", e.engine_reason()))?;
    let mut done = fold.progress();
    done.layers_done = done.layers;
    done.bytes_done = done.bytes_total;
    done.done = true;
    progress(done);
    Ok(())
}

/// One layer as the stream described it so far.
#[derive(Default)]
struct Layer {
    current: u64,
    total: u64,
    done: bool,
}

/// The engine's per-layer stream, folded into totals.
struct Fold {
    image: String,
    started: Instant,
    layers: BTreeMap<String, Layer>,
}

impl Fold {
    fn new(image: &str) -> Self {
        Fold {
            image: image.into(),
            started: Instant::now(),
            layers: BTreeMap::new(),
        }
    }

    fn add(&mut self, info: &CreateImageInfo) {
        let (Some(id), Some(status)) = (info.id.as_deref(), info.status.as_deref()) else {
            return;
        };
        // Lines about the tag itself ("Pulling from library/x") are not layers.
        if status.starts_with("Pulling from") {
            return;
        }
        let layer = self.layers.entry(id.to_string()).or_default();
        let detail = info.progress_detail.as_ref();
        let current = detail.and_then(|d| d.current).unwrap_or(0).max(0) as u64;
        let total = detail.and_then(|d| d.total).unwrap_or(0).max(0) as u64;
        match status {
            "Downloading" => {
                layer.current = current;
                layer.total = layer.total.max(total);
            }
            "Download complete" | "Verifying Checksum" => layer.current = layer.total,
            "Pull complete" | "Already exists" => {
                layer.current = layer.total;
                layer.done = true;
            }
            _ => {}
        }
    }

    fn progress(&self) -> PullProgress {
        PullProgress {
            image: self.image.clone(),
            layers: self.layers.len() as u32,
            layers_done: self.layers.values().filter(|l| l.done).count() as u32,
            bytes_done: self.layers.values().map(|l| l.current).sum(),
            bytes_total: self.layers.values().map(|l| l.total).sum(),
            elapsed_ms: self.started.elapsed().as_millis() as u64,
            done: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::ProgressDetail;

    fn line(id: &str, status: &str, current: i64, total: i64) -> CreateImageInfo {
        CreateImageInfo {
            id: Some(id.into()),
            status: Some(status.into()),
            progress_detail: Some(ProgressDetail {
                current: Some(current),
                total: Some(total),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn layers_and_bytes_add_up() {
        let mut f = Fold::new("x:1");
        f.add(&line("1", "Pulling from library/x", 0, 0));
        f.add(&line("a", "Pulling fs layer", 0, 0));
        f.add(&line("b", "Already exists", 0, 0));
        f.add(&line("a", "Downloading", 300, 1000));
        let p = f.progress();
        assert_eq!(
            (p.layers, p.layers_done, p.bytes_done, p.bytes_total),
            (2, 1, 300, 1000)
        );
        assert_eq!(p.percent(), 30);
        f.add(&line("a", "Download complete", 0, 0));
        f.add(&line("a", "Extracting", 10, 1000));
        f.add(&line("a", "Pull complete", 0, 0));
        let p = f.progress();
        assert_eq!((p.layers_done, p.bytes_done, p.bytes_total), (2, 1000, 1000));
        assert!(p.line().contains("2/2 layers"), "{}", p.line());
    }
}
