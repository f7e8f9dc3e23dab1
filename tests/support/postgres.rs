//! A throwaway PostgreSQL cluster for the tests: `initdb` into a temporary
//! directory, a server that listens on a unix socket in that directory
//! only (no TCP at all), on a port number picked free, stopped and removed
//! when dropped. As root (CI), the server runs as the `postgres` user,
//! which initdb insists on.
#![allow(missing_docs)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A running cluster.
pub struct Cluster {
    dir: tempfile::TempDir,
    port: u16,
    owner: Option<(u32, u32)>,
    bin: PathBuf,
}

/// The user the server runs as when the tests run as root.
const SERVER_USER: &str = "postgres";

/// The directory of `initdb` and `pg_ctl`: on `PATH`, else Debian's
/// versioned directory.
fn bin_dir() -> PathBuf {
    if let Ok(path) = std::env::var("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
                return dir;
            }
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path().join("bin"))
        .filter(|d| d.join("initdb").is_file())
        .collect();
    versions.sort();
    versions
        .pop()
        .expect("PostgreSQL's initdb and pg_ctl are not installed (.ci/run installs them)")
}

/// The uid and gid of `user`.
fn user_ids(user: &str) -> Option<(u32, u32)> {
    let name = std::ffi::CString::new(user).ok()?;
    // SAFETY: getpwnam reads a NUL-terminated name; the record it returns
    // is read at once, before any other call that could reuse it.
    let entry = unsafe { libc::getpwnam(name.as_ptr()) };
    if entry.is_null() {
        return None;
    }
    // SAFETY: non-null, as checked.
    let entry = unsafe { &*entry };
    Some((entry.pw_uid, entry.pw_gid))
}

impl Cluster {
    /// Makes and starts a new cluster, with a database `quiver`.
    pub fn start() -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("quiver-pg-")
            .tempdir()
            .unwrap();
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let owner = root.then(|| {
            user_ids(SERVER_USER).unwrap_or_else(|| {
                panic!("running as root, the server needs the `{SERVER_USER}` user (Debian's postgresql package makes it)")
            })
        });
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
        }
        // A free port number: only the socket's name uses it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cluster = Cluster {
            dir,
            port,
            owner,
            bin: bin_dir(),
        };
        cluster.run(
            "initdb",
            &[
                "-D",
                &cluster.data().display().to_string(),
                "-U",
                "quiver",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ],
        );
        cluster.up();
        cluster.run(
            "createdb",
            &[
                "-h",
                &cluster.socket_dir().display().to_string(),
                "-p",
                &port.to_string(),
                "-U",
                "quiver",
                "quiver",
            ],
        );
        cluster
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Where the server's socket is.
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The port the server's socket is named by.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of the `quiver` database.
    pub fn url(&self) -> String {
        self.url_of("quiver")
    }

    /// The URL of database `database`.
    pub fn url_of(&self, database: &str) -> String {
        format!(
            "postgres://quiver@localhost/{database}?host={}&port={}",
            self.socket_dir().display(),
            self.port
        )
    }

    /// Makes database `name` and returns its URL.
    pub fn database(&self, name: &str) -> String {
        self.run(
            "createdb",
            &[
                "-h",
                &self.socket_dir().display().to_string(),
                "-p",
                &self.port.to_string(),
                "-U",
                "quiver",
                name,
            ],
        );
        self.url_of(name)
    }

    /// Runs `sql` in database `quiver` with psql; its stdout.
    pub fn psql(&self, sql: &str) -> String {
        let mut command = self.command("psql");
        command.args([
            "-h",
            &self.socket_dir().display().to_string(),
            "-p",
            &self.port.to_string(),
            "-U",
            "quiver",
            "-d",
            "quiver",
            "-AtX",
            "-c",
            sql,
        ]);
        let output = output_of(command, "psql");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Starts the server (again, after [`Cluster::down`]).
    pub fn up(&self) {
        let options = format!(
            "-c listen_addresses='' -k {} -p {} -c fsync=off -c full_page_writes=off",
            self.socket_dir().display(),
            self.port
        );
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data().display().to_string(),
                "-o",
                &options,
                "-l",
                &self.dir.path().join("server.log").display().to_string(),
                "-w",
                "start",
            ],
        );
    }

    /// Stops the server at once (connections are cut), as a crash or an
    /// outage would.
    pub fn down(&self) {
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data().display().to_string(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
        );
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        let mut command = Command::new(if path.is_file() {
            path
        } else {
            PathBuf::from(program)
        });
        if let Some((uid, gid)) = self.owner {
            command.uid(uid).gid(gid);
        }
        command.current_dir(self.dir.path());
        command
    }

    fn run(&self, program: &str, args: &[&str]) {
        let mut command = self.command(program);
        command.args(args);
        output_of(command, program);
    }
}

fn output_of(mut command: Command, program: &str) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        output.status.success(),
        "{program} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let mut command = self.command("pg_ctl");
        command.args([
            "-D",
            &self.data().display().to_string(),
            "-m",
            "immediate",
            "stop",
        ]);
        let _ = command.output();
    }
}
