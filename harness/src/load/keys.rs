//! Who a tenant's requests say they come from: one caller key, or a key drawn per request from
//! a weighted set (a scenario's population: thousands of callers with skewed rates, results
//! kept together).
//!
//! A drawn key is a function of the run's seed, the tenant and the arrival's index in its
//! schedule: ChaCha8's random access (`set_word_pos`) gives every arrival its own draw without
//! state, so every target sees the same key for the same arrival and `--worker` shares send
//! exactly the keys one process would.

use std::fmt;
use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::Distribution;
use rand_distr::weighted::WeightedAliasIndex;

/// Keeps the key draws off the arrival schedules' and the clients' streams for the same seed.
const KEYS_SEED_SALT: u64 = 0x6b65_7973_6b65_7973;

/// Who a tenant's requests say they come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Caller {
    /// One caller key, on every request.
    Key(String),
    /// A key drawn per request.
    Drawn(Arc<Keys>),
}

impl Caller {
    /// How many caller keys share the tenant's traffic: its allowance is theirs together.
    pub fn keys(&self) -> u64 {
        match self {
            Self::Key(_) => 1,
            Self::Drawn(keys) => keys.count() as u64,
        }
    }

    /// A caller key both send, if any: two tenants sharing a key share its quota.
    pub fn shared_key(&self, other: &Caller) -> Option<String> {
        match (self, other) {
            (Self::Key(a), Self::Key(b)) => (a == b).then(|| a.clone()),
            (Self::Key(a), Self::Drawn(keys)) | (Self::Drawn(keys), Self::Key(a)) => {
                keys.contains(a).then(|| a.clone())
            }
            (Self::Drawn(a), Self::Drawn(b)) => {
                let (few, many) = if a.count() <= b.count() {
                    (a, b)
                } else {
                    (b, a)
                };
                (0..few.count())
                    .map(|i| few.key(i))
                    .find(|k| many.contains(k))
            }
        }
    }
}

impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Key(key) => f.write_str(key),
            Self::Drawn(keys) => keys.fmt(f),
        }
    }
}

/// Caller keys `prefix` + rank, for the ranks `first..first + count`, each drawn with its
/// weight.
#[derive(Clone)]
pub struct Keys {
    prefix: String,
    first: u64,
    /// Relative, one per key; kept to tell two sets apart.
    weights: Vec<f64>,
    /// Shared by every target's stream of the tenant: 12 bytes a key.
    alias: Arc<WeightedAliasIndex<f64>>,
}

/// Why a set of keys cannot be drawn from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("keys need at least one positive, finite weight, and each weight finite and ≥ 0")]
pub struct BadWeights;

impl Keys {
    /// The keys `prefix` + `first`, `prefix` + (`first` + 1), … one per weight.
    pub fn new(prefix: String, first: u64, weights: Vec<f64>) -> Result<Self, BadWeights> {
        let alias = Arc::new(WeightedAliasIndex::new(weights.clone()).map_err(|_| BadWeights)?);
        Ok(Self {
            prefix,
            first,
            weights,
            alias,
        })
    }

    pub fn count(&self) -> usize {
        self.weights.len()
    }

    /// The text of key `i` (0-based in this set).
    pub fn key(&self, i: usize) -> String {
        format!("{}{}", self.prefix, self.first + i as u64)
    }

    /// Whether `key` is one of these keys.
    pub fn contains(&self, key: &str) -> bool {
        key.strip_prefix(self.prefix.as_str())
            .and_then(|n| n.parse::<u64>().ok().filter(|v| v.to_string() == n))
            .is_some_and(|n| (self.first..self.first + self.count() as u64).contains(&n))
    }

    /// The keys' draws for tenant `tenant` of a run of `seed`.
    pub fn drawer(&self, seed: u64, tenant: usize) -> Drawer {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ KEYS_SEED_SALT);
        rng.set_stream(tenant as u64);
        Drawer {
            rng,
            alias: Arc::clone(&self.alias),
        }
    }
}

impl PartialEq for Keys {
    fn eq(&self, other: &Self) -> bool {
        (&self.prefix, self.first, &self.weights) == (&other.prefix, other.first, &other.weights)
    }
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Keys({self})")
    }
}

/// `crowd-6…crowd-10000`: the set as run.json and the logs name it.
impl fmt::Display for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let last = self.first + self.count() as u64 - 1;
        if last == self.first {
            write!(f, "{}{}", self.prefix, self.first)
        } else {
            write!(f, "{}{}…{}{}", self.prefix, self.first, self.prefix, last)
        }
    }
}

/// One tenant's key draws, addressed by arrival.
#[derive(Debug, Clone)]
pub struct Drawer {
    rng: ChaCha8Rng,
    alias: Arc<WeightedAliasIndex<f64>>,
}

impl Drawer {
    /// The key (0-based in its set) of the arrival with index `arrival` in the tenant's whole
    /// schedule.
    pub fn key_of(&mut self, arrival: u64) -> usize {
        // Whole 16-word blocks apart: a draw takes a few words, never another arrival's. A
        // seek refills rand_chacha's buffer (four blocks): a few hundred ns a draw.
        self.rng.set_word_pos(u128::from(arrival) * 16);
        self.alias.sample(&mut self.rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(weights: &[f64]) -> Keys {
        Keys::new("k-".into(), 4, weights.to_vec()).unwrap()
    }

    #[test]
    fn a_set_names_its_keys_by_rank_and_shows_its_range() {
        let k = keys(&[1.0, 2.0, 3.0]);
        assert_eq!((k.key(0), k.key(2)), ("k-4".into(), "k-6".into()));
        assert_eq!(k.to_string(), "k-4…k-6");
        assert_eq!(keys(&[1.0]).to_string(), "k-4");
        assert_eq!(Caller::Drawn(Arc::new(k)).keys(), 3);
        assert_eq!(Caller::Key("acme".into()).keys(), 1);
    }

    #[test]
    fn two_callers_share_a_key_when_a_key_of_one_is_a_key_of_the_other() {
        let drawn = |prefix: &str, first, n| {
            Caller::Drawn(Arc::new(
                Keys::new(prefix.into(), first, vec![1.0; n]).unwrap(),
            ))
        };
        let key = |k: &str| Caller::Key(k.into());
        let crowd = drawn("c-", 6, 10);
        assert_eq!(crowd.shared_key(&key("c-15")), Some("c-15".into()));
        assert_eq!(key("c-6").shared_key(&crowd), Some("c-6".into()));
        for apart in ["c-5", "c-16", "c-07", "c-+7", "c-", "d-7"] {
            assert_eq!(crowd.shared_key(&key(apart)), None, "{apart}");
        }
        // "a-1" + 5 is "a-" + 15.
        assert_eq!(
            drawn("a-1", 5, 1).shared_key(&drawn("a-", 10, 10)),
            Some("a-15".into())
        );
        assert_eq!(drawn("a-", 1, 5).shared_key(&drawn("a-", 6, 5)), None);
        assert_eq!(key("x").shared_key(&key("x")), Some("x".into()));
    }

    #[test]
    fn weights_that_cannot_be_drawn_from_are_refused() {
        for bad in [&[][..], &[0.0, 0.0], &[1.0, -1.0], &[f64::NAN]] {
            assert!(Keys::new("k".into(), 1, bad.to_vec()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_arrivals_key_depends_on_the_seed_tenant_and_arrival_only() {
        let k = keys(&[5.0, 3.0, 1.0, 1.0]);
        let mut a = k.drawer(7, 2);
        let forward: Vec<usize> = (0..200).map(|i| a.key_of(i)).collect();
        // In any order, from another drawer: a worker drawing every N-th arrival.
        let mut b = k.drawer(7, 2);
        for i in (0..200).rev() {
            assert_eq!(b.key_of(i), forward[i as usize]);
        }
        let other_tenant: Vec<usize> = (0..200).map(|i| k.drawer(7, 3).key_of(i)).collect();
        let other_seed: Vec<usize> = (0..200).map(|i| k.drawer(8, 2).key_of(i)).collect();
        assert_ne!(forward, other_tenant);
        assert_ne!(forward, other_seed);
    }

    #[test]
    fn keys_are_drawn_in_proportion_to_their_weights() {
        let weights = [8.0, 4.0, 2.0, 1.0, 1.0];
        let k = keys(&weights);
        let mut d = k.drawer(1, 0);
        let n = 160_000;
        let mut seen = [0u64; 5];
        for i in 0..n {
            seen[d.key_of(i)] += 1;
        }
        let total: f64 = weights.iter().sum();
        for (i, w) in weights.iter().enumerate() {
            let expected = n as f64 * w / total;
            // Binomial: 4 standard deviations.
            let sd = (expected * (1.0 - w / total)).sqrt();
            assert!(
                (seen[i] as f64 - expected).abs() < 4.0 * sd,
                "key {i}: {} drawn, {expected} expected",
                seen[i]
            );
        }
    }
}
