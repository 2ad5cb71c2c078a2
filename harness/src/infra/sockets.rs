//! Which TCP addresses a child's process group listens on, read from Linux's `/proc`: when a
//! target never answers on the `{port}` it was given, the port it chose instead is the most
//! useful thing an error can name. The group, not the child: a start command is often a
//! launcher (`npm start`, a shell script) whose grandchild holds the socket.
//!
//! Best effort: on a system without `/proc`, or for processes that cannot be read, the answer
//! is empty and the caller says less.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// `st` of a listening socket in `/proc/net/tcp`.
const TCP_LISTEN: &str = "0A";

/// The addresses the processes of group `pgid` listen on (TCP, IPv4 and IPv6), sorted.
pub fn listening_addrs(pgid: u32) -> Vec<SocketAddr> {
    let proc = Path::new("/proc");
    let inodes: BTreeSet<u64> = group_members(proc, pgid)
        .into_iter()
        .flat_map(|pid| socket_inodes(&proc.join(pid.to_string()).join("fd")))
        .collect();
    if inodes.is_empty() {
        return Vec::new();
    }
    let mut addrs: Vec<SocketAddr> = ["net/tcp", "net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(proc.join(table)).ok())
        .flat_map(|text| listeners(&text))
        .filter(|(_, inode)| inodes.contains(inode))
        .map(|(addr, _)| addr)
        .collect();
    addrs.sort();
    addrs.dedup();
    addrs
}

/// The pids whose process group is `pgid`.
fn group_members(proc: &Path, pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(proc) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(proc.join(pid.to_string()).join("stat"))
                .is_ok_and(|stat| group_of(&stat) == Some(pgid))
        })
        .collect()
}

/// The process group in a `/proc/PID/stat` line: the third field after the command name,
/// which is in parentheses and may itself hold spaces and parentheses.
fn group_of(stat: &str) -> Option<u32> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(2)?.parse().ok()
}

/// The inodes of the sockets among a process's open files (`socket:[INODE]` links).
fn socket_inodes(fd_dir: &Path) -> Vec<u64> {
    let Ok(entries) = std::fs::read_dir(fd_dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|link| {
            link.to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// The listening sockets of a `/proc/net/tcp` or `tcp6` table: (local address, inode).
fn listeners(table: &str) -> Vec<(SocketAddr, u64)> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.get(3) != Some(&TCP_LISTEN) {
                return None;
            }
            let addr = local_addr(fields.get(1)?)?;
            let inode = fields.get(9)?.parse().ok()?;
            Some((addr, inode))
        })
        .collect()
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): the address is written as
/// 32-bit words in the machine's byte order, the port in plain hex.
fn local_addr(field: &str) -> Option<SocketAddr> {
    let (ip, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<u32> = (0..ip.len() / 8)
        .map(|i| u32::from_str_radix(&ip[i * 8..i * 8 + 8], 16).ok())
        .collect::<Option<_>>()?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    match bytes.len() {
        4 => Some(SocketAddr::from((
            Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]),
            port,
        ))),
        16 => {
            let octets: [u8; 16] = bytes.try_into().ok()?;
            Some(SocketAddr::from((Ipv6Addr::from(octets), port)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_process_group_even_with_a_strange_name() {
        assert_eq!(group_of("4242 (a) b (c)) S 1 4240 4240 0 -1"), Some(4240));
        assert_eq!(group_of("no parenthesis"), None);
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn listening_rows_are_read_and_others_skipped() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
                     0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 12345 1 0 100 0 0 10 0\n\
                     1: 0100007F:A2B4 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 12346 1 0 100 0 0 10 0\n";
        assert_eq!(
            listeners(table),
            [(SocketAddr::from(([127, 0, 0, 1], 8080)), 12345)]
        );
        assert_eq!(
            local_addr("00000000000000000000000001000000:0050"),
            Some(SocketAddr::from((Ipv6Addr::LOCALHOST, 80)))
        );
    }

    #[test]
    fn this_process_is_seen_listening() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let pgid = nix::unistd::getpgrp().as_raw() as u32;
        if Path::new("/proc/net/tcp").exists() {
            assert!(listening_addrs(pgid).contains(&addr), "{addr}");
        }
    }
}
