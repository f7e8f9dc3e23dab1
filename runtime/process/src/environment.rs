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

/// Why `pattern` cannot be an allow-list entry (`env_inherit`), if it
/// cannot: it is empty or not a glob. One check for every config that
/// takes such a list (`run_command`, each stdio MCP server).
pub fn inherit_pattern_problem(pattern: &str) -> Option<String> {
    if pattern.trim().is_empty() {
        return Some("empty glob".to_owned());
    }
    Glob::new(pattern)
        .err()
        .map(|error| format!("`{pattern}` is not a valid glob: {}", error.kind()))
}

/// Why `name=value` cannot be set in a child's environment, if it cannot:
/// an empty name, `=` or NUL in the name, or NUL in the value (the
/// operating system could not pass it on, and the spawn would fail later).
pub fn variable_problem(name: &str, value: &str) -> Option<String> {
    if name.is_empty() || name.contains(['=', '\0']) {
        Some(format!(
            "variable name {name:?} is empty or holds `=` or NUL"
        ))
    } else if value.contains('\0') {
        Some(format!("the value of {name} holds a NUL byte"))
    } else {
        None
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inherit_patterns_must_be_globs() {
        assert_eq!(inherit_pattern_problem("LC_*"), None);
        assert_eq!(inherit_pattern_problem(" ").as_deref(), Some("empty glob"));
        let problem = inherit_pattern_problem("LC_[").expect("refused");
        assert!(problem.contains("`LC_[` is not a valid glob"), "{problem}");
    }

    #[test]
    fn variables_the_os_cannot_pass_are_refused() {
        assert_eq!(variable_problem("TZ", "UTC"), None);
        assert!(variable_problem("", "x").is_some());
        assert!(variable_problem("A=B", "x").is_some());
        let problem = variable_problem("TZ", "U\0TC").expect("refused");
        assert!(problem.contains("TZ holds a NUL"), "{problem}");
    }
}
