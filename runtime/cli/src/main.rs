//! `quiver`: the command-line entry point.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use serde_json::json;

use quiver_catalog::assembly::Assembler;
use quiver_catalog::bridge::round_score;
use quiver_catalog::catalog_file;
use quiver_catalog::semantic::SemanticIndex;
use quiver_catalog::settings::{EmbeddingsConfig, SearchMode};
use quiver_config::ConfigError;
use quiver_daemon::config::{self, LoadedConfig};
use quiver_search::eval;
use quiver_tool::registry::{RegistrySnapshot, ToolRegistry};
use quiver_tool::scope::Scope;

mod call_cli;
mod chat_cli;
mod chat_remote;
mod example_server;
mod mcp_cli;
mod plugin_cli;
mod serve_cli;
mod status_cli;
mod store_cli;
mod tools_cli;

// mimalloc instead of the system allocator: loading a large catalog is
// mostly small allocations and frees (names, schema trees parsed and
// dropped), which glibc's malloc made a quarter of the start-up time.
// Plugins keep their own allocator: what crosses the plugin boundary is
// abi_stable types, freed through their own vtables.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "quiver",
    version,
    about = "Agent runtime with progressive tool disclosure"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon: the HTTP API and MCP gateway (or the gateway on stdio).
    Serve(serve_cli::ServeArgs),
    /// Talk to a configured model with the configured tools, in this terminal.
    Chat(chat_cli::ChatArgs),
    /// Check configuration files.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Assemble and search tool catalogs from catalog files.
    #[command(subcommand)]
    Catalog(CatalogCommand),
    /// Write, check and list `.so` tool plugins.
    #[command(subcommand)]
    Plugin(plugin_cli::PluginCommand),
    /// Show the plugins, MCP servers and sessions (asking the running daemon, if any).
    Status(status_cli::StatusArgs),
    /// MCP servers that sign in with OAuth: log in, log out.
    #[command(subcommand)]
    Mcp(mcp_cli::McpCommand),
    /// The live tool catalog: dump it, accept quarantined MCP tool definitions.
    #[command(subcommand)]
    Tools(tools_cli::ToolsCommand),
    /// Run one tool call through the dispatch chain, as the daemon would.
    Call(call_cli::CallArgs),
    /// The state store: copy one into another (SQLite to PostgreSQL).
    #[command(subcommand)]
    Store(store_cli::StoreCommand),
    /// The example notes MCP server of the embedded default config (stdio).
    ExampleMcpServer(example_server::ExampleServerArgs),
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate a config file: prints warnings and errors, exits non-zero on error.
    Check {
        /// The quiver.yaml to check.
        file: PathBuf,
    },
    /// Print the JSON Schema (draft 2020-12) of quiver.yaml, made from the
    /// description of every key.
    Schema {
        /// Print the README's markdown table of every key instead.
        #[arg(long, conflicts_with = "write")]
        markdown: bool,
        /// Rewrite docs/quiver.schema.json and the README's table in this
        /// checkout of the repository (e.g. `.`).
        #[arg(long, value_name = "REPO")]
        write: Option<PathBuf>,
    },
}

#[derive(Args)]
struct CatalogSource {
    /// Catalog file(s) in the shared catalog format; each server becomes an
    /// MCP server. None: the live sources of the config (its plugins and
    /// MCP servers, started for the purpose) and the core tools.
    #[arg(long = "catalog")]
    catalogs: Vec<PathBuf>,
    /// Config file (default: ./quiver.yaml, else the user config directory's, else the embedded default).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Without --catalog: how long to wait for the MCP servers' first connection, in seconds.
    #[arg(long, default_value_t = 10.0)]
    wait_s: f64,
    /// Without --catalog: relax the plugin trust checks, for local development.
    #[arg(long)]
    dev: bool,
}

#[derive(Subcommand)]
enum CatalogCommand {
    /// Print what the model would be sent for a session of the given context size.
    Assemble {
        #[command(flatten)]
        source: CatalogSource,
        /// The session's context window, in tokens.
        #[arg(long)]
        context_tokens: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Score tool_search on query sets with gold tools: recall@k, hit@k, MRR@10.
    Eval {
        /// Catalog file for every query set (default: each set's own `catalog`,
        /// found next to its `queries/` directory).
        #[arg(long)]
        catalog: Option<PathBuf>,
        /// Query-set file(s) in the shared `queries/` format.
        #[arg(long = "queries", required = true)]
        queries: Vec<PathBuf>,
        /// Config file (default: the embedded default config).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Ranks counted for recall and hit.
        #[arg(long, default_value_t = 5)]
        k: usize,
        /// Search mode, overriding the config's `mode`; `hybrid` is
        /// `enhanced` fused with an embedding model (`--embeddings`, or the
        /// config's `tools.tool_search.embeddings`), and reports its wins
        /// and losses against `enhanced` alone.
        #[arg(long, value_parser = ["classic", "enhanced", "hybrid"])]
        mode: Option<String>,
        /// The sentence-transformers model directory for `--mode hybrid`.
        #[arg(long)]
        embeddings: Option<PathBuf>,
        /// The similarity's weight for `--mode hybrid`, overriding the config.
        #[arg(long)]
        weight: Option<f64>,
        /// Score only the queries at odd or even 0-based positions (the
        /// tuning and held-out halves).
        #[arg(long, value_parser = ["odd", "even"])]
        half: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run tool_search queries against the catalog. With an embedding model
    /// (the config's `tools.tool_search.embeddings`, or `--embeddings`) the
    /// search is hybrid: it first waits for every tool's vector, showing
    /// progress, unless `--no-wait`; each result says which stages ran.
    Search {
        #[command(flatten)]
        source: CatalogSource,
        /// The sentence-transformers model directory for hybrid search,
        /// overriding the config's `tools.tool_search.embeddings.model`.
        #[arg(long)]
        embeddings: Option<PathBuf>,
        /// Search at once, while tools are still being embedded (those
        /// are matched lexically only, and the results say so).
        #[arg(long)]
        no_wait: bool,
        /// Matches per query (default: search_default_limit).
        #[arg(long)]
        limit: Option<i64>,
        /// A file of queries, one JSON object {"query": ...} per line.
        #[arg(long)]
        queries: Option<PathBuf>,
        /// Print one JSON line per query.
        #[arg(long)]
        json: bool,
        /// The query (unless --queries is given).
        query: Option<String>,
    },
}

fn main() -> ExitCode {
    init_logging();
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", describe(&error));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, `: `-joined like `{:#}`, each said once:
/// many error types (I/O wrappers here, SQLite's) put their cause in
/// their own message and also return it as their source.
fn describe(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// Logs go to stderr: text (`QUIVER_LOG_FORMAT` unset or `text`), or one
/// JSON object per line (`json`, tracing-subscriber's JSON layer), filtered
/// by `QUIVER_LOG` (default `warn`). The startup summary's lines
/// (`quiver::summary`) are always shown: as plain lines in text, as
/// records in JSON.
fn init_logging() {
    use tracing_subscriber::filter::{EnvFilter, LevelFilter, Targets, filter_fn};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{Layer, fmt};

    let summary = quiver_daemon::startup::SUMMARY_TARGET;
    let filter =
        || EnvFilter::try_from_env("QUIVER_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let format = std::env::var("QUIVER_LOG_FORMAT").unwrap_or_default();
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut unknown_format = None;
    // rmcp's WARN for every error answer (method probes, cancelled calls)
    // is left out: the gateway logs its own at their level.
    let rmcp_error_answers = filter_fn(quiver_daemon::jsonrpc::keeps_event);
    match format.trim() {
        "json" => {
            let directive = format!("{summary}=info");
            let filter = match directive.parse() {
                Ok(directive) => filter().add_directive(directive),
                Err(_) => filter(),
            };
            tracing_subscriber::registry()
                .with(rmcp_error_answers)
                .with(
                    fmt::layer()
                        .json()
                        .with_current_span(false)
                        .with_writer(std::io::stderr)
                        .with_filter(filter),
                )
                .init();
        }
        other => {
            if !other.is_empty() && other != "text" {
                unknown_format = Some(other.to_owned());
            }
            // The summary's lines: the message alone, no time, level or
            // target, so that they read as a report.
            let plain = fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .without_time()
                .with_level(false)
                .with_target(false)
                .fmt_fields(fmt::format::debug_fn(|writer, field, value| {
                    if field.name() == "message" {
                        write!(writer, "{value:?}")
                    } else {
                        Ok(())
                    }
                }))
                .with_filter(Targets::new().with_target(summary, LevelFilter::INFO));
            let everything_else = Targets::new()
                .with_target(summary, LevelFilter::OFF)
                .with_default(LevelFilter::TRACE);
            tracing_subscriber::registry()
                .with(rmcp_error_answers)
                .with(plain)
                .with(
                    fmt::layer()
                        .with_writer(std::io::stderr)
                        .with_ansi(ansi)
                        .with_filter(filter())
                        .with_filter(everything_else),
                )
                .init();
        }
    }
    if let Some(format) = unknown_format {
        tracing::warn!(
            "QUIVER_LOG_FORMAT={format} is not a log format (json, text); logging as text"
        );
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Serve(args) => serve_cli::run(args),
        Command::Chat(args) => chat_cli::run(args),
        Command::ExampleMcpServer(args) => example_server::run(args).map(|()| ExitCode::SUCCESS),
        Command::Config(ConfigCommand::Check { file }) => Ok(config_check(&file)),
        Command::Config(ConfigCommand::Schema { markdown, write }) => {
            config_schema(markdown, write.as_deref())
        }
        Command::Plugin(command) => plugin_cli::run(command),
        Command::Status(args) => status_cli::run(args),
        Command::Call(args) => call_cli::run(args),
        Command::Tools(command) => tools_cli::run(command),
        Command::Mcp(command) => mcp_cli::run(command),
        Command::Store(command) => store_cli::run(command),
        Command::Catalog(CatalogCommand::Assemble {
            source,
            context_tokens,
            json,
        }) => {
            let (assembler, snapshot) = load(&source)?;
            let assembly = assembler.assemble(&snapshot, &Scope::all(), context_tokens);
            let mut out = std::io::stdout().lock();
            if json {
                serde_json::to_writer(&mut out, &assembly.to_json())?;
                writeln!(out)?;
            } else {
                writeln!(
                    out,
                    "tier {} ({:?}); {} deferred tools ({} tokens of definitions); listing {} of {} tokens",
                    assembly.tier() as u8,
                    assembly.listing().form,
                    assembly.catalog().deferred_count(),
                    assembly.deferred_tokens(),
                    assembly.listing().tokens,
                    assembly.budget_tokens()
                )?;
                writeln!(
                    out,
                    "tool search: {}",
                    assembly.savings().describe(assembly.tool_count())
                )?;
                for group in &assembly.listing().groups {
                    writeln!(
                        out,
                        "  {:<32} {:>6} tools  {:?}",
                        group.name, group.tools, group.mode
                    )?;
                }
                if !assembly.listing().text.is_empty() {
                    writeln!(out, "\n{}", assembly.listing().text)?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Catalog(CatalogCommand::Eval {
            catalog,
            queries,
            config,
            k,
            mode,
            embeddings,
            weight,
            half,
            json,
        }) => {
            catalog_eval(&EvalOptions {
                catalog: catalog.as_deref(),
                query_files: &queries,
                config: config.as_deref(),
                k,
                mode: mode.as_deref(),
                embeddings: embeddings.as_deref(),
                weight,
                half: half.as_deref().map(|h| h == "odd"),
                json,
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Catalog(CatalogCommand::Search {
            source,
            embeddings,
            no_wait,
            limit,
            queries,
            json,
            query,
        }) => {
            let queries = match (queries, query) {
                (Some(file), None) => read_queries(&file)?,
                (None, Some(query)) => vec![query],
                (Some(_), Some(_)) => {
                    anyhow::bail!("give either a QUERY or --queries FILE, not both")
                }
                (None, None) => anyhow::bail!("give a QUERY or --queries FILE"),
            };
            let (assembler, snapshot) = load_searching(&source, embeddings.as_deref())?;
            // Search indexes the catalog as assembled for a large context;
            // the context size does not change what is searchable.
            let assembly = assembler.assemble(&snapshot, &Scope::all(), 1_000_000);
            if let Some(semantic) = assembler.semantic() {
                // Indexing the catalog queues its tools for the model.
                let _ = assembly.catalog().index();
                if !no_wait {
                    wait_for_vectors(semantic);
                }
            }
            let mut out = std::io::stdout().lock();
            let mut said = None;
            for query in queries {
                let (hits, run) = assembly.search_run(&query, limit);
                if json {
                    let matches: Vec<_> = hits
                        .iter()
                        .map(|h| {
                            json!({
                                "name": h.tool.name(),
                                "server": h.tool.source().group(),
                                "tool": h.tool.original_name(),
                                "score": round_score(h.score),
                            })
                        })
                        .collect();
                    let mut line = json!({"query": query, "matches": matches});
                    if let (Some(line), serde_json::Value::Object(run)) =
                        (line.as_object_mut(), run.to_json())
                    {
                        line.extend(run);
                    }
                    serde_json::to_writer(&mut out, &line)?;
                    writeln!(out)?;
                } else {
                    // What ran, said once, and again when it changes.
                    let told = (run.name(), run.note());
                    if said.as_ref() != Some(&told) {
                        match &told.1 {
                            Some(note) => writeln!(out, "({} search: {note})", told.0)?,
                            None => writeln!(out, "({} search)", told.0)?,
                        }
                        said = Some(told);
                    }
                    writeln!(out, "{query}")?;
                    for hit in &hits {
                        writeln!(out, "  {:>9.4}  {}", hit.score, hit.tool.name())?;
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

struct EvalOptions<'a> {
    catalog: Option<&'a Path>,
    query_files: &'a [PathBuf],
    config: Option<&'a Path>,
    k: usize,
    mode: Option<&'a str>,
    embeddings: Option<&'a Path>,
    weight: Option<f64>,
    half: Option<bool>,
    json: bool,
}

/// One set's hybrid run against its lexical baseline.
struct Versus {
    wins: usize,
    losses: usize,
    lexical_recall: f64,
    lexical_hit: f64,
    /// Recall of the odd half (hybrid, lexical), then of the even half.
    halves: [f64; 4],
    /// Hit of the odd half (hybrid, lexical), then of the even half.
    half_hits: [f64; 4],
}

fn catalog_eval(options: &EvalOptions<'_>) -> Result<()> {
    let loaded = load_config(options.config)?;
    let state_dir = loaded.config.serve.state_dir();
    let mut search = loaded.config.tool_search;
    let hybrid = options.mode == Some("hybrid");
    match options.mode {
        Some("classic") => search.mode = SearchMode::Classic,
        Some("enhanced" | "hybrid") => search.mode = SearchMode::Enhanced,
        _ => {}
    }
    let mut embeddings = search.embeddings.take();
    if let Some(dir) = options.embeddings {
        let cwd = std::env::current_dir().unwrap_or_default();
        let mut given = EmbeddingsConfig::new(quiver_config::paths::absolute(&cwd, dir));
        if let Some(old) = &embeddings {
            given.weight = old.weight;
            given.max_tokens = old.max_tokens;
            given.threads = old.threads;
        }
        embeddings = Some(given);
    }
    if let (Some(weight), Some(embeddings)) = (options.weight, embeddings.as_mut()) {
        anyhow::ensure!(
            (0.0..=1.0).contains(&weight),
            "--weight {weight} is not from 0 to 1"
        );
        embeddings.weight = weight;
    }
    let semantic = match (hybrid, embeddings) {
        (false, _) => None,
        (true, None) => anyhow::bail!(
            "--mode hybrid needs a model: --embeddings DIR or tools.tool_search.embeddings in the config"
        ),
        (true, Some(embeddings)) => {
            // Evaluation may embed thousands of tools: every core.
            let mut embeddings = embeddings;
            embeddings
                .threads
                .get_or_insert_with(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            Some(std::sync::Arc::new(SemanticIndex::open(
                &embeddings,
                Some(&state_dir),
            )?))
        }
    };
    let lexical = Assembler::new(search.clone());
    let fused = semantic
        .clone()
        .map(|semantic| Assembler::with_semantic(search, Some(semantic)));
    let mut reports = Vec::new();
    let mut baselines = Vec::new();
    // Per hybrid set: its tools' vectors and the queries ranked with them.
    let mut stages: Vec<serde_json::Value> = Vec::new();
    for file in options.query_files {
        let set = eval::half(&eval::read_query_set(file)?, options.half);
        let catalog_file = options
            .catalog
            .map(Path::to_path_buf)
            .unwrap_or_else(|| eval::catalog_path(file, &set));
        let document = catalog_file::read(&catalog_file)?;
        let registry = ToolRegistry::new();
        catalog_file::register(&registry, [document]);
        let snapshot = registry.snapshot();
        let name = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let assembly = lexical.assemble(&snapshot, &Scope::all(), 1_000_000);
        let baseline = eval::evaluate(
            &name,
            |query, limit| assembly.search_unclamped(query, limit),
            &set,
            options.k,
        );
        let (Some(fused), Some(semantic)) = (&fused, &semantic) else {
            reports.push(baseline);
            continue;
        };
        let assembly = fused.assemble(&snapshot, &Scope::all(), 1_000_000);
        let started = std::time::Instant::now();
        let cached = semantic.embedded();
        let _ = assembly.catalog().index();
        semantic.wait_idle();
        let queries: Vec<&str> = set.queries.iter().map(|q| q.query.as_str()).collect();
        let kept = semantic
            .shared()
            .query_cache(&state_dir)
            .map_err(|e| eprintln!("warning: query vectors not kept: {e}"))
            .ok();
        semantic.shared().prime_queries(&queries, kept.as_ref())?;
        let (ready, total) = assembly
            .catalog()
            .index()
            .dense()
            .map_or((0, 0), |dense| dense.progress());
        eprintln!(
            "{name}: {ready} of {total} tools embedded ({} new), {} queries, in {:.1} s",
            semantic.embedded() - cached,
            queries.len(),
            started.elapsed().as_secs_f64()
        );
        // Each query's search says whether the embedding stage ranked it.
        let hybrid_queries = std::cell::Cell::new(0usize);
        reports.push(eval::evaluate(
            &name,
            |query, limit| {
                let (hits, run) = assembly.catalog().search_run(query, limit);
                if run.is_fully_hybrid() {
                    hybrid_queries.set(hybrid_queries.get() + 1);
                }
                hits
            },
            &set,
            options.k,
        ));
        if hybrid_queries.get() < set.queries.len() {
            eprintln!(
                "warning: {name}: {} of {} queries were not ranked with every tool's vector",
                set.queries.len() - hybrid_queries.get(),
                set.queries.len()
            );
        }
        stages.push(json!({
            "embedded": {"ready": ready, "total": total},
            "hybrid_queries": hybrid_queries.get(),
        }));
        baselines.push(baseline);
    }
    let (queries, recall, hit, mrr) = eval::overall(&reports);
    let k = options.k;
    let versus: Vec<Versus> = reports
        .iter()
        .zip(&baselines)
        .map(|(r, b)| {
            let (wins, losses) = eval::wins_and_losses(r, b);
            Versus {
                wins,
                losses,
                lexical_recall: b.recall,
                lexical_hit: b.hit,
                halves: [
                    eval::half_recall(r, true),
                    eval::half_recall(b, true),
                    eval::half_recall(r, false),
                    eval::half_recall(b, false),
                ],
                half_hits: [
                    eval::half_hit(r, true),
                    eval::half_hit(b, true),
                    eval::half_hit(r, false),
                    eval::half_hit(b, false),
                ],
            }
        })
        .collect();
    let mut out = std::io::stdout().lock();
    if options.json {
        let mode = if hybrid {
            json!("hybrid")
        } else {
            json!(lexical.config().mode)
        };
        let versus_json: Vec<_> = versus
            .iter()
            .zip(&stages)
            .map(|(v, stage)| {
                json!({
                    "search": "hybrid",
                    "embedded": stage["embedded"],
                    "hybrid_queries": stage["hybrid_queries"],
                    "wins": v.wins,
                    "losses": v.losses,
                    "lexical_recall": v.lexical_recall,
                    "lexical_hit": v.lexical_hit,
                    "odd": {
                        "recall": v.halves[0], "lexical_recall": v.halves[1],
                        "hit": v.half_hits[0], "lexical_hit": v.half_hits[1],
                    },
                    "even": {
                        "recall": v.halves[2], "lexical_recall": v.halves[3],
                        "hit": v.half_hits[2], "lexical_hit": v.half_hits[3],
                    },
                })
            })
            .collect();
        let value = json!({
            "k": k,
            "mode": mode,
            "weight": semantic.as_ref().map(|s| s.config().weight),
            "sets": reports,
            "against_lexical": versus_json,
            "overall": {"queries": queries, "recall": recall, "hit": hit, "mrr": mrr},
        });
        serde_json::to_writer(&mut out, &value)?;
        writeln!(out)?;
    } else {
        write!(
            out,
            "{:<20} {:>7} {:>9} {:>7} {:>7}",
            "set",
            "queries",
            format!("recall@{k}"),
            format!("hit@{k}"),
            "MRR@10"
        )?;
        if hybrid {
            write!(
                out,
                " {:>9} {:>5} {:>6} {:>15} {:>15}",
                "lexical", "wins", "losses", "odd (lexical)", "even (lexical)"
            )?;
        }
        writeln!(out)?;
        for (at, r) in reports.iter().enumerate() {
            write!(
                out,
                "{:<20} {:>7} {:>9.3} {:>7.3} {:>7.3}",
                r.name, r.queries, r.recall, r.hit, r.mrr
            )?;
            if let Some(v) = versus.get(at) {
                let [odd, odd_lexical, even, even_lexical] = v.halves;
                write!(
                    out,
                    " {:>9.3} {:>5} {:>6} {:>15} {:>15}",
                    v.lexical_recall,
                    v.wins,
                    v.losses,
                    format!("{odd:.3} ({odd_lexical:.3})"),
                    format!("{even:.3} ({even_lexical:.3})")
                )?;
            }
            writeln!(out)?;
        }
        writeln!(
            out,
            "{:<20} {:>7} {:>9.3} {:>7.3} {:>7.3}",
            "overall", queries, recall, hit, mrr
        )?;
    }
    Ok(())
}

/// Every problem of `file`, one per line: `error: file:line:column: `key`:
/// message; allowed: ...`.
fn config_check(file: &Path) -> ExitCode {
    match config::check_file(file) {
        Ok(LoadedConfig { warnings, .. }) => {
            for warning in &warnings {
                eprintln!("warning: {warning}");
            }
            println!("{}: ok", file.display());
            ExitCode::SUCCESS
        }
        Err(errors) => {
            for error in &errors {
                eprintln!("error: {error}");
            }
            if errors.len() > 1 {
                eprintln!("{}: {} problems", file.display(), errors.len());
            }
            ExitCode::FAILURE
        }
    }
}

fn config_schema(markdown: bool, write: Option<&Path>) -> Result<ExitCode> {
    if let Some(root) = write {
        for path in config::write_docs(root).map_err(anyhow::Error::msg)? {
            eprintln!("wrote {}", path.display());
        }
    } else if markdown {
        print!("{}", config::markdown_table());
    } else {
        println!("{}", serde_json::to_string_pretty(&config::json_schema())?);
    }
    Ok(ExitCode::SUCCESS)
}

/// The config `--config` names, else the one [`config::discover`] finds
/// (`./quiver.yaml`, the user config directory's, the embedded default),
/// with its warnings printed.
fn load_config(path: Option<&Path>) -> Result<LoadedConfig, ConfigError> {
    load_config_from(&config::discover(path))
}

/// The MCP server `name` of `config`, or an error listing the configured ones.
fn configured_mcp_server<'c>(
    config: &'c config::Config,
    name: &str,
) -> Result<&'c quiver_mcp::McpServerConfig> {
    config.mcp_servers.get(name).ok_or_else(|| {
        let configured: Vec<&str> = config.mcp_servers.keys().map(String::as_str).collect();
        anyhow::anyhow!(
            "no MCP server `{name}` is configured; configured: {}",
            if configured.is_empty() {
                "none".to_owned()
            } else {
                configured.join(", ")
            }
        )
    })
}

/// [`load_config`] of a config already found.
fn load_config_from(origin: &config::ConfigOrigin) -> Result<LoadedConfig, ConfigError> {
    let loaded = origin.load()?;
    for warning in &loaded.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(loaded)
}

/// Starts the tool sources of the config (plugins, MCP servers, core tools)
/// as the daemon would, waits up to `wait_s` for the MCP servers' first
/// connection, runs `with` on the daemon and stops it.
fn live_sources<T>(
    config: Option<&Path>,
    wait_s: f64,
    dev: bool,
    with: impl FnOnce(&quiver_daemon::Daemon) -> T,
) -> Result<T> {
    let origin = config::discover(config);
    let loaded = load_config_from(&origin)?;
    let wait = std::time::Duration::try_from_secs_f64(wait_s.max(0.0)).unwrap_or_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let daemon = quiver_daemon::Daemon::start(
            loaded.config,
            quiver_daemon::DaemonOptions {
                dev,
                approver: Some(std::sync::Arc::new(quiver_dispatch::approval::DenyAll)),
                watch_plugins: false,
                config_file: origin.file().map(Path::to_path_buf),
                overrides: Default::default(),
                primary: false,
            },
        )
        .await?;
        for server in daemon.settle(wait).await {
            if !server.state.is_ready() && server.state.name() != "disabled" {
                eprintln!(
                    "warning: MCP server {} is {}: its tools are missing",
                    server.name,
                    server.state.describe()
                );
            }
        }
        let out = with(&daemon);
        daemon.shutdown().await;
        Ok(out)
    })
}

/// The embedding stage of `embeddings` (a model directory given on the
/// command line, with the config's other embedding settings) or else of
/// `configured`, loaded with its vector cache under `state_dir`; `None`
/// when neither names a model.
fn open_semantic(
    embeddings: Option<&Path>,
    configured: Option<&EmbeddingsConfig>,
    mode: SearchMode,
    state_dir: &Path,
) -> Result<Option<std::sync::Arc<SemanticIndex>>> {
    let wanted = match (embeddings, configured) {
        (None, None) => return Ok(None),
        (None, Some(configured)) => configured.clone(),
        (Some(dir), configured) => {
            let cwd = std::env::current_dir().unwrap_or_default();
            let mut given = EmbeddingsConfig::new(quiver_config::paths::absolute(&cwd, dir));
            if let Some(old) = configured {
                given.weight = old.weight;
                given.max_tokens = old.max_tokens;
                given.threads = old.threads;
            }
            given
        }
    };
    anyhow::ensure!(
        mode == SearchMode::Enhanced,
        "hybrid search fuses the embeddings with the enhanced mode; the config's tools.tool_search.mode is classic"
    );
    Ok(Some(std::sync::Arc::new(SemanticIndex::open(
        &wanted,
        Some(state_dir),
    )?)))
}

/// [`load`], and the embedding stage the search should use (see
/// [`open_semantic`]); for live sources, the daemon's own unless
/// `embeddings` names another model.
fn load_with_semantic(
    source: &CatalogSource,
    embeddings: Option<&Path>,
) -> Result<(
    Assembler,
    std::sync::Arc<RegistrySnapshot>,
    Option<std::sync::Arc<SemanticIndex>>,
)> {
    if source.catalogs.is_empty() {
        let (assembler, snapshot, semantic, state_dir) = live_sources(
            source.config.as_deref(),
            source.wait_s,
            source.dev,
            |daemon| {
                (
                    Assembler::new(daemon.config().tool_search.clone()),
                    daemon.registry().snapshot(),
                    daemon.semantic(),
                    daemon.state_dir().to_path_buf(),
                )
            },
        )?;
        let semantic = match embeddings {
            None => semantic,
            Some(_) => {
                let config = assembler.config();
                open_semantic(
                    embeddings,
                    config.embeddings.as_ref(),
                    config.mode,
                    &state_dir,
                )?
            }
        };
        return Ok((assembler, snapshot, semantic));
    }
    let (assembler, snapshot, state_dir) = load_catalogs(source)?;
    let config = assembler.config();
    let semantic = open_semantic(
        embeddings,
        config.embeddings.as_ref(),
        config.mode,
        &state_dir,
    )?;
    Ok((assembler, snapshot, semantic))
}

fn load(source: &CatalogSource) -> Result<(Assembler, std::sync::Arc<RegistrySnapshot>)> {
    if source.catalogs.is_empty() {
        return live_sources(
            source.config.as_deref(),
            source.wait_s,
            source.dev,
            |daemon| {
                (
                    Assembler::new(daemon.config().tool_search.clone()),
                    daemon.registry().snapshot(),
                )
            },
        );
    }
    let (assembler, snapshot, _) = load_catalogs(source)?;
    Ok((assembler, snapshot))
}

/// [`load`] of `--catalog` files: the assembler, the catalogs' tools and
/// the config's state directory.
fn load_catalogs(
    source: &CatalogSource,
) -> Result<(
    Assembler,
    std::sync::Arc<RegistrySnapshot>,
    std::path::PathBuf,
)> {
    let loaded = load_config(source.config.as_deref())?;
    let mut documents = Vec::new();
    for path in &source.catalogs {
        documents.push(catalog_file::read(path)?);
    }
    let registry = ToolRegistry::new();
    for entry in catalog_file::register(&registry, documents) {
        for refused in &entry.report.refused {
            eprintln!(
                "warning: {}: tool `{}` refused: {}",
                entry.source.toolset(),
                refused.name,
                refused.reason
            );
        }
    }
    let state_dir = loaded.config.serve.state_dir();
    Ok((
        Assembler::new(loaded.config.tool_search),
        registry.snapshot(),
        state_dir,
    ))
}

/// [`load`] for `catalog search`: with an embedding model (`embeddings`,
/// else the config's `tools.tool_search.embeddings`), an assembler whose
/// searches are hybrid.
fn load_searching(
    source: &CatalogSource,
    embeddings: Option<&Path>,
) -> Result<(Assembler, std::sync::Arc<RegistrySnapshot>)> {
    let (assembler, snapshot, semantic) = load_with_semantic(source, embeddings)?;
    let config = assembler.config().clone();
    Ok((Assembler::with_semantic(config, semantic), snapshot))
}

/// Blocks until every queued tool text of `semantic` is embedded (or the
/// model failed on some), showing `embedding tools: READY of TOTAL` on
/// stderr as it goes.
fn wait_for_vectors(semantic: &SemanticIndex) {
    let started = std::time::Instant::now();
    let mut shown = None;
    loop {
        let status = semantic.status();
        let done = status.ready >= status.total && semantic.is_idle();
        let stuck = semantic.is_idle() && status.failed > 0;
        if shown != Some(status.ready) && (!done || shown.is_some()) {
            eprint!("\rembedding tools: {} of {}", status.ready, status.total);
            shown = Some(status.ready);
        }
        if done || stuck {
            if shown.is_some() {
                eprintln!(" ({:.1} s)", started.elapsed().as_secs_f64());
            }
            if status.failed > 0 {
                eprintln!(
                    "warning: the model failed on {} tool texts; those tools are matched lexically only",
                    status.failed
                );
            }
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

fn read_queries(path: &Path) -> Result<Vec<String>> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut queries = Vec::new();
    for (number, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("cannot read {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(&line)
            .with_context(|| format!("{}:{}: not a JSON object", path.display(), number + 1))?;
        let query = value
            .get("query")
            .and_then(|q| q.as_str())
            .with_context(|| format!("{}:{}: no string `query` key", path.display(), number + 1))?;
        queries.push(query.to_owned());
    }
    Ok(queries)
}
