//! The foundation every settings section of `quiver.yaml` is built on:
//! [`ConfigError`] and [`ConfigWarning`] (file, line, column, key and the
//! allowed values), reading a document with its key path kept
//! ([`read_document`]), clamped numbers ([`clamp`]), `${VAR}` expansion
//! ([`expand_vars`]), and the path rules: every path made absolute once
//! ([`paths::absolute`]), every directory Quiver creates private
//! ([`paths::make_private_dir`]); each key described once ([`Setting`]),
//! from which come the range checks, `quiver config check`'s checks of a
//! whole file ([`check_document`]), the JSON Schema and the README table.
//!
//! Each crate owns its own section (raw shape, validation, allowed values);
//! the daemon's root config composes them.

mod check;
mod document;
mod error;
pub mod paths;
pub mod setting;
mod value;
mod vars;

pub use check::{check_document, did_you_mean, syntax_and_duplicates};
pub use document::read_document;
pub use error::{ConfigError, ConfigWarning};
pub use setting::{Below, Kind, Setting, int_setting};
pub use value::{IntKey, Switch, clamp, invalid_at};
pub use vars::expand_vars;

/// A value as written in the file, with its line and column.
pub use serde_saphyr::Spanned;
