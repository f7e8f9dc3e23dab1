//! `quiver store migrate --from sqlite:PATH --to postgres://...`: copies
//! a whole state store into an empty one (every table, ids kept), reads
//! each table back from the target and prints its row count and checksum
//! beside the source's; any difference fails the command. The usual move
//! is from the embedded SQLite file to a PostgreSQL database that several
//! instances will share; the other way works too.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use quiver_store::{Store, StoreConfig};

/// `quiver store` subcommands.
#[derive(Subcommand)]
pub(crate) enum StoreCommand {
    /// Copy a whole state store into an empty one, and verify the copy.
    Migrate(MigrateArgs),
}

/// `quiver store migrate` arguments.
#[derive(Args)]
pub(crate) struct MigrateArgs {
    /// The store to copy: `sqlite:PATH` (a `quiver.db`, or the state
    /// directory holding it) or a `postgres://` URL.
    #[arg(long)]
    from: String,
    /// The store to copy into (empty): `sqlite:PATH` or a `postgres://` URL
    /// (`${VAR}` is expanded, e.g. for the password).
    #[arg(long)]
    to: String,
}

/// Runs `quiver store ...`.
pub(crate) fn run(command: StoreCommand) -> Result<ExitCode> {
    let StoreCommand::Migrate(args) = command;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(migrate(args))
}

/// The store a `--from`/`--to` value names, opened (made when missing).
async fn open(what: &str, given: &str) -> Result<Arc<dyn Store>> {
    let expanded = quiver_config::expand_vars(given, |name| std::env::var(name).ok())
        .map_err(|message| anyhow::anyhow!("--{what}: {message}"))?;
    if let Some(path) = expanded.strip_prefix("sqlite:") {
        let path = PathBuf::from(path);
        let file = if path.is_dir() {
            path.join(quiver_store::DATABASE_FILE)
        } else {
            path
        };
        if what == "from" && !file.is_file() {
            bail!("--from: {} is not a state database", file.display());
        }
        let store =
            quiver_store::sqlite::SqliteStore::open(&file).with_context(|| format!("--{what}"))?;
        return Ok(Arc::new(store));
    }
    if expanded.starts_with("postgres://") || expanded.starts_with("postgresql://") {
        let store =
            quiver_store::open(&StoreConfig::postgres(&expanded), std::path::Path::new("."))
                .await
                .with_context(|| format!("--{what}"))?;
        return Ok(store);
    }
    bail!(
        "--{what}: `{}` is neither sqlite:PATH nor a postgres:// URL",
        quiver_store::settings::redact(&expanded)
    )
}

async fn migrate(args: MigrateArgs) -> Result<ExitCode> {
    let from = open("from", &args.from).await?;
    let to = open("to", &args.to).await?;
    println!("copying {} into {}", from.location(), to.location());
    let copies = quiver_store::copy::copy_store(&*from, &*to)
        .await
        .context("the copy failed")?;
    let mut all_verified = true;
    let mut rows = 0;
    for copy in &copies {
        all_verified &= copy.verified;
        rows += copy.rows;
        println!(
            "{:<16} {:>8} rows  sha256 {}  {}",
            copy.table,
            copy.rows,
            copy.checksum,
            if copy.verified {
                "verified"
            } else {
                "DIFFERS in the target"
            }
        );
    }
    to.flush_pins().await.ok();
    if !all_verified {
        eprintln!("error: the target does not read back as the source; do not use it");
        return Ok(ExitCode::FAILURE);
    }
    println!("{rows} rows in {} tables copied and verified", copies.len());
    Ok(ExitCode::SUCCESS)
}
