//! A target's instances as the load balancer sees them: every instance the run has known
//! (by index, stable for the run) and whether it is in rotation now. The fault timeline
//! changes it (`scale`, `kill-instance`); the sender threads follow.
//!
//! A sender thread reads it once per request, so the read is one atomic load of a version
//! number; the member list is copied only when the version has moved.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// One instance the run has known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    pub addr: SocketAddr,
    pub in_rotation: bool,
}

#[derive(Debug)]
struct Inner {
    version: AtomicU64,
    members: RwLock<Vec<Member>>,
}

/// Shared between whoever changes the topology and the sender threads; clones are handles on
/// the same rotation.
#[derive(Debug, Clone)]
pub struct Rotation(Arc<Inner>);

impl PartialEq for Rotation {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.members() == other.members()
    }
}

impl Rotation {
    /// Every address in rotation, indexed in order.
    pub fn new(addrs: impl IntoIterator<Item = SocketAddr>) -> Self {
        Self(Arc::new(Inner {
            version: AtomicU64::new(0),
            members: RwLock::new(
                addrs
                    .into_iter()
                    .map(|addr| Member {
                        addr,
                        in_rotation: true,
                    })
                    .collect(),
            ),
        }))
    }

    fn change<T>(&self, f: impl FnOnce(&mut Vec<Member>) -> T) -> T {
        let mut members = self.0.members.write().unwrap_or_else(|e| e.into_inner());
        let out = f(&mut members);
        self.0.version.fetch_add(1, Ordering::Release);
        out
    }

    /// Puts instance `index` at `addr` (a new one, or one started again on another port) in
    /// rotation or out of it. An index past the end extends the list.
    pub fn set(&self, index: usize, addr: SocketAddr, in_rotation: bool) {
        self.change(|members| {
            let member = Member { addr, in_rotation };
            match members.get_mut(index) {
                Some(m) => *m = member,
                None => {
                    // Indexes are handed out in order; a gap would be an instance never started.
                    let filler = Member {
                        addr,
                        in_rotation: false,
                    };
                    members.resize(index, filler);
                    members.push(member);
                }
            }
        });
    }

    /// Takes instance `index` out of rotation (it stays known, with its address).
    pub fn leave(&self, index: usize) {
        self.change(|members| {
            if let Some(m) = members.get_mut(index) {
                m.in_rotation = false;
            }
        });
    }

    pub fn version(&self) -> u64 {
        self.0.version.load(Ordering::Acquire)
    }

    pub fn members(&self) -> Vec<Member> {
        self.0
            .members
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Instances in rotation now.
    pub fn in_rotation(&self) -> usize {
        self.members().iter().filter(|m| m.in_rotation).count()
    }

    /// Instances known (in rotation or not).
    pub fn len(&self) -> usize {
        self.0
            .members
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn a_change_moves_the_version_and_instances_keep_their_index() {
        let r = Rotation::new([addr(1), addr(2)]);
        let v = r.version();
        r.set(2, addr(3), true);
        assert!(r.version() > v);
        r.leave(0);
        assert_eq!(r.in_rotation(), 2);
        assert_eq!(
            r.members()[0],
            Member {
                addr: addr(1),
                in_rotation: false
            }
        );
        // Started again elsewhere, under its old index.
        r.set(0, addr(9), true);
        assert_eq!(r.members()[0].addr, addr(9));
        assert_eq!((r.len(), r.in_rotation()), (3, 3));
    }

    #[test]
    fn clones_share_one_rotation() {
        let r = Rotation::new([addr(1)]);
        let seen_by_load = r.clone();
        r.leave(0);
        assert_eq!(seen_by_load.in_rotation(), 0);
        assert_eq!(seen_by_load, r);
    }
}
