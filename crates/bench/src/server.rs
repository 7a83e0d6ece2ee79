//! The private server a bench run measures (and the importer's end-to-end tests use): a
//! `basalt` executable serving on a free loopback port with a temporary `--dbpath`,
//! killed when dropped, so a bench never touches a user's server or data.

use crate::io_error;
use basalt_error::{Error, ErrorCode, Result};
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const START_TIMEOUT: Duration = Duration::from_secs(30);

pub struct ServerProcess {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl ServerProcess {
    /// Starts `exe --dbpath dbpath` (a `basalt` binary) on a free port, with
    /// `scan_workers` when given, and waits until it accepts connections; its log goes
    /// to `log`.
    pub fn start(
        exe: &Path,
        dbpath: &Path,
        log: &Path,
        scan_workers: Option<usize>,
    ) -> Result<ServerProcess> {
        let port = free_port()?;
        let log_file = File::create(log)
            .map_err(|e| io_error(format!("cannot create {}", log.display()), e))?;
        let child = Command::new(exe)
            .arg("--port")
            .arg(port.to_string())
            .args(["--bind_ip", "127.0.0.1", "--quiet", "--dbpath"])
            .arg(dbpath)
            .args(scan_workers.map(|n| format!("--setParameter=scanWorkers={n}")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(|e| io_error(format!("cannot start {}", exe.display()), e))?;
        let mut server = ServerProcess {
            child,
            port,
            log: log.to_path_buf(),
        };
        server.wait_until_ready()?;
        Ok(server)
    }

    pub fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}/?directConnection=true", self.port)
    }

    fn wait_until_ready(&mut self) -> Result<()> {
        let started = Instant::now();
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        while started.elapsed() < START_TIMEOUT {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(self.failure(&format!("the server exited ({status})")));
            }
            if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(self.failure("the server did not start listening within 30 s"))
    }

    fn failure(&self, what: &str) -> Error {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        Error::new(
            ErrorCode::OPERATION_FAILED,
            format!("{what}; its log ({}):\n{log}", self.log.display()),
        )
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Only the process this run started, by its handle; its data is temporary.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nobody listens on now (the OS picks it).
fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| io_error("cannot find a free port", e))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| io_error("cannot find a free port", e))
}
