//! Readings at phase boundaries: each target's own fallback counter (summed over its
//! instances) and the commands its Redis has executed (`INFO commandstats`).

use std::time::Duration;

use super::world::World;
use crate::targets::sum_counter;

/// One reading per target; `None` where it could not be taken.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Reading {
    pub(super) fallbacks: Vec<Option<f64>>,
    pub(super) store_commands: Vec<Option<u64>>,
}

/// Sums `calls=` over `cmdstat_*` lines, leaving out the `INFO` these readings issue.
pub(super) fn commands_executed(commandstats: &str) -> u64 {
    commandstats
        .lines()
        .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:"))
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

pub(super) async fn take(world: &World, http: &reqwest::Client) -> Reading {
    let mut reading = Reading::default();
    for t in &world.targets {
        let fallbacks = match (&t.def.metrics_path, &t.def.fallback_counter) {
            (Some(path), Some(counter)) => {
                let mut total = Some(0.0);
                for i in &t.instances {
                    let text = http
                        .get(format!("http://{}{path}", i.addr))
                        .timeout(Duration::from_millis(500))
                        .send()
                        .await;
                    let value = match text {
                        Ok(r) => r.text().await.ok().map(|body| sum_counter(&body, counter)),
                        Err(_) => None,
                    };
                    total = total.zip(value).map(|(a, b)| a + b);
                }
                total
            }
            _ => None,
        };
        reading.fallbacks.push(fallbacks);
        reading.store_commands.push(
            t.redis
                .info("commandstats")
                .await
                .ok()
                .map(|s| commands_executed(&s)),
        );
    }
    reading
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_summed_without_the_readings_own_info() {
        let stats = "# Commandstats\r\n\
                     cmdstat_evalsha:calls=120,usec=900,usec_per_call=7.50,rejected_calls=0,failed_calls=0\r\n\
                     cmdstat_script|load:calls=3,usec=30,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n\
                     cmdstat_info:calls=7,usec=70,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n";
        assert_eq!(commands_executed(stats), 123);
    }
}
