//! Quiver's tool model, at the bottom of every other crate: what a tool is
//! ([`tool`]), how it is named ([`naming`]), which tools a session may see
//! ([`scope`]), the live tools of every source ([`registry`]), how sources
//! report their state ([`status`]), token counts ([`tokens`]), the
//! contract that runs a tool ([`executor`]), a running call's progress
//! ([`progress`]) and the pinning and screening of tool definitions
//! ([`integrity`]).

pub mod executor;
pub mod integrity;
pub mod naming;
pub mod progress;
pub mod registry;
pub mod schema;
pub mod scope;
pub mod status;
pub mod tokens;
pub mod tool;
