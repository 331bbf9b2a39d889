//! `diff` and `apply`: an agent's jobs write its session's layer, not the
//! checkout (`crate::layers`); these show what the layer holds and bring
//! it to the checkout. Every tool set has them: its jobs write a layer too.
//!
//! An agent reaches only its own session's layer (or the layer of one of
//! its own jobs), and its apply is bounded (`apply_max_deletes`, the
//! protected paths): past that it is refused with the command the user
//! runs instead (`berth apply LAYER`).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};

use super::args::{ApplyArgs, DiffArgs, job_id};
use super::core::{Answer, reply};
use super::service::BerthMcp;
use crate::error::{Error, Result};
use crate::layers::diff::Form;
use crate::model::JobSpec;

/// Most bytes of a diff in one answer (the rest: name paths).
const MAX_DIFF: usize = 16 * 1024;
/// Most paths one call names.
const MAX_PATHS: usize = 256;

#[tool_router(router = layers_router, vis = "pub(super)")]
impl BerthMcp {
    #[tool(
        description = "Show what this session's jobs changed in the workspace: their writes wait in the \
session's layer, not in the checkout, until `apply`. Default: one line a path (A added, M changed, D deleted; \
! a conflict: changed in the checkout since); patch: true gives a unified diff of the text files. `paths` narrows \
it; `id` picks the layer of one of your jobs."
    )]
    async fn diff(&self, Parameters(a): Parameters<DiffArgs>) -> CallToolResult {
        reply(self.diff_answer(a).await)
    }

    #[tool(
        description = "Bring this session's layer (what its jobs wrote) to the checkout: every change, or only \
`paths`. Files the checkout changed since the layer took its copy are skipped and named (conflicts). Refused \
when it would delete or truncate many files or touch protected paths (berth.toml, .devcontainer, .berth, \
.git, the user's apply_protect): the answer names the command the user runs instead."
    )]
    async fn apply(&self, Parameters(a): Parameters<ApplyArgs>) -> CallToolResult {
        reply(self.apply_answer(a).await)
    }
}

impl BerthMcp {
    /// This session's probe spec: its owner and its client's project.
    fn probe(&self) -> JobSpec {
        let mut probe = JobSpec::default();
        self.core.session.claim(&mut probe);
        probe
    }

    /// The layer `id` names (a job of this session), else the session's.
    async fn layer_of(&self, id: Option<&str>) -> Result<String> {
        let m = &self.core.manager;
        let Some(id) = id else {
            return m.session_layer(&self.probe());
        };
        let id = job_id(id);
        let info = m.read_info(&id).await?;
        if info.spec.owner.as_deref() != Some(self.core.session.owner.as_str()) {
            return Err(Error::InvalidSpec(format!(
                "{id} is not a job of this session: an agent shows and applies only its own session's layer"
            )));
        }
        m.layer_name(id.as_str())
    }

    fn paths(paths: Vec<String>) -> Result<Vec<std::path::PathBuf>> {
        if paths.len() > MAX_PATHS {
            return Err(Error::InvalidSpec(format!("at most {MAX_PATHS} paths a call")));
        }
        Ok(paths.into_iter().map(Into::into).collect())
    }

    async fn diff_answer(&self, a: DiffArgs) -> Result<Answer> {
        let layer = self.layer_of(a.id.as_deref()).await?;
        let form = if a.patch { Form::Patch } else { Form::Stat };
        let paths = Self::paths(a.paths)?;
        match self.core.manager.layer_diff(&layer, paths, form, MAX_DIFF).await {
            Ok(text) => Ok(Answer::ok(text)),
            // Nothing written yet: no layer is made until a job writes one.
            Err(Error::UnknownLayer(_)) => Ok(Answer::ok(format!(
                "no changes in layer {layer}: this session's jobs changed nothing yet.\n"
            ))),
            Err(e) => Err(e),
        }
    }

    async fn apply_answer(&self, a: ApplyArgs) -> Result<Answer> {
        let layer = self.layer_of(a.id.as_deref()).await?;
        let guard = self.core.manager.apply_guard(&self.probe())?;
        let paths = Self::paths(a.paths)?;
        let done = self.core.manager.layer_apply(&layer, paths, Some(guard)).await?;
        let mut text = format!("{}.\n", done.summary());
        for c in &done.conflicts {
            text += &format!(
                "  conflict: {}: {}\n",
                c.path,
                c.conflict.as_deref().unwrap_or("")
            );
        }
        Ok(Answer {
            is_error: !done.conflicts.is_empty(),
            text,
        })
    }
}
