//! [`DockerClient`]: the one place berth talks to the engine through bollard.
//! It owns the `bollard::Docker` handle and exposes the engine operations the
//! runner uses, each failing as [`Error::Engine`] with its own [`EngineOp`],
//! the object it was about, and the engine's error kept as the source. No
//! other file calls a bollard request method or words an engine error by
//! hand: callers that must tell cases apart (a 404 that means "already
//! gone", a 409 that means "name taken") ask [`Error::engine_status`].
//!
//! Streams (wait, attach, logs, stats, pull, build) are mapped item by item,
//! so a failure in the middle of one is typed the same way.

mod swarm;

use std::collections::HashMap;
use std::pin::Pin;

use bollard::Docker;
use bollard::body_try_stream;
use bollard::container::{AttachContainerResults, LogOutput};
use bollard::exec::{StartExecOptions, StartExecResults};
use bollard::models::{
    BuildInfo, ContainerCreateBody, ContainerCreateResponse, ContainerInspectResponse,
    ContainerStatsResponse, ContainerSummary, ContainerWaitResponse, CreateImageInfo, ExecConfig,
    ExecInspectResponse, ImageInspect, ImageSummary, Network as EngineNetwork, NetworkConnectRequest,
    NetworkCreateRequest, NetworkCreateResponse, NetworkInspect, Volume, VolumeCreateRequest,
};
use bollard::query_parameters::{
    AttachContainerOptions, BuildImageOptions, CreateContainerOptions, CreateImageOptions,
    InspectNetworkOptions, KillContainerOptions, ListContainersOptions, ListImagesOptions,
    ListNetworksOptions, ListVolumesOptions, LogsOptions, RemoveContainerOptions, RemoveImageOptions,
    RemoveVolumeOptions, StatsOptions, WaitContainerOptions,
};
use futures_util::{Stream, StreamExt};

use std::time::Duration;

use super::endpoint::Endpoint;
use crate::error::{EngineOp, Error, Result};

/// A container's output as the engine sends it (attach or logs).
pub type OutputStream = Pin<Box<dyn Stream<Item = Result<LogOutput>> + Send>>;
/// A container's stdin, as attach hands it over.
pub type Stdin = Pin<Box<dyn tokio::io::AsyncWrite + Send>>;

/// The engine connection: cheap to clone (one shared HTTP client).
#[derive(Debug, Clone)]
pub struct DockerClient {
    docker: Docker,
}

/// The typed error of one engine operation on `target`.
fn fail(op: EngineOp, target: &str) -> impl FnOnce(bollard::errors::Error) -> Error + '_ {
    move |source| Error::Engine {
        op,
        target: target.to_string(),
        source,
    }
}

impl DockerClient {
    /// Connect to `endpoint`, negotiate the API version down to the engine's
    /// (Debian's 20.10 speaks 1.41 and refuses newer clients), and ping, all
    /// under `limit`. For the default socket this is exactly
    /// `Docker::connect_with_local_defaults()`; naming the endpoint explicitly
    /// also covers `tcp://`/`ssh://` hosts and lets errors say what was tried.
    pub async fn connect(endpoint: &Endpoint, limit: Duration) -> Result<Self> {
        let unavailable = |message: String| Error::EngineUnavailable {
            endpoint: endpoint.host.clone(),
            message,
        };
        let attempt = async {
            let docker = endpoint.client().map_err(unavailable)?;
            let docker = docker
                .negotiate_version()
                .await
                .map_err(|e| unavailable(e.to_string()))?;
            docker.ping().await.map_err(|e| unavailable(e.to_string()))?;
            Ok(DockerClient { docker })
        };
        match tokio::time::timeout(limit, attempt).await {
            Ok(r) => r,
            Err(_) => Err(unavailable(format!("no answer within {limit:?}"))),
        }
    }

    pub async fn ping(&self) -> Result<()> {
        self.docker
            .ping()
            .await
            .map(|_| ())
            .map_err(fail(EngineOp::Ping, "a ping"))
    }

    /// The engine's `/info` (its registered runtimes, among others).
    pub async fn info(&self) -> Result<bollard::models::SystemInfo> {
        self.docker.info().await.map_err(fail(EngineOp::Info, "/info"))
    }

    // Images.

    pub async fn inspect_image(&self, image: &str) -> Result<ImageInspect> {
        self.docker
            .inspect_image(image)
            .await
            .map_err(fail(EngineOp::InspectImage, image))
    }

    pub async fn list_images(&self, opts: ListImagesOptions) -> Result<Vec<ImageSummary>> {
        self.docker
            .list_images(Some(opts))
            .await
            .map_err(fail(EngineOp::ListImages, "images"))
    }

    pub async fn remove_image(&self, image: &str) -> Result<()> {
        self.docker
            .remove_image(image, None::<RemoveImageOptions>, None)
            .await
            .map(|_| ())
            .map_err(fail(EngineOp::RemoveImage, image))
    }

    /// Pull `image` (`opts` names it): the engine's progress, item by item.
    pub fn pull_image(
        &self,
        image: &str,
        opts: CreateImageOptions,
    ) -> impl Stream<Item = Result<CreateImageInfo>> {
        let target = image.to_string();
        self.docker
            .create_image(Some(opts), None, None)
            .map(move |r| r.map_err(fail(EngineOp::PullImage, &target)))
    }

    /// Build `tag` from a tar `context` streamed as it is written.
    pub fn build_image(
        &self,
        tag: &str,
        opts: BuildImageOptions,
        context: impl Stream<Item = std::io::Result<bytes::Bytes>> + Send + 'static,
    ) -> impl Stream<Item = Result<BuildInfo>> + '_ {
        let target = tag.to_string();
        self.docker
            .build_image(opts, None::<HashMap<_, _>>, Some(body_try_stream(context)))
            .map(move |r| r.map_err(fail(EngineOp::BuildImage, &target)))
    }

    // Containers.

    pub async fn create_container(
        &self,
        name: &str,
        opts: CreateContainerOptions,
        body: ContainerCreateBody,
    ) -> Result<ContainerCreateResponse> {
        self.docker
            .create_container(Some(opts), body)
            .await
            .map_err(fail(EngineOp::CreateContainer, name))
    }

    /// Set container `id`'s process limit (a build step's: the build API has none).
    pub async fn limit_pids(&self, id: &str, pids: i64) -> Result<()> {
        let body = bollard::models::ContainerUpdateBody {
            pids_limit: Some(pids),
            ..Default::default()
        };
        self.docker
            .update_container(id, body)
            .await
            .map(|_| ())
            .map_err(fail(EngineOp::UpdateContainer, id))
    }

    pub async fn start_container(&self, id: &str) -> Result<()> {
        self.docker
            .start_container(id, None)
            .await
            .map_err(fail(EngineOp::StartContainer, id))
    }

    /// The container's exit code(s) as the engine answers the wait.
    pub fn wait_container(
        &self,
        id: &str,
        opts: WaitContainerOptions,
    ) -> impl Stream<Item = Result<i64>> + use<> {
        let target = id.to_string();
        self.docker.wait_container(id, Some(opts)).map(move |r| match r {
            Ok(ContainerWaitResponse { status_code, .. }) => Ok(status_code),
            // bollard turns every non-zero exit into this error; it is an answer.
            Err(bollard::errors::Error::DockerContainerWaitError { code, .. }) => Ok(code),
            Err(e) => Err(fail(EngineOp::WaitContainer, &target)(e)),
        })
    }

    pub async fn kill_container(&self, id: &str, opts: KillContainerOptions) -> Result<()> {
        self.docker
            .kill_container(id, Some(opts))
            .await
            .map_err(fail(EngineOp::KillContainer, id))
    }

    pub async fn remove_container(&self, id: &str, opts: RemoveContainerOptions) -> Result<()> {
        self.docker
            .remove_container(id, Some(opts))
            .await
            .map_err(fail(EngineOp::RemoveContainer, id))
    }

    /// Whether the engine reported an OOM kill in container `id` (its event
    /// log, which it keeps for a while after the container exited).
    pub async fn had_oom(&self, id: &str) -> Result<bool> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let opts = bollard::query_parameters::EventsOptions {
            since: Some(now.saturating_sub(24 * 3600).to_string()),
            until: Some((now + 1).to_string()),
            filters: Some(HashMap::from([
                ("type".to_string(), vec!["container".to_string()]),
                ("container".to_string(), vec![id.to_string()]),
                ("event".to_string(), vec!["oom".to_string()]),
            ])),
        };
        let mut events = Box::pin(self.docker.events(Some(opts)));
        // `until` ends the stream; the timeout bounds an engine that does not.
        let first = tokio::time::timeout(Duration::from_secs(2), events.next()).await;
        match first {
            Ok(Some(Ok(_))) => Ok(true),
            Ok(Some(Err(e))) => Err(fail(EngineOp::Events, id)(e)),
            Ok(None) | Err(_) => Ok(false),
        }
    }

    pub async fn inspect_container(&self, id: &str) -> Result<ContainerInspectResponse> {
        self.docker
            .inspect_container(id, None)
            .await
            .map_err(fail(EngineOp::InspectContainer, id))
    }

    pub async fn list_containers(&self, opts: ListContainersOptions) -> Result<Vec<ContainerSummary>> {
        self.docker
            .list_containers(Some(opts))
            .await
            .map_err(fail(EngineOp::ListContainers, "containers"))
    }

    /// Attach to `id`: its output, and its stdin to write to.
    pub async fn attach_container(
        &self,
        id: &str,
        opts: AttachContainerOptions,
    ) -> Result<(OutputStream, Stdin)> {
        let AttachContainerResults { output, input } = self
            .docker
            .attach_container(id, Some(opts))
            .await
            .map_err(fail(EngineOp::AttachContainer, id))?;
        let target = id.to_string();
        let output = output.map(move |r| r.map_err(fail(EngineOp::AttachContainer, &target)));
        Ok((Box::pin(output), input))
    }

    /// Follow `id`'s output from its logs (`opts` says from where).
    pub fn logs(&self, id: &str, opts: LogsOptions) -> OutputStream {
        let target = id.to_string();
        Box::pin(
            self.docker
                .logs(id, Some(opts))
                .map(move |r| r.map_err(fail(EngineOp::ContainerLogs, &target))),
        )
    }

    pub fn stats(
        &self,
        id: &str,
        opts: StatsOptions,
    ) -> impl Stream<Item = Result<ContainerStatsResponse>> + use<> {
        let target = id.to_string();
        self.docker
            .stats(id, Some(opts))
            .map(move |r| r.map_err(fail(EngineOp::ContainerStats, &target)))
    }

    // Networks.

    pub async fn create_network(&self, request: NetworkCreateRequest) -> Result<NetworkCreateResponse> {
        let name = request.name.clone();
        self.docker
            .create_network(request)
            .await
            .map_err(fail(EngineOp::CreateNetwork, &name))
    }

    pub async fn inspect_network(&self, id: &str) -> Result<NetworkInspect> {
        self.docker
            .inspect_network(id, None::<InspectNetworkOptions>)
            .await
            .map_err(fail(EngineOp::InspectNetwork, id))
    }

    pub async fn remove_network(&self, id: &str) -> Result<()> {
        self.docker
            .remove_network(id)
            .await
            .map_err(fail(EngineOp::RemoveNetwork, id))
    }

    pub async fn list_networks(&self, what: &str, opts: ListNetworksOptions) -> Result<Vec<EngineNetwork>> {
        self.docker
            .list_networks(Some(opts))
            .await
            .map_err(fail(EngineOp::ListNetworks, what))
    }

    pub async fn connect_network(&self, network: &str, request: NetworkConnectRequest) -> Result<()> {
        self.docker
            .connect_network(network, request)
            .await
            .map_err(fail(EngineOp::ConnectNetwork, network))
    }

    // Volumes.

    pub async fn create_volume(&self, request: VolumeCreateRequest) -> Result<Volume> {
        let name = request.name.clone().unwrap_or_default();
        self.docker
            .create_volume(request)
            .await
            .map_err(fail(EngineOp::CreateVolume, &name))
    }

    pub async fn remove_volume(&self, name: &str) -> Result<()> {
        self.docker
            .remove_volume(name, Some(RemoveVolumeOptions { force: true }))
            .await
            .map_err(fail(EngineOp::RemoveVolume, name))
    }

    /// Unpack the tar `tar` at `path` in container `id` (created or running).
    pub async fn upload_archive(&self, id: &str, path: &str, tar: bytes::Bytes) -> Result<()> {
        let opts = bollard::query_parameters::UploadToContainerOptions {
            path: path.into(),
            ..Default::default()
        };
        self.docker
            .upload_to_container(id, Some(opts), bollard::body_full(tar))
            .await
            .map_err(fail(EngineOp::UploadArchive, id))
    }

    /// `path` of container `id` as a tar, streamed (at most `limit` bytes:
    /// more is an error, not a truncated archive).
    pub async fn download_archive(&self, id: &str, path: &str, limit: u64) -> Result<Vec<u8>> {
        let opts = bollard::query_parameters::DownloadFromContainerOptions { path: path.into() };
        let mut stream = self.docker.download_from_container(id, Some(opts));
        let mut out = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(fail(EngineOp::DownloadArchive, id))?;
            if out.len() as u64 + chunk.len() as u64 > limit {
                return Err(Error::InvalidValue {
                    what: "copy",
                    input: path.into(),
                    message: format!("is more than {} MiB; copy a smaller part", limit >> 20),
                });
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }

    // Execs (`berth exec`).

    /// Create an exec of `config.cmd` in running container `id`; its id.
    pub async fn create_exec(&self, id: &str, config: ExecConfig) -> Result<String> {
        self.docker
            .create_exec(id, config)
            .await
            .map(|r| r.id)
            .map_err(fail(EngineOp::CreateExec, id))
    }

    /// Start exec `exec` attached: its output, frames of at most
    /// `frame_bytes` (a longer line comes in pieces), item by item.
    pub async fn start_exec(&self, exec: &str, frame_bytes: usize) -> Result<OutputStream> {
        let opts = StartExecOptions {
            detach: false,
            tty: false,
            output_capacity: Some(frame_bytes),
        };
        match self.docker.start_exec(exec, Some(opts)).await {
            Ok(StartExecResults::Attached { output, .. }) => {
                let target = exec.to_string();
                Ok(Box::pin(
                    output.map(move |r| r.map_err(fail(EngineOp::StartExec, &target))),
                ))
            }
            // Not asked for: an attached start never answers detached.
            Ok(StartExecResults::Detached) => Ok(Box::pin(futures_util::stream::empty())),
            Err(e) => Err(fail(EngineOp::StartExec, exec)(e)),
        }
    }

    pub async fn inspect_exec(&self, exec: &str) -> Result<ExecInspectResponse> {
        self.docker
            .inspect_exec(exec)
            .await
            .map_err(fail(EngineOp::InspectExec, exec))
    }

    /// Names of the volumes whose labels match every `key=value` of `labels`.
    pub async fn list_volumes(&self, labels: &[String]) -> Result<Vec<String>> {
        Ok(self
            .volumes_labelled(labels)
            .await?
            .into_iter()
            .map(|(name, _)| name)
            .collect())
    }

    /// The volumes whose labels match every `key=value` of `labels`, each
    /// with all its labels.
    pub async fn volumes_labelled(
        &self,
        labels: &[String],
    ) -> Result<Vec<(String, HashMap<String, String>)>> {
        let opts = ListVolumesOptions {
            filters: Some(HashMap::from([("label".to_string(), labels.to_vec())])),
        };
        let list = self
            .docker
            .list_volumes(Some(opts))
            .await
            .map_err(fail(EngineOp::ListVolumes, "of this instance"))?;
        Ok(list
            .volumes
            .unwrap_or_default()
            .into_iter()
            .map(|v| (v.name, v.labels))
            .collect())
    }
}

/// Force-remove container `id` with its anonymous volumes; `true` when it
/// is gone (already gone or being removed counts).
pub(super) async fn remove_container(docker: &DockerClient, id: &str) -> bool {
    let opts = RemoveContainerOptions {
        force: true,
        v: true,
        link: false,
    };
    match docker.remove_container(id, opts).await {
        Ok(()) => true,
        // 404: already gone; 409: a removal is already in progress.
        Err(e) if matches!(e.engine_status(), Some(404 | 409)) => true,
        Err(e) => {
            tracing::warn!(error = %e, "could not remove container");
            false
        }
    }
}

/// Force-remove `ids` all at once (each removal waits on the engine, not on
/// the others); returns how many were removed or gone already.
pub(super) async fn remove_all<'a>(docker: &DockerClient, ids: impl Iterator<Item = &'a str>) -> usize {
    futures_util::future::join_all(ids.map(|id| remove_container(docker, id)))
        .await
        .into_iter()
        .filter(|ok| *ok)
        .count()
}

/// The container's address on its network, for probes that must reach the
/// server itself (a published port is answered by the userland proxy even
/// when nothing listens inside).
pub(super) fn container_ip(
    inspected: &bollard::models::ContainerInspectResponse,
) -> Option<std::net::IpAddr> {
    let networks = inspected.network_settings.as_ref()?.networks.as_ref()?;
    // A job is on one network (its berth bridge): any address it has will do.
    networks
        .values()
        .filter_map(|ep| ep.ip_address.as_deref())
        .find_map(|ip| ip.parse().ok())
}
