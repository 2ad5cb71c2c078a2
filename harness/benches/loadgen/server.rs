//! The loopback server both generators send to in `just bench-loadgen`.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How many connections the server's kernel queues before it accepts them: the most this
/// machine allows (`net.core.somaxconn`, 4096 here), as Go's and Java's servers ask for. With
/// std's 128, a stall of the shared machine at 40,000 req/s (every request in flight opening a
/// connection) overflowed the queue, and each connect whose SYN was dropped took the kernel's
/// 1 s retransmission: the server's queue, not the generator, set the run's tail.
const ACCEPT_BACKLOG: u32 = 4096;

/// An HTTP/1.1 keep-alive server answering every GET with 200 and a two-byte body, on a
/// current-thread runtime of its own. Hand-written on tokio sockets because hyper's server
/// feature is not a dependency of this crate and a load generator's bench needs no more.
pub(crate) fn start_server() -> SocketAddr {
    let (bound, addr) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("bench-server".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let socket = tokio::net::TcpSocket::new_v4().unwrap();
                socket.bind(([127, 0, 0, 1], 0).into()).unwrap();
                let listener = socket.listen(ACCEPT_BACKLOG).unwrap();
                bound.send(listener.local_addr().unwrap()).unwrap();
                loop {
                    let (mut socket, _) = listener.accept().await.unwrap();
                    socket.set_nodelay(true).unwrap();
                    tokio::spawn(async move {
                        let mut buf = vec![0u8; 4096];
                        let mut filled = 0;
                        loop {
                            match socket.read(&mut buf[filled..]).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => filled += n,
                            }
                            let mut answers = 0;
                            let mut at = 0;
                            while let Some(i) =
                                buf[at..filled].windows(4).position(|w| w == b"\r\n\r\n")
                            {
                                at += i + 4;
                                answers += 1;
                            }
                            buf.copy_within(at..filled, 0);
                            filled -= at;
                            let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                            for _ in 0..answers {
                                if socket.write_all(reply).await.is_err() {
                                    return;
                                }
                            }
                        }
                    });
                }
            });
        })
        .unwrap();
    addr.recv().unwrap()
}
