//! A private `redis-server` child process: a free loopback port, no persistence, ready when
//! it answers PING; hung with SIGSTOP, restarted empty (or crashed and restarted), and read
//! with `INFO` at phase boundaries. The readiness PING and `INFO` are raw RESP over TCP, kept
//! from before the harness used the `redis` crate (for the faults inside Redis).

use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::InfraError;
use super::process::{ChildProcess, free_port, wait_until};

/// Ports to try before giving up: another process may take a probed port before we bind it.
const START_ATTEMPTS: usize = 5;
const READY_TIMEOUT: Duration = Duration::from_secs(10);
const PING_TIMEOUT: Duration = Duration::from_millis(500);
const INFO_TIMEOUT: Duration = Duration::from_secs(1);
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A target's redis-server, shared with the world that owns it: `redis-restart` replaces
/// its process.
pub type SharedRedis = Arc<tokio::sync::Mutex<RedisServer>>;

/// A `redis-server` owned by the harness; killed (with its process group) on drop.
#[derive(Debug)]
pub struct RedisServer {
    name: String,
    addr: SocketAddr,
    dir: PathBuf,
    child: ChildProcess,
    /// Killed on purpose ([`kill`](RedisServer::kill)) and not started again yet.
    killed: bool,
}

impl RedisServer {
    /// Starts an empty redis-server on a free loopback port, logging to `<log_dir>/<name>.log`
    /// (which is also its working directory), and waits until it answers PING.
    pub async fn start(name: &str, log_dir: &Path) -> Result<Self, InfraError> {
        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()?));
            match Self::start_on(name, log_dir, addr).await {
                Ok(server) => return Ok(server),
                Err(e @ InfraError::PortInUse { .. }) => {
                    tracing::debug!("{e}; retrying on another port");
                    last_error = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or_else(|| {
            InfraError::NoFreePort(std::io::Error::other("no start attempt was made"))
        }))
    }

    async fn start_on(name: &str, dir: &Path, addr: SocketAddr) -> Result<Self, InfraError> {
        let child = spawn(name, dir, addr)?;
        let mut server = Self {
            name: name.to_owned(),
            addr,
            dir: dir.to_owned(),
            child,
            killed: false,
        };
        server.wait_ready().await?;
        Ok(server)
    }

    /// Until this server answers: a PING would also be answered by another Redis that
    /// holds the port (this one then fails to bind and exits), so the answer must give this
    /// child's process id.
    async fn wait_ready(&mut self) -> Result<(), InfraError> {
        let (addr, pid) = (self.addr, self.child.pid());
        wait_until(
            &mut self.child,
            addr,
            "answering INFO as its own process",
            READY_TIMEOUT,
            || answers_as(addr, pid),
        )
        .await
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `redis://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its working directory, where its log is.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn log_path(&self) -> &Path {
        self.child.log_path()
    }

    /// SIGSTOP: connections stay open and nothing is answered (a hung Redis).
    pub fn hang(&self) -> Result<(), InfraError> {
        self.child.signal(Signal::SIGSTOP)
    }

    /// SIGCONT: answers again after [`hang`](Self::hang) or a `stall` fault.
    pub fn resume(&self) -> Result<(), InfraError> {
        self.child.signal(Signal::SIGCONT)
    }

    /// SIGTERM (SIGKILL after a grace period) and reap.
    pub async fn stop(&mut self) -> Result<(), InfraError> {
        self.child.stop(STOP_GRACE).await.map(drop)
    }

    /// Stops it and starts it again, empty, on the same port: every key and loaded script is
    /// gone, and clients (or a proxy) pointed at the port reconnect to the new server.
    pub async fn restart(&mut self) -> Result<(), InfraError> {
        self.stop().await?;
        self.start_again().await
    }

    /// Killed with SIGKILL (no shutdown: a crash, an OOM kill, a lost node), then, after
    /// `down`, started again empty on the same port.
    pub async fn crash_and_restart(&mut self, down: Duration) -> Result<(), InfraError> {
        self.child.kill().await?;
        tokio::time::sleep(down).await;
        self.start_again().await
    }

    /// Killed with SIGKILL and left dead (a lost primary), until [`start_again`](Self::start_again).
    pub async fn kill(&mut self) -> Result<(), InfraError> {
        self.child.kill().await?;
        self.killed = true;
        Ok(())
    }

    /// Whether it was [`kill`](Self::kill)ed and not started again: its death is a fault's,
    /// not news.
    pub fn is_killed(&self) -> bool {
        self.killed
    }

    /// Started again, empty, on the same port, after [`kill`](Self::kill).
    pub async fn start_again(&mut self) -> Result<(), InfraError> {
        self.child = spawn(&self.name, &self.dir, self.addr)?;
        self.killed = false;
        self.wait_ready().await
    }

    /// `INFO <section>` (e.g. `commandstats`): the bulk string Redis returns, within 1 s.
    pub async fn info(&self, section: &str) -> Result<String, InfraError> {
        info_at(&self.name, self.addr, section).await
    }
}

/// `INFO <section>` of the Redis at `addr` (called `name` in errors), within 1 s.
pub async fn info_at(name: &str, addr: SocketAddr, section: &str) -> Result<String, InfraError> {
    let command = format!("INFO {section}");
    let error = |detail: String| InfraError::Command {
        name: name.to_owned(),
        addr,
        command: command.clone(),
        detail,
    };
    match tokio::time::timeout(INFO_TIMEOUT, info_exchange(addr, section)).await {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(detail)) => Err(error(detail)),
        Err(_) => Err(error(format!("no answer within {INFO_TIMEOUT:?}"))),
    }
}

/// Commands a Redis runs that no limiter sends: the `INFO` that reads the counts, and a
/// replica's (the `readonly` fault's partner, attached ahead) handshake and acknowledgements.
const NOT_THE_LIMITERS: [&str; 4] = [
    "cmdstat_info:",
    "cmdstat_replconf:",
    "cmdstat_psync:",
    "cmdstat_sync:",
];

/// The commands a Redis has executed by its `INFO commandstats`: `calls=` summed over the
/// `cmdstat_*` lines, leaving out failmode's own ([`NOT_THE_LIMITERS`]).
pub fn commands_executed(commandstats: &str) -> u64 {
    commandstats
        .lines()
        .filter(|l| l.starts_with("cmdstat_") && !NOT_THE_LIMITERS.iter().any(|p| l.starts_with(p)))
        .filter_map(|l| {
            let calls = l
                .split_once(':')?
                .1
                .split(',')
                .find_map(|kv| kv.strip_prefix("calls="))?;
            calls.parse::<u64>().ok()
        })
        .sum()
}

/// The file name of the RDB file the server `name` writes in its folder, if it ever does (a
/// sync to a replica through a file).
pub fn rdb_file(name: &str) -> String {
    format!("{name}.rdb")
}

fn spawn(name: &str, dir: &Path, addr: SocketAddr) -> Result<ChildProcess, InfraError> {
    let port = addr.port().to_string();
    // Its own RDB file name, deleted before it starts: the servers of a run share a folder,
    // and a sync to or from a replica (the `readonly` fault's) writing the default dump.rdb
    // there would be loaded by the next server that starts, which must start empty.
    let dbfilename = rdb_file(name);
    let _ = std::fs::remove_file(dir.join(&dbfilename));
    let mut args: Vec<OsString> = [
        "--port",
        &port,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--protected-mode",
        "no",
        "--dbfilename",
        &dbfilename,
        "--dir",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    args.push(dir.as_os_str().to_owned());
    let log = dir.join(format!("{name}.log"));
    ChildProcess::spawn(name, "redis-server", args, &[], &log)
}

/// True if a fresh connection to `addr` gets `+PONG` to `PING` within [`PING_TIMEOUT`].
/// Whether the Redis at `addr` is process `pid`.
async fn answers_as(addr: SocketAddr, pid: u32) -> bool {
    let own = format!("process_id:{pid}\r\n");
    matches!(
        tokio::time::timeout(PING_TIMEOUT, info_exchange(addr, "server")).await,
        Ok(Ok(info)) if info.contains(&own)
    )
}

/// Sends `INFO section` as a RESP array and reads the bulk string reply.
async fn info_exchange(addr: SocketAddr, section: &str) -> Result<String, String> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let mut stream = BufReader::new(stream);
    let request = format!("*2\r\n$4\r\nINFO\r\n${}\r\n{section}\r\n", section.len());
    stream
        .get_mut()
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("cannot send: {e}"))?;
    let mut header = String::new();
    stream
        .read_line(&mut header)
        .await
        .map_err(|e| format!("cannot read the reply: {e}"))?;
    let header = header.trim_end();
    let len: usize = match header.strip_prefix('$') {
        Some(len) => len
            .parse()
            .map_err(|_| format!("unexpected reply header {header:?}"))?,
        None if header.starts_with('-') => return Err(format!("Redis answered {header:?}")),
        None => return Err(format!("unexpected reply {header:?}")),
    };
    let mut body = vec![0u8; len + 2];
    stream
        .read_exact(&mut body)
        .await
        .map_err(|e| format!("reply cut short: {e}"))?;
    body.truncate(len);
    String::from_utf8(body).map_err(|_| "the reply is not UTF-8".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_summed_without_failmode_s_own_info_or_a_replicas_acknowledgements() {
        let stats = "# Commandstats\r\n\
                     cmdstat_evalsha:calls=120,usec=900,usec_per_call=7.50,rejected_calls=0,failed_calls=0\r\n\
                     cmdstat_script|load:calls=3,usec=30,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n\
                     cmdstat_client|setinfo:calls=2,usec=2,usec_per_call=1.0,rejected_calls=0,failed_calls=0\r\n\
                     cmdstat_info:calls=7,usec=70,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n\
                     cmdstat_replconf:calls=40,usec=40,usec_per_call=1.0,rejected_calls=0,failed_calls=0\r\n\
                     cmdstat_psync:calls=1,usec=9,usec_per_call=9.0,rejected_calls=0,failed_calls=0\r\n";
        assert_eq!(commands_executed(stats), 125);
        assert_eq!(commands_executed("# Commandstats\r\n"), 0);
    }
}
