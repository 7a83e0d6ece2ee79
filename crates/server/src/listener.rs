//! Listening sockets, the accept loop and the connection limit.
//!
//! A connection storm (thousands of clients connecting at once, as an application fleet
//! does when it starts or its pools refill after a failover) must not cost seconds. It
//! did, for two reasons: the listen backlog was 128 (std's and tokio's default), and a
//! SYN that finds the queue full is dropped, so its client tries again after 1 s, then
//! 3 s, 7 s; and accepting was slow enough to let the queue fill (each socket was
//! registered with tokio only to be taken back, and a task spawned to start the
//! connection's thread). Now the backlog is as long as the kernel allows
//! (`net.core.somaxconn` caps it), and a thread of its own per listening socket does only
//! accept(2), the limit check and the spawn of the connection's thread, as mongod's
//! listener thread does; the spawn is most of what a connection costs it, the rest
//! happens on the connection's thread.
//!
//! The limit is mongod's: at most `--maxConns` connections, and no more than 80 % of the
//! open-file limit, so that the storage files, the journal and the spill files of sorts
//! always have descriptors left; and, since each connection has a thread, no more than
//! 80 % of what the kernel's limit on memory maps allows (see [`connection_limit`]). A
//! connection over the limit is accepted and closed at once without a reply, logged, and
//! counted in serverStatus's `connections.rejected`; the server goes on serving the
//! others.

use crate::{connection, Server, ServerOptions};
use socket2::{Domain, Socket, Type};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// mongod's default `--maxConns`: no limit but the open-file one, in practice.
pub const MAX_CONNS_DEFAULT: u64 = 1_000_000;
/// The share of the open-file limit connections may take, as mongod's; also their share
/// of the memory-map limit.
const LIMIT_SHARE_PERCENT: u64 = 80;
/// Memory maps a connection's thread takes: stack, signal stack and a guard page each.
const MAPS_PER_CONNECTION: u64 = 4;
/// Asked of listen(2); the kernel caps it at `net.core.somaxconn` (4096 by default
/// since Linux 5.4).
const LISTEN_BACKLOG: i32 = 65_535;
/// Pause after a failed accept (out of descriptors, say), so the loop does not spin.
const ACCEPT_RETRY_DELAY_MS: u64 = 100;

/// Binds every address of `--bind_ip` on the port, with a backlog for connection storms.
pub fn bind(options: &ServerOptions) -> std::io::Result<Vec<TcpListener>> {
    bind_port(options, options.port)
}

/// Binds every address of `--bind_ip` on `port` (the HTTP interface's, say).
pub fn bind_port(options: &ServerOptions, port: u16) -> std::io::Result<Vec<TcpListener>> {
    let mut listeners = Vec::new();
    for ip in &options.bind_ip {
        let host = if ip == "localhost" {
            "127.0.0.1"
        } else {
            ip.as_str()
        };
        let addr: SocketAddr = format!("{host}:{port}")
            .parse()
            .or_else(|_| format!("[{host}]:{port}").parse())
            .map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("bad --bind_ip {ip}: {e}"),
                )
            })?;
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
        // A restarted server binds while its old connections linger in TIME_WAIT.
        socket.set_reuse_address(true)?;
        socket.bind(&addr.into())?;
        socket.listen(LISTEN_BACKLOG)?;
        listeners.push(socket.into());
    }
    Ok(listeners)
}

/// Raises this process's soft limit on open files to its hard limit, and logs it: every
/// connection is a descriptor, and the soft limit is often 1024 while the hard one is
/// far higher.
fn raise_open_files_limit() {
    let before = rlimit::getrlimit(rlimit::Resource::NOFILE);
    match (before, rlimit::increase_nofile_limit(u64::MAX)) {
        (Ok((soft_before, hard)), Ok(soft)) => {
            tracing::info!(soft, soft_before, hard, "open files limit");
        }
        (Err(e), _) | (_, Err(e)) => {
            tracing::warn!("cannot raise the open files limit: {e}");
        }
    }
}

/// The connection limit: `max_conns`, capped at mongod's share of the open-file limit
/// (raised first to its hard limit)
/// and at what the kernel's limit on memory maps leaves room for. Every connection's
/// thread maps four regions (its stack and the signal stack, each with a guard page), and
/// once the process reaches `vm.max_map_count` any allocation that needs a new map fails
/// and aborts the server, so connection threads may only take a share of it.
pub(crate) fn connection_limit(max_conns: u64) -> u64 {
    raise_open_files_limit();
    let open_files = rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(u64::MAX, |(soft, _)| soft);
    let maps = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(u64::MAX);
    let supported = share(open_files, 1).min(share(maps, MAPS_PER_CONNECTION));
    if supported < max_conns && max_conns != MAX_CONNS_DEFAULT {
        tracing::info!(limit = supported, "--maxConns too high");
    }
    let limit = max_conns.min(supported);
    tracing::info!(limit, open_files, max_map_count = maps, "connection limit");
    limit
}

/// Connections that may take [`LIMIT_SHARE_PERCENT`] of `available` when each needs
/// `per_connection`.
fn share(available: u64, per_connection: u64) -> u64 {
    (u128::from(available) * u128::from(LIMIT_SHARE_PERCENT) / 100 / u128::from(per_connection))
        as u64
}

/// Starts a thread accepting on each listener. They run until the process ends.
pub(crate) fn accept_on(server: &Arc<Server>, listeners: Vec<TcpListener>) -> std::io::Result<()> {
    for listener in listeners {
        let server = server.clone();
        std::thread::Builder::new()
            .name("listener".into())
            .spawn(move || accept_loop(&server, &listener))?;
    }
    Ok(())
}

fn accept_loop(server: &Arc<Server>, listener: &TcpListener) {
    loop {
        match listener.accept() {
            Ok((stream, peer)) => admit(server, stream, peer),
            // The client gave up before it was accepted.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => {}
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                std::thread::sleep(Duration::from_millis(ACCEPT_RETRY_DELAY_MS));
            }
        }
    }
}

/// Gives an accepted connection its thread, or closes it when the limit is reached.
fn admit(server: &Arc<Server>, stream: TcpStream, peer: SocketAddr) {
    let connections = &server.stats.connections;
    match connections.open(server.connection_limit) {
        Ok(count) => {
            if let Err(e) = connection::start(server, stream, peer, count) {
                connections.close();
                tracing::warn!(remote = %peer, "could not start a connection thread: {e}");
            }
        }
        Err(count) => {
            drop(stream);
            crate::stats::Stats::add(&connections.rejected, 1);
            if !server.options.quiet {
                tracing::info!(
                    remote = %peer,
                    connectionCount = count,
                    "Connection refused because there are too many open connections"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_may_take_80_percent_of_the_open_files_and_maps() {
        assert_eq!(share(1024, 1), 819);
        assert_eq!(share(64_000, 1), 51_200);
        // Linux's default vm.max_map_count.
        assert_eq!(share(65_530, MAPS_PER_CONNECTION), 13_106);
        // No limit on open files leaves --maxConns in charge.
        assert!(share(rlimit::INFINITY, 1) > MAX_CONNS_DEFAULT);
    }
}
