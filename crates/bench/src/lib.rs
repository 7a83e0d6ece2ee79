//! `basalt import` and `basalt bench`: the bulk loader every analytics user needs first,
//! and the benchmark suite that puts Basalt's figures beside its peers' (DESIGN §7).
//!
//! Both talk to a server over the wire protocol only, through the official Rust driver
//! or, where the driver would be what is measured, raw sockets (`raw_wire`), so what
//! they measure is what any client gets. The binary (`crates/basalt`) mounts
//! [`ImportArgs`] and [`BenchArgs`] as subcommands.

mod answer;
pub mod import;
mod machine;
mod measure;
mod peers;
mod raw_wire;
mod report;
mod server;
mod suite;
pub mod tools;
mod workloads;

pub use import::ImportArgs;
pub use server::ServerProcess;
pub use suite::{bench, BenchArgs};

use basalt_error::{Error, ErrorCode};

/// An operating failure outside the database (a file, a process, a socket), with what was
/// being done when it happened.
pub(crate) fn io_error(doing: impl std::fmt::Display, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorCode::OPERATION_FAILED, format!("{doing}: {e}"))
}
