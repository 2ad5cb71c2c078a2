//! The loopback server both generators send to in `just bench-loadgen`.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An HTTP/1.1 keep-alive server answering every GET with 200 and a two-byte body, on a
/// current-thread runtime of its own. Hand-written on tokio sockets because hyper's server
/// feature is not a dependency of this crate and a load generator's bench needs no more.
pub(crate) fn start_server() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::Builder::new()
        .name("bench-server".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
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
    addr
}
