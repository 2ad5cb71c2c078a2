//! The Lua scripts, loaded once and called by SHA; a `NOSCRIPT` (Redis restarted or flushed its
//! script cache) reloads the script and runs the call again on the same connection.

use redis::aio::MultiplexedConnection;
use redis::{ErrorKind, RedisResult, Script, ServerErrorKind};

/// One Lua script: its source and the SHA1 Redis knows it by.
#[derive(Debug)]
pub(crate) struct LuaScript {
    code: &'static str,
    sha: String,
}

impl LuaScript {
    fn new(code: &'static str) -> Self {
        // redis-rs computes the same SHA1 that `SCRIPT LOAD` answers with.
        let sha = Script::new(code).get_hash().to_owned();
        Self { code, sha }
    }

    async fn load(&self, conn: &mut MultiplexedConnection) -> RedisResult<()> {
        let _sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(self.code)
            .query_async(conn)
            .await?;
        Ok(())
    }
}

/// The scripts this limiter runs.
#[derive(Debug)]
pub(crate) struct Scripts {
    pub(crate) sliding_window: LuaScript,
    pub(crate) token_bucket: LuaScript,
    pub(crate) heartbeat: LuaScript,
    pub(crate) rejoin: LuaScript,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Self {
            sliding_window: LuaScript::new(include_str!("../../scripts/sliding_window.lua")),
            token_bucket: LuaScript::new(include_str!("../../scripts/token_bucket.lua")),
            heartbeat: LuaScript::new(include_str!("../../scripts/heartbeat.lua")),
            rejoin: LuaScript::new(include_str!("../../scripts/rejoin.lua")),
        }
    }

    /// Loads every script on a fresh connection, so the first request pays no `NOSCRIPT`.
    pub(crate) async fn load_all(&self, conn: &mut MultiplexedConnection) -> RedisResult<()> {
        for script in [
            &self.sliding_window,
            &self.token_bucket,
            &self.heartbeat,
            &self.rejoin,
        ] {
            script.load(conn).await?;
        }
        Ok(())
    }
}

/// Whether the call had to reload its script first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reloaded {
    No,
    Yes,
}

/// `EVALSHA script 1 key args…`, reloading once on `NOSCRIPT`.
pub(crate) async fn eval_sha(
    conn: &mut MultiplexedConnection,
    script: &LuaScript,
    key: &str,
    args: &[String],
) -> RedisResult<(Vec<i64>, Reloaded)> {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(&script.sha).arg(1).arg(key).arg(args);
    match cmd.query_async(conn).await {
        Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            script.load(conn).await?;
            Ok((cmd.query_async(conn).await?, Reloaded::Yes))
        }
        other => other.map(|reply| (reply, Reloaded::No)),
    }
}
