//! Where a target's requests go: its instances as last read from its rotation, each with its
//! connection pools and Host header, read again only when the rotation changes.

use std::net::IpAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;

use hyper::header::HeaderValue;

use super::Rotation;
use super::exchange::Pool;

/// A target's instances as last read from its rotation: connection pools and a Host header
/// for every instance known (by its index), and the indexes in rotation. An instance has one
/// pool per source address (`sources`): one unbound pool, or one per tenant for a target that
/// tells callers by source address. A pool keeps `max_idle` idle connections at most.
#[derive(Debug)]
pub(super) struct Members {
    /// Instance i's pool for source s at `i * sources.len() + s`.
    pools: Vec<Arc<Pool>>,
    sources: Arc<[Option<IpAddr>]>,
    max_idle: Option<NonZeroUsize>,
    pub(super) hosts: Vec<HeaderValue>,
    pub(super) in_rotation: Vec<usize>,
}

impl Members {
    /// From the rotation as it is now, keeping the pools (and their open connections) of
    /// instances whose address has not changed.
    fn read(
        rotation: &Rotation,
        sources: Arc<[Option<IpAddr>]>,
        max_idle: Option<NonZeroUsize>,
        before: Option<&Members>,
    ) -> Self {
        let members = rotation.members();
        let per = sources.len();
        let pools = members
            .iter()
            .enumerate()
            .flat_map(|(i, m)| {
                sources.iter().enumerate().map(move |(s, source)| {
                    match before.and_then(|b| b.pools.get(i * per + s)) {
                        Some(pool) if pool.addr() == m.addr => Arc::clone(pool),
                        _ => Arc::new(Pool::new(m.addr, *source, max_idle)),
                    }
                })
            })
            .collect();
        let hosts = members
            .iter()
            .map(|m| {
                // An address's text is always a valid header value.
                HeaderValue::try_from(m.addr.to_string())
                    .unwrap_or_else(|_| HeaderValue::from_static("localhost"))
            })
            .collect();
        let in_rotation: Vec<usize> = (0..members.len())
            .filter(|&i| members[i].in_rotation)
            .collect();
        Self {
            pools,
            sources,
            max_idle,
            hosts,
            // None in rotation: send to every known one anyway, as a balancer without
            // health checks would; their refusals are the outcome.
            in_rotation: if in_rotation.is_empty() {
                (0..members.len()).collect()
            } else {
                in_rotation
            },
        }
    }

    /// The rotation as it is now, with these members' sources and cap, keeping their pools
    /// where the address has not changed.
    pub(super) fn reread(&self, rotation: &Rotation) -> Self {
        Self::read(
            rotation,
            Arc::clone(&self.sources),
            self.max_idle,
            Some(self),
        )
    }

    /// Where `tenant`'s requests to `instance` take their connection from.
    pub(super) fn pool(&self, instance: usize, tenant: usize) -> &Arc<Pool> {
        let per = self.sources.len();
        let source = if per == 1 { 0 } else { tenant % per };
        &self.pools[instance * per + source]
    }
}

/// One target's rotation and the members last read from it.
#[derive(Debug)]
pub(super) struct Followed {
    pub(super) rotation: Rotation,
    pub(super) version: u64,
    members: Arc<Members>,
}

impl Followed {
    pub(super) fn new(
        rotation: Rotation,
        sources: Arc<[Option<IpAddr>]>,
        max_idle: Option<NonZeroUsize>,
    ) -> Self {
        let version = rotation.version();
        let members = Arc::new(Members::read(&rotation, sources, max_idle, None));
        Self {
            rotation,
            version,
            members,
        }
    }

    /// The members now: one atomic load unless the rotation changed.
    pub(super) fn current(&mut self) -> &Arc<Members> {
        let version = self.rotation.version();
        if version != self.version {
            self.members = Arc::new(self.members.reread(&self.rotation));
            self.version = version;
        }
        &self.members
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_that_moves_gets_a_new_pool_with_the_same_idle_cap_and_the_others_keep_theirs() {
        let addr = |port| std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let rotation = Rotation::new([addr(1001), addr(1002)]);
        let cap = NonZeroUsize::new(3);
        let mut followed = Followed::new(rotation.clone(), Arc::from([None]), cap);
        let before = Arc::clone(followed.current());

        rotation.set(1, addr(2002), true);
        let after = followed.current();
        assert!(Arc::ptr_eq(before.pool(0, 0), after.pool(0, 0)), "kept");
        assert!(!Arc::ptr_eq(before.pool(1, 0), after.pool(1, 0)));
        assert_eq!(after.pool(1, 0).addr(), addr(2002));
        assert_eq!(after.pool(1, 0).max_idle(), cap);
    }
}
