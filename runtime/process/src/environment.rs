//! The environment a child starts with: the daemon's variables whose
//! names match an allow-list of globs, then variables set in the config.
//! `run_command` and stdio MCP servers both start from it, so neither
//! inherits the daemon's secrets.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use globset::{Glob, GlobSet, GlobSetBuilder};

/// The daemon's variables a child inherits by default: what programs need
/// to run and to read and write text, and nothing that usually holds a
/// secret (such as model API keys).
pub const DEFAULT_ENV_INHERIT: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TERM", "TZ", "TMPDIR",
];

/// The environment a child (a `run_command` command, a stdio MCP server)
/// starts with: the daemon's variables whose
/// names match one of the `inherit` globs, then the `set` ones (which win).
///
/// ```
/// use std::collections::BTreeMap;
/// use quiver_process::environment::CommandEnvironment;
///
/// let set = BTreeMap::from([("CI".to_owned(), "1".to_owned())]);
/// let environment = CommandEnvironment::new(vec!["PATH".into(), "LC_*".into()], set).unwrap();
/// let daemon = [("PATH", "/bin"), ("LC_ALL", "C"), ("OPENAI_API_KEY", "sk-x")]
///     .map(|(k, v)| (k.into(), v.into()));
/// let names: Vec<_> = environment.resolve(daemon).into_iter().map(|(k, _)| k).collect();
/// assert_eq!(names, ["PATH", "LC_ALL", "CI"]);
/// ```
#[derive(Debug, Clone)]
pub struct CommandEnvironment {
    inherit: Vec<String>,
    matcher: GlobSet,
    set: BTreeMap<String, String>,
}

impl CommandEnvironment {
    /// Inherits the variables named by `inherit` (globs: `LC_*`; `*` is
    /// all), then sets `set`. Fails on a glob that does not parse.
    pub fn new(
        inherit: Vec<String>,
        set: BTreeMap<String, String>,
    ) -> Result<Self, globset::Error> {
        let mut builder = GlobSetBuilder::new();
        for pattern in &inherit {
            builder.add(Glob::new(pattern)?);
        }
        Ok(CommandEnvironment {
            matcher: builder.build()?,
            inherit,
            set,
        })
    }

    /// The same allow-list with `set` as the variables set.
    pub fn with_set(mut self, set: BTreeMap<String, String>) -> Self {
        self.set = set;
        self
    }

    /// The globs of inherited variable names.
    pub fn inherit(&self) -> &[String] {
        &self.inherit
    }

    /// The variables set for every command.
    pub fn set(&self) -> &BTreeMap<String, String> {
        &self.set
    }

    /// The variables a command starts with, given the daemon's `from`
    /// (in its order, then the set ones).
    pub fn resolve(
        &self,
        from: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Vec<(OsString, OsString)> {
        let mut variables: Vec<(OsString, OsString)> = from
            .into_iter()
            .filter(|(name, _)| {
                !name.to_str().is_some_and(|n| self.set.contains_key(n))
                    && self.matcher.is_match(Path::new(name))
            })
            .collect();
        variables.extend(
            self.set
                .iter()
                .map(|(name, value)| (OsString::from(name), OsString::from(value))),
        );
        variables
    }
}

impl Default for CommandEnvironment {
    fn default() -> Self {
        let inherit: Vec<String> = DEFAULT_ENV_INHERIT.iter().map(|&p| p.to_owned()).collect();
        CommandEnvironment::new(inherit.clone(), BTreeMap::new()).unwrap_or(CommandEnvironment {
            inherit,
            matcher: GlobSet::empty(),
            set: BTreeMap::new(),
        })
    }
}

impl PartialEq for CommandEnvironment {
    fn eq(&self, other: &Self) -> bool {
        self.inherit == other.inherit && self.set == other.set
    }
}

impl Eq for CommandEnvironment {}
