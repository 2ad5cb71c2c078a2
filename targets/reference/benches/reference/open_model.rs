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
///
/// The schedule is kept by a thread of its own sleeping to each due instant, not by tokio's
/// timer: that ticks in whole milliseconds, so it released `rate / 1000` calls at once (15 at
/// 15,000 a second), and the last of each burst waited behind the others at the server, a
/// burstier load than the open model's and a p99 that measured the generator's ticks. The
/// thread wakes to within the kernel's timer slack (50 µs) and hands over every call due by
/// then.
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
    let scheduled = move |i: u64| start + Duration::from_secs_f64(i as f64 / rate);
    // Unbounded: the pacer must never wait for the async side, or it would send late.
    let (due, mut dues) = tokio::sync::mpsc::unbounded_channel();
    let pacer = std::thread::spawn(move || {
        let mut next = 0;
        while next < total {
            let at = scheduled(next).into_std();
            std::thread::sleep(at.saturating_duration_since(std::time::Instant::now()));
            let now = Instant::now();
            let mut until = next + 1;
            while until < total && scheduled(until) <= now {
                until += 1;
            }
            if due.send(next..until).is_err() {
                return;
            }
            next = until;
        }
    });
    let mut tasks = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    while let Some(calls) = dues.recv().await {
        for i in calls {
            let answer = call(i);
            let record = record.clone();
            let scheduled = scheduled(i);
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
    }
    // The channel closed as the pacer returned, so this only passes on a panic of its own.
    pacer.join().unwrap();
    for task in tasks {
        task.await.unwrap();
    }
}
