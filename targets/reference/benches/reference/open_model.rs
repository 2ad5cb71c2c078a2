//! The benchmark's load generator: each call at its scheduled time, whatever the earlier ones
//! are doing (open model), so a slow answer delays nothing behind it and shows in the latency
//! from the schedule.

use std::time::Duration;

use tokio::time::Instant;

/// When one call was due, sent and answered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    scheduled: Instant,
    sent: Instant,
    done: Instant,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

impl Timing {
    /// The server's cost: from the send to the answer.
    pub(crate) fn since_send_us(&self) -> u64 {
        micros(self.done - self.sent)
    }

    /// What an open-model caller sees: from when the call was due to the answer.
    pub(crate) fn since_schedule_us(&self) -> u64 {
        micros(self.done - self.scheduled)
    }

    /// How late the generator sent the call.
    pub(crate) fn lag_us(&self) -> u64 {
        micros(self.sent - self.scheduled)
    }
}

/// Makes `rate × duration` calls, the `i`th by `call(i)` at `i / rate` seconds from the start,
/// and hands each outcome to `record` with its timing; returns once every call has answered.
pub(crate) async fn run<T, Fut, R>(
    rate: f64,
    duration: Duration,
    call: impl Fn(u64) -> Fut,
    record: R,
) where
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
    R: Fn(u64, Timing, T) + Clone + Send + 'static,
{
    let total = (rate * duration.as_secs_f64()) as u64;
    let start = Instant::now() + Duration::from_millis(20);
    let mut tasks = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for i in 0..total {
        let scheduled = start + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(scheduled).await;
        let answer = call(i);
        let record = record.clone();
        tasks.push(tokio::spawn(async move {
            let sent = Instant::now();
            let out = answer.await;
            let done = Instant::now();
            record(
                i,
                Timing {
                    scheduled,
                    sent,
                    done,
                },
                out,
            );
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}
