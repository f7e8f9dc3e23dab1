//! Quiver's tool model, at the bottom of every other crate: what a tool is
//! ([`tool`]), how it is named ([`naming`]), which tools a session may see
//! ([`scope`]), the live tools of every source ([`registry`]), how sources
//! report their state ([`status`]), token counts ([`tokens`]) and the
//! contract that runs a tool ([`executor`]).

pub mod executor;
pub mod naming;
pub mod registry;
pub mod scope;
pub mod status;
pub mod tokens;
pub mod tool;
