//! The subcommands that make failmode a tool in the user's own repository, one module each;
//! `main.rs` parses and dispatches to them.

pub mod check;
pub mod init;
mod init_text;
pub mod list;
pub mod scenario;
pub mod setup;
