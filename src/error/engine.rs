//! What an engine failure means, read once from its status, then its words:
//! the engine answers most failures with 404/409/500 and a sentence, and
//! several decisions (retry on a fresh network, forget a vanished pause,
//! call a busy port a busy port) hang on which. The status decides where it
//! says something (404 not found, 409 conflict); the words only pick the
//! object of a 404 or stand in for a status that says nothing (a 500 for a
//! busy port). The phrases are the engine's (moby's daemon and libnetwork),
//! matched here and nowhere else; the table test below holds one real
//! message for each.

/// The kind of an engine failure, as far as berth acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineFailure {
    /// The image is not on the engine (`No such image: …`, 404).
    ImageMissing,
    /// A network the container needs is gone or briefly doubled
    /// (`network … not found`, `… is ambiguous`): ensure it again and retry.
    NetworkMissing,
    /// The container (a pause container joined by namespace) is gone or
    /// stopped (`No such container`, `… non running container`).
    ContainerGone,
    /// A host port is taken (`port is already allocated`, `address already in use`).
    PortTaken,
    /// The command is not in the image (`executable file not found`).
    NotInImage,
    /// A path the start needs does not exist in the image (`no such file or directory`).
    NoSuchFile,
    /// A name is taken (409 on create: `Conflict. The container name … is already in use`).
    Conflict,
    /// Anything else: reported as the engine said it.
    Other,
}

/// Classify a failure by the engine's HTTP `status` (when it answered)
/// first; its words only say which object a 404 is about, which kind a 409
/// is, and what a status that says nothing (400, 500) means.
pub fn classify(status: Option<u16>, words: &str) -> EngineFailure {
    let lower = words.to_ascii_lowercase();
    match status {
        Some(404) => not_found(&lower).unwrap_or_else(|| by_words(&lower)),
        // moby answers a join of a stopped container with a Conflict too.
        Some(409) if lower.contains("non running container") => EngineFailure::ContainerGone,
        Some(409) => EngineFailure::Conflict,
        _ => by_words(&lower),
    }
}

/// Which object a 404 says is missing (`No such image: …`, `No such
/// container: …`, `network … not found`); `None` when it names none of them.
fn not_found(lower: &str) -> Option<EngineFailure> {
    if lower.contains("no such image") {
        Some(EngineFailure::ImageMissing)
    } else if lower.contains("no such container") {
        Some(EngineFailure::ContainerGone)
    } else if lower.contains("network") {
        Some(EngineFailure::NetworkMissing)
    } else {
        None
    }
}

/// The failures the engine answers with a status that says nothing of them:
/// libnetwork's busy port (500), a doubled network name (400), the
/// runtime's failures to start the command (400, or 500 when moby cannot
/// tell them apart), and a not-found sentence with no status (an error
/// inside a stream) or a 500 that wraps one (a start whose network went
/// while it was being joined). Order matters where one sentence holds two
/// phrases.
fn by_words(lower: &str) -> EngineFailure {
    if lower.contains("port is already allocated") || lower.contains("address already in use") {
        EngineFailure::PortTaken
    } else if let Some(missing) =
        not_found(lower).filter(|_| !lower.contains("network") || lower.contains("not found"))
    {
        missing
    } else if lower.contains("network") && lower.contains("ambiguous") {
        EngineFailure::NetworkMissing
    } else if lower.contains("executable file not found") {
        EngineFailure::NotInImage
    } else if lower.contains("no such file or directory") {
        EngineFailure::NoSuchFile
    } else {
        EngineFailure::Other
    }
}

#[cfg(test)]
mod tests {
    use super::{EngineFailure::*, classify};

    /// One message per kind, as engine 20.10 words it.
    #[test]
    fn each_engine_message_is_read_as_its_kind() {
        let table = [
            (Some(404), "No such image: berth/none:latest", ImageMissing),
            (Some(404), "network berth-t1-3 not found", NetworkMissing),
            (
                Some(400),
                "network berth-t1-3 is ambiguous (2 matches found based on name)",
                NetworkMissing,
            ),
            (Some(404), "No such container: 0123456789ab", ContainerGone),
            (
                Some(409),
                "cannot join network of a non running container: 0123456789ab",
                ContainerGone,
            ),
            (
                Some(500),
                "driver failed programming external connectivity on endpoint x: Bind for 127.0.0.1:8080 failed: port is already allocated",
                PortTaken,
            ),
            (
                Some(500),
                "listen tcp4 127.0.0.1:8080: bind: address already in use",
                PortTaken,
            ),
            (
                Some(400),
                "failed to create shim: OCI runtime create failed: runc create failed: unable to start container process: exec: \"nope\": executable file not found in $PATH: unknown",
                NotInImage,
            ),
            (
                Some(400),
                "OCI runtime create failed: exec: \"/app/run\": stat /app/run: no such file or directory: unknown",
                NoSuchFile,
            ),
            (
                Some(409),
                "Conflict. The container name \"/berth-t1-job-1\" is already in use by container \"abc\". You have to remove (or rename) that container to be able to reuse that name.",
                Conflict,
            ),
            (Some(500), "the engine is busy", Other),
            (None, "connection refused", Other),
        ];
        for (status, words, kind) in table {
            assert_eq!(classify(status, words), kind, "{words}");
        }
    }

    /// The status decides before the words: the same sentence under a status
    /// that says otherwise is read by the status.
    #[test]
    fn the_status_decides_before_the_words() {
        let table = [
            // Not found by its status, whatever else the words hold.
            (
                Some(404),
                "No such image: berth/network-tools:latest",
                ImageMissing,
            ),
            (
                Some(404),
                "No such container: berth-network-holder",
                ContainerGone,
            ),
            // A name that holds another failure's words: the status says
            // which it is.
            (
                Some(404),
                "No such container: berth-port-is-already-allocated",
                ContainerGone,
            ),
            (
                Some(404),
                "network berth-t1-3 not found: no such file or directory",
                NetworkMissing,
            ),
            // A 409 is a conflict even when its words name a busy port or a
            // missing file (the engine said conflict, not a failed start).
            (
                Some(409),
                "Conflict. The container name \"/berth-port-is-already-allocated\" is already in use",
                Conflict,
            ),
            (
                Some(409),
                "removal of container abc is already in progress: no such file or directory",
                Conflict,
            ),
            // Not-found words under a status that says nothing (a stream's
            // error, a 500 wrapping one): the words stand in for it.
            (Some(500), "No such container: 0123456789ab", ContainerGone),
            (Some(500), "network berth-t1-3 not found", NetworkMissing),
            (Some(400), "No such image: busybox:latest", ImageMissing),
            (None, "No such container: 0123456789ab", ContainerGone),
            (Some(500), "failed to set up network berth-t1-3", Other),
            // A 404 naming no object the kinds know is read by its words.
            (Some(404), "stat /app/run: no such file or directory", NoSuchFile),
            (Some(404), "no such volume: v1", Other),
        ];
        for (status, words, kind) in table {
            assert_eq!(classify(status, words), kind, "{status:?} {words}");
        }
    }
}
