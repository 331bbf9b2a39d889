//! `berth config` (the effective settings and where each came from) and
//! `berth trust` (which project files may loosen the sandbox: their
//! content's hash in the user's own config, see `crate::trust`).

use std::path::{Path, PathBuf};

use clap::Args;

use super::Global;
use super::out::outln;
use crate::config::Config;
use crate::error::Error;
use crate::trust;

#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The file to trust (default: the project's berth.toml, found from
    /// here upwards, and its devcontainer.json).
    pub file: Option<PathBuf>,
    /// Forget the trust instead.
    #[arg(long)]
    pub revoke: bool,
    /// List the trusted files and whether each is unchanged.
    #[arg(long, conflicts_with_all = ["file", "revoke"])]
    pub list: bool,
}

pub async fn show_config(global: &Global, json: bool) -> anyhow::Result<i32> {
    let config = global.config()?;
    // The image a job without --image gets, and why (asks the engine
    // whether berth/dev is built).
    let engine = crate::runner::docker::Engine::new(&config);
    let dev = engine.has_image(crate::images::DEV_IMAGE).await;
    let endpoint = engine.endpoint_info();
    let chosen = job_image(&config, dev);
    if json {
        let mut v = serde_json::to_value(&config)?;
        let sources: serde_json::Map<String, serde_json::Value> = config
            .describe()
            .into_iter()
            .map(|(k, _, s)| (k, serde_json::Value::String(s)))
            .collect();
        v["sources"] = serde_json::Value::Object(sources);
        v["job_image"] = serde_json::json!({"name": chosen.name, "why": chosen.why});
        v["untrusted"] = config
            .untrusted
            .iter()
            .map(|l| serde_json::json!({"file": l.file, "key": l.key, "value": l.value}))
            .collect();
        v["user_config"] = serde_json::json!(config.user_file);
        v["project_refusal"] = serde_json::json!(config.project_refusal);
        // Where the daemon listens (BERTH_SOCKET, XDG_RUNTIME_DIR or the
        // state dir): API.md's recipes read it from here.
        v["socket"] = serde_json::json!(crate::api::socket_path(&config));
        v["engine_endpoint"] = serde_json::json!({
            "host": endpoint.host,
            "remote": matches!(endpoint.place(), crate::runner::docker::Place::Remote { .. }),
            "tls": endpoint.tls.is_some(),
            "source": endpoint.source,
        });
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for (k, v, s) in config.describe() {
            outln!("{k:<14} = {v:<40} ({s})");
        }
        outln!("{:<14} = {:<40} ({})", "job image", chosen.name, chosen.why);
        outln!("{:<14} = {}", "docker engine", endpoint.describe());
        outln!(
            "{:<14} = {}",
            "socket",
            crate::api::socket_path(&config).display()
        );
        for l in &config.untrusted {
            outln!(
                "{:<14} = {:<40} (NOT applied: {} is not trusted; starts are refused until `berth trust`)",
                l.key,
                l.value,
                l.file.display()
            );
        }
        if let Some(why) = &config.project_refusal {
            outln!(
                "{:<14} = NOT used: {why}; jobs of this project are refused until it is fixed",
                "project file"
            );
        }
    }
    Ok(0)
}

/// The image a job without `--image` gets and why (`dev`: whether
/// berth/dev is built); a refusal or a project build that cannot be walked
/// is shown in its place, since `berth config` reports rather than fails.
fn job_image(config: &Config, dev: bool) -> crate::images::ImageChoice {
    match crate::images::choose_image(&crate::model::JobSpec::default(), config, dev) {
        Err(e) => crate::images::ImageChoice {
            name: "(refused)".into(),
            why: e.to_string(),
            ..Default::default()
        },
        Ok(crate::images::Choice::Image(c)) => c,
        // The tag says which context it is built from: walk it (no engine needed).
        Ok(crate::images::Choice::Build { build, why }) => {
            match crate::images::context::walk(
                &config.workspace,
                &build.context,
                &build.dockerfile,
                &build.args,
            ) {
                Ok(ctx) => crate::images::ImageChoice {
                    name: crate::images::build::project_tag(&config.workspace, &ctx.hash),
                    why: crate::images::build::why(&build, &why, &ctx.hash),
                    ..Default::default()
                },
                Err(e) => crate::images::ImageChoice {
                    name: format!("(build of {})", build.dockerfile.display()),
                    why: format!("{why}; cannot be built as it is: {e}"),
                    ..Default::default()
                },
            }
        }
    }
}

/// The files `berth trust` acts on: the one named, or the project's config
/// file and its dev container files.
fn files_to_trust(global: &Global, named: Option<&Path>) -> Result<Vec<PathBuf>, Error> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    if let Some(f) = named {
        return Ok(vec![cwd.join(f)]);
    }
    let config = global.config()?;
    let mut files: Vec<PathBuf> = config.project_file.iter().cloned().collect();
    for dc in [".devcontainer/devcontainer.json", ".devcontainer.json"] {
        let p = config.workspace.join(dc);
        if p.is_file() {
            files.push(p);
        }
    }
    Ok(files)
}

pub fn trust(global: &Global, args: TrustArgs) -> anyhow::Result<i32> {
    let user = trust::user_config_path(|k| std::env::var(k).ok()).ok_or_else(|| {
        anyhow::anyhow!("no home directory: set BERTH_USER_CONFIG to your berth config file")
    })?;
    if args.list {
        let trusted = read_trusted(&user)?;
        for (file, digest) in trusted.entries() {
            let now = trust::read_capped(Path::new(file)).map(|b| trust::digest(&b));
            let state = match now {
                Ok(d) if d == digest => "trusted",
                Ok(_) => "changed since (not trusted)",
                Err(_) => "missing",
            };
            outln!("{file}  {state}");
        }
        return Ok(0);
    }
    let files = files_to_trust(global, args.file.as_deref())?;
    if files.is_empty() {
        anyhow::bail!("no berth.toml or devcontainer.json here or above: nothing to trust");
    }
    for file in files {
        let real = std::fs::canonicalize(&file).map_err(|e| Error::io("find the file to trust", &file, e))?;
        if args.revoke {
            trust::record(&user, &real, None)?;
            outln!("no longer trusted: {}", real.display());
            continue;
        }
        let bytes = trust::read_capped(&real)?;
        // Say what the user is allowing: the loosening keys this file sets.
        let loosens = match real.file_name().and_then(|n| n.to_str()) {
            Some(n) if n.ends_with(".json") => crate::images::devcontainer_trust_allows(&real),
            _ => Config::load_with(
                real.parent().unwrap_or(Path::new("/")),
                Default::default(),
                |k| match k {
                    "BERTH_CONFIG" => Some(real.display().to_string()),
                    _ => std::env::var(k).ok(),
                },
            )
            .map(|c| {
                c.untrusted
                    .iter()
                    .map(|l| format!("{} = {}", l.key, l.value))
                    .collect()
            })
            .unwrap_or_default(),
        };
        trust::record(&user, &real, Some(&trust::digest(&bytes)))?;
        match loosens.is_empty() {
            true => outln!("trusted: {} (it loosens nothing today)", real.display()),
            false => outln!("trusted: {} (allows {})", real.display(), loosens.join(", ")),
        }
    }
    outln!(
        "recorded in {} (any change to a file needs `berth trust` again)",
        user.display()
    );
    Ok(0)
}

fn read_trusted(user: &Path) -> anyhow::Result<trust::Trusted> {
    if !user.exists() {
        return Ok(trust::Trusted::default());
    }
    let bytes = trust::read_capped(user)?;
    let mut table: toml::Table = String::from_utf8_lossy(&bytes)
        .parse()
        .map_err(|_| anyhow::anyhow!("{} does not parse as TOML", user.display()))?;
    Ok(trust::Trusted::take_from(&mut table, user)?)
}
