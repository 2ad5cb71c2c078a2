//! Waking the dispatcher at a request's scheduled instant, to tens of microseconds, on the
//! sender thread itself.
//!
//! tokio's timer wheel has a 1 ms resolution and rounds deadlines up: measured on the
//! project's 2-core machine, `sleep_until` woke 0.67–1.0 ms late at p50 and 1.2–1.9 ms late at
//! p99, which is more than a healthy limiter's whole p99. `std::thread::sleep` on a timer
//! thread woke 90 µs late at p50 (the default 50 µs timer slack), and handing each request
//! from that thread to a runtime worker would cost a second wake-up per request. Instead, on
//! Linux, the deadline is armed on a `timerfd`, a kernel high-resolution timer without timer
//! slack, and awaited through tokio's reactor like any socket: the load thread wakes once, at
//! the deadline, and sends from where it woke. Same machine: woke 42 µs late at p50 and 59 µs
//! at p99 (gap 200 µs), about the kernel's own wake-up latency. Two timers take turns, so that
//! each wake-up is armed before the one ahead of it fires ([`Pacer`]). A sender of up to
//! 10,000 req/s also arms each timer early, by the least lateness of its recent wake-ups, and
//! spins the rest (`Lateness`): in the benchmark the send lag's p50 at 100 req/s went from 46
//! µs to 17–25 (medians of three runs, twice), and at 5,000 from 51–52 µs to 34 (single runs).
//!
//! How far apart a sender's wake-ups are, and whether the one after next is armed ahead, follow
//! its rate ([`Pacing`]).
//!
//! Elsewhere (no `timerfd`) it falls back to tokio's timer and its millisecond lateness.
//!
//! The requests' own timeouts stay on tokio's timer; [`keep_a_timer_pending`] keeps that
//! timer from waking its thread for each of them.

use std::io;
use std::time::{Duration, Instant};

/// The dispatcher's wake-ups are a quantum apart at least ([`Pacing`]); requests falling due
/// within it leave together at its end.
const PACING_QUANTUM: Duration = Duration::from_micros(150);

/// Above this rate of one sender wake-ups, not HTTP, dominate its CPU: the quantum widens to
/// [`WIDE_PACING_QUANTUM`], trading send lag (p99 ~0.3 ms) for CPU (about oha's at 20,000/s:
/// 0.88–1.06× in the benchmark's tables).
const WIDE_PACING_ABOVE_PER_S: f64 = 10_000.0;
const WIDE_PACING_QUANTUM: Duration = Duration::from_micros(250);

/// How one sender spaces its wake-ups, for its total rate (the wake-ups are its thread's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pacing {
    /// A quantum apart at least counted from deadline to deadline, so that the wake-up after
    /// next is known before the next one comes and armed ahead on the [`Pacer`]'s second
    /// timer.
    ArmedAhead(Duration),
    /// A quantum apart at least counted from each wake-up, one timer armed on waking. Above
    /// [`WIDE_PACING_ABOVE_PER_S`], where arming ahead sent late and dropped in far more runs
    /// (the engine's header).
    OnWaking(Duration),
}

impl Pacing {
    pub(super) fn for_rate(rate_per_s: f64) -> Self {
        if rate_per_s > WIDE_PACING_ABOVE_PER_S {
            Self::OnWaking(WIDE_PACING_QUANTUM)
        } else {
            Self::ArmedAhead(PACING_QUANTUM)
        }
    }
}

/// Two one-shot precise timers, taking turns: each sleep arms the one after it on the other
/// timer while its own is still pending. Not shared between threads.
///
/// Why two: arming a timer that becomes the earliest pending on its core sets the hardware
/// timer again, which on a virtual machine is a trap to the hypervisor. On the project's
/// 2-core VM (Firecracker, `lapic-deadline`) a `timerfd_settime` 100 µs ahead cost 7.1 µs, one
/// 10 ms ahead 0.44 µs; a loop of sleeps 100–400 µs apart, each re-arming one timer on waking,
/// cost 16.8–17.0 µs of CPU a sleep, and the same loop arming the sleep after next on a second
/// timer 8.9–9.9 µs. The sleep after next is armed behind a pending earlier one, so the kernel
/// need not set the hardware timer for it.
#[derive(Debug)]
pub(crate) struct Pacer {
    #[cfg(target_os = "linux")]
    timers: [tokio::io::unix::AsyncFd<linux::Timer>; 2],
    /// What each timer is armed for, if it is.
    #[cfg(target_os = "linux")]
    armed: [Option<Armed>; 2],
    /// None where the timers are armed at their deadlines.
    #[cfg(target_os = "linux")]
    lateness: Option<Lateness>,
}

/// One timer's arming.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, Copy)]
struct Armed {
    deadline: Instant,
    /// When it fires, [`Lateness::early`] before the deadline; None if that had passed when
    /// it was armed, so it fires at once and its wake-up tells nothing of the latency.
    fires: Option<Instant>,
}

impl Pacer {
    /// Needs a tokio runtime with I/O enabled. Armed early ([`MAX_EARLY`]) for
    /// [`Pacing::ArmedAhead`] only: with [`Pacing::OnWaking`]'s wide quantum the send lag is
    /// mostly the quantum's, and arming early cost 20,000 req/s 2–5 % more CPU a request
    /// (11.8–12.2 µs against 11.6, three runs each) for 12 µs off the lag's p50 of 0.146 ms.
    pub(crate) fn new(pacing: Pacing) -> io::Result<Self> {
        #[cfg(not(target_os = "linux"))]
        let _ = pacing;
        #[cfg(target_os = "linux")]
        // `AsyncFd::new` is deprecated because it is unsound for a type whose `as_raw_fd` could
        // return a closed or different descriptor while registered; its replacement,
        // `AsyncFd::register`, is an `unsafe fn`, which the workspace forbids. `Timer` owns its
        // descriptor for its whole life and always returns that one, so `new` is sound here.
        #[allow(deprecated)]
        let timer = || tokio::io::unix::AsyncFd::new(linux::Timer::new()?);
        Ok(Self {
            #[cfg(target_os = "linux")]
            timers: [timer()?, timer()?],
            #[cfg(target_os = "linux")]
            armed: [None; 2],
            #[cfg(target_os = "linux")]
            lateness: matches!(pacing, Pacing::ArmedAhead(_)).then(Lateness::default),
        })
    }

    /// Returns at `deadline` or just after, never before. `then`, if known, is the deadline
    /// of the next sleep: armed now, it costs that sleep less. The timers are armed up to
    /// [`MAX_EARLY`] before their deadlines, and a wake-up that comes early spins the rest,
    /// holding the thread's other tasks that long.
    pub(crate) async fn sleep_until(
        &mut self,
        deadline: Instant,
        then: Option<Instant>,
    ) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            if Instant::now() >= deadline {
                return Ok(());
            }
            let this = match self.deadlines().iter().position(|&a| a == Some(deadline)) {
                Some(armed_ahead) => armed_ahead,
                None => {
                    // The costly arm: nothing earlier is pending. A timer armed for neither
                    // deadline would wake the thread for nothing: that one is moved.
                    let armed = self.deadlines();
                    let stale = armed.iter().position(|&a| a.is_some() && a != then);
                    let this = stale.unwrap_or(usize::from(then.is_some() && armed[0] == then));
                    self.arm(this, deadline)?;
                    this
                }
            };
            let other = 1 - this;
            match then {
                Some(then) if then > deadline => {
                    if self.deadlines()[other] != Some(then) {
                        self.arm(other, then)?;
                    }
                }
                _ => {
                    if self.armed[other].is_some() {
                        self.timers[other].get_ref().disarm()?;
                        self.armed[other] = None;
                    }
                }
            }
            let timer = &self.timers[this];
            loop {
                let mut ready = timer.readable().await?;
                // Reading the expiry count is what tells a real expiry from readiness left
                // over from an earlier one (arming again zeroes the count); WouldBlock clears
                // the latter and we wait on.
                if let Ok(read) = ready.try_io(|timer| timer.get_ref().consume()) {
                    // The read took the expiry: nothing more is readable until the timer is
                    // armed again and fires. Left set, the readiness would cost the next
                    // sleep a read that can only say WouldBlock.
                    ready.clear_ready();
                    let fired = self.armed[this].take().and_then(|armed| armed.fires);
                    read?;
                    let woke = Instant::now();
                    if let (Some(fires), Some(lateness)) = (fired, &mut self.lateness) {
                        lateness.record(woke.saturating_duration_since(fires));
                    }
                    if woke < deadline {
                        // Armed early by the least lateness of the recent wake-ups, a wake-up
                        // rarely comes before its deadline, and then by little (or it is one
                        // armed ahead, found fired after a late pass). The requests the
                        // dispatcher just spawned go first; the rest is spun, since a sleep
                        // that short would itself end tens of microseconds late.
                        tokio::task::yield_now().await;
                        while Instant::now() < deadline {
                            std::hint::spin_loop();
                        }
                    }
                    return Ok(());
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = then;
            tokio::time::sleep_until(deadline.into()).await;
            Ok(())
        }
    }

    #[cfg(target_os = "linux")]
    fn arm(&mut self, timer: usize, deadline: Instant) -> io::Result<()> {
        let early = self
            .lateness
            .as_ref()
            .map_or(Duration::ZERO, Lateness::early);
        let fires = deadline.checked_sub(early).unwrap_or(deadline);
        let now = Instant::now();
        self.timers[timer]
            .get_ref()
            .arm(fires.saturating_duration_since(now))?;
        self.armed[timer] = Some(Armed {
            deadline,
            fires: (fires > now).then_some(fires),
        });
        Ok(())
    }

    #[cfg(target_os = "linux")]
    fn deadlines(&self) -> [Option<Instant>; 2] {
        self.armed.map(|armed| armed.map(|a| a.deadline))
    }
}

// A timer armed early stays behind the one before it: the wake-ups are a quantum apart.
#[cfg(target_os = "linux")]
const _: () = assert!(MAX_EARLY.as_nanos() < PACING_QUANTUM.as_nanos());

/// How late the pacer's recent wake-ups came after their timers fired, so that a timer can be
/// armed that much before its deadline.
///
/// A sleeping thread wakes tens of microseconds after its timer (the kernel's and, on a
/// virtual machine, the hypervisor's wake-up latency; the module's header has this VM's
/// figures). At a low rate, where each request has a wake-up of its own, that is
/// most of the send lag. The least lateness of the last [`LATENESS_WINDOW`] wake-ups is
/// taken, so that few come before their deadline (those spin the difference). A timer that
/// fires while the thread is busy is seen as soon as the thread is free: at high rates the
/// least of the window comes near zero, and little is armed early.
#[cfg(target_os = "linux")]
#[derive(Debug, Default)]
struct Lateness {
    recent: [Duration; LATENESS_WINDOW],
    next: usize,
}

/// The wake-ups [`Lateness`] learns from: a third of a second at 100 req/s.
#[cfg(target_os = "linux")]
const LATENESS_WINDOW: usize = 32;

/// The most a timer is armed before its deadline, and so the longest a wake-up can spin.
#[cfg(target_os = "linux")]
const MAX_EARLY: Duration = Duration::from_micros(100);

#[cfg(target_os = "linux")]
impl Lateness {
    fn record(&mut self, late: Duration) {
        self.recent[self.next] = late;
        self.next = (self.next + 1) % LATENESS_WINDOW;
    }

    /// Zero until the window has filled.
    fn early(&self) -> Duration {
        self.recent.iter().copied().fold(MAX_EARLY, Duration::min)
    }
}

/// Keeps a tokio timer pending on the sender's runtime, due within `period`, for ever.
///
/// tokio's time driver wakes its own thread (an eventfd write, then a read and a turn of the
/// reactor) whenever a timer is set earlier than the earliest one pending when it last
/// parked. With none pending (every answer in), that is a request timeout set in nearly every
/// tick: measured at 20,000 req/s on one sender, 20,000 such writes a second, and 1.0 µs of
/// CPU a request of 13.0. A timer due sooner than any request's timeout keeps every new one
/// later: 6 writes a second (`period`: half the timeout, within 1 ms and 1 s).
pub(crate) async fn keep_a_timer_pending(period: Duration) -> std::convert::Infallible {
    loop {
        tokio::time::sleep(period).await;
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io;
    use std::os::fd::{AsFd, AsRawFd, RawFd};
    use std::time::Duration;

    use nix::sys::time::TimeSpec;
    use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};

    /// `AsyncFd` wants `AsRawFd`, which nix's `TimerFd` does not implement.
    #[derive(Debug)]
    pub(super) struct Timer(TimerFd);

    impl Timer {
        pub(super) fn new() -> io::Result<Self> {
            // CLOCK_MONOTONIC: the clock behind std's Instant on Linux.
            let fd = TimerFd::new(
                ClockId::CLOCK_MONOTONIC,
                TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
            )?;
            Ok(Self(fd))
        }

        /// Fires once, `after` from now (relative: no conversion between Instant and the
        /// kernel's clock is needed, at the cost of the microsecond between reading the clock
        /// and arming).
        pub(super) fn arm(&self, after: Duration) -> io::Result<()> {
            // A zero it_value disarms the timer instead of firing it.
            let after = after.max(Duration::from_nanos(1));
            self.0
                .set(
                    Expiration::OneShot(TimeSpec::from_duration(after)),
                    TimerSetTimeFlags::empty(),
                )
                .map_err(io::Error::from)
        }

        pub(super) fn disarm(&self) -> io::Result<()> {
            self.0.unset().map_err(io::Error::from)
        }

        /// How long until it fires, if it is armed.
        #[cfg(test)]
        pub(super) fn remaining(&self) -> Option<Duration> {
            match self.0.get() {
                Ok(Some(Expiration::OneShot(left))) => Some(left.into()),
                _ => None,
            }
        }

        /// Reads the expiry count; WouldBlock if the timer has not fired.
        pub(super) fn consume(&self) -> io::Result<()> {
            self.0.wait().map_err(io::Error::from)
        }
    }

    impl AsRawFd for Timer {
        fn as_raw_fd(&self) -> RawFd {
            self.0.as_fd().as_raw_fd()
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Far enough apart that a wake-up late on a busy test machine still comes before the next
    /// deadline.
    const STEP: Duration = Duration::from_millis(50);

    async fn sleep(pacer: &mut Pacer, deadline: Instant, then: Option<Instant>) {
        let slept = pacer.sleep_until(deadline, then).await;
        assert!(slept.is_ok(), "{slept:?}");
        assert!(Instant::now() >= deadline, "woke before its deadline");
    }

    #[tokio::test]
    async fn the_next_deadline_is_armed_ahead_on_the_other_timer_and_taken_from_there() {
        let mut pacer = Pacer::new(Pacing::ArmedAhead(PACING_QUANTUM)).unwrap();
        let t0 = Instant::now();
        let (d1, d2, d3) = (t0 + STEP, t0 + 2 * STEP, t0 + 3 * STEP);
        sleep(&mut pacer, d1, Some(d2)).await;
        assert_eq!(pacer.deadlines(), [None, Some(d2)]);
        sleep(&mut pacer, d2, Some(d3)).await;
        assert_eq!(
            pacer.deadlines(),
            [Some(d3), None],
            "d2 taken from where it was armed"
        );
        sleep(&mut pacer, d3, None).await;
        assert_eq!(pacer.deadlines(), [None, None]);
    }

    #[tokio::test]
    async fn a_wrong_guess_is_moved_to_the_deadline_that_came_instead() {
        let mut pacer = Pacer::new(Pacing::ArmedAhead(PACING_QUANTUM)).unwrap();
        let t0 = Instant::now();
        // Guessed 2 steps, came at 4: the guess is moved, not left to wake the thread at 2.
        sleep(&mut pacer, t0 + STEP, Some(t0 + 2 * STEP)).await;
        sleep(&mut pacer, t0 + 4 * STEP, Some(t0 + 7 * STEP)).await;
        assert_eq!(pacer.deadlines(), [Some(t0 + 7 * STEP), None]);
        // Guessed 7, came at 6, nothing after it: the guess is moved to 6.
        sleep(&mut pacer, t0 + 6 * STEP, None).await;
        assert_eq!(pacer.deadlines(), [None, None]);
    }

    #[tokio::test]
    async fn a_timer_armed_for_neither_deadline_is_disarmed() {
        let mut pacer = Pacer::new(Pacing::ArmedAhead(PACING_QUANTUM)).unwrap();
        let t0 = Instant::now();
        let (d, then) = (t0 + 3 * STEP, t0 + 4 * STEP);
        // Cancelled before its deadline, as a run's cancel does: both stay armed.
        let cancelled = tokio::time::timeout(STEP, pacer.sleep_until(d, Some(then))).await;
        assert!(cancelled.is_err());
        assert_eq!(pacer.deadlines(), [Some(d), Some(then)]);
        sleep(&mut pacer, then, None).await;
        assert_eq!(
            pacer.deadlines(),
            [None, None],
            "the one for 3 steps disarmed"
        );
    }

    #[tokio::test]
    async fn a_guess_that_fired_unawaited_does_not_end_the_next_sleep() {
        let mut pacer = Pacer::new(Pacing::ArmedAhead(PACING_QUANTUM)).unwrap();
        let t0 = Instant::now();
        sleep(&mut pacer, t0 + STEP, Some(t0 + 2 * STEP)).await;
        // The dispatcher did not sleep for the guess: it fired with nobody waiting on it, and
        // the reactor kept its readiness.
        tokio::time::sleep(3 * STEP).await;
        sleep(&mut pacer, t0 + 6 * STEP, None).await;
        sleep(&mut pacer, Instant::now() + STEP, None).await;
        assert_eq!(pacer.deadlines(), [None, None]);
    }

    #[test]
    fn the_margin_is_the_earliest_of_the_recent_wake_ups_and_at_most_its_cap() {
        let mut lateness = Lateness::default();
        for _ in 0..LATENESS_WINDOW - 1 {
            lateness.record(Duration::from_micros(40));
        }
        assert_eq!(
            lateness.early(),
            Duration::ZERO,
            "not before the window has filled"
        );
        lateness.record(Duration::from_micros(30));
        assert_eq!(lateness.early(), Duration::from_micros(30));
        for _ in 0..LATENESS_WINDOW - 1 {
            lateness.record(Duration::from_millis(5));
        }
        assert_eq!(
            lateness.early(),
            Duration::from_micros(30),
            "30 µs is still recent"
        );
        lateness.record(Duration::from_millis(5));
        assert_eq!(lateness.early(), MAX_EARLY, "30 µs has left the window");
    }

    /// A pacer that has learnt the widest margin.
    fn armed_early_by_the_most() -> io::Result<Pacer> {
        let mut pacer = Pacer::new(Pacing::ArmedAhead(PACING_QUANTUM))?;
        for _ in 0..LATENESS_WINDOW {
            if let Some(lateness) = &mut pacer.lateness {
                lateness.record(MAX_EARLY);
            }
        }
        Ok(pacer)
    }

    #[tokio::test]
    async fn a_timer_and_the_one_armed_ahead_fire_the_margin_before_their_deadlines() {
        let mut pacer = armed_early_by_the_most().unwrap();
        let deadline = Instant::now() + STEP;
        let before = Instant::now();
        pacer.arm(0, deadline).unwrap();
        let left = pacer.timers[0].get_ref().remaining().unwrap();
        // Armed relative to a clock read after `before`, read again after it was armed.
        assert!(
            left + MAX_EARLY <= deadline - before + Duration::from_micros(1),
            "fires in {left:?}, the deadline is {:?} away",
            deadline - before
        );
        // The sleep after next, armed ahead, is armed early too.
        let (d1, d2) = (Instant::now() + STEP, Instant::now() + 2 * STEP);
        sleep(&mut pacer, d1, Some(d2)).await;
        assert_eq!(pacer.deadlines(), [None, Some(d2)]);
        assert_eq!(pacer.armed[1].and_then(|a| a.fires), Some(d2 - MAX_EARLY));
    }

    #[tokio::test]
    async fn a_wake_up_that_comes_before_its_deadline_spins_until_it() {
        let mut pacer = armed_early_by_the_most().unwrap();
        // Nearer than the margin: the timer fires at once, and only the spin holds the sleep
        // to its deadline.
        let deadline = Instant::now() + MAX_EARLY;
        sleep(&mut pacer, deadline, None).await;
        let margin = pacer.lateness.as_ref().map(Lateness::early);
        assert_eq!(
            margin,
            Some(MAX_EARLY),
            "a timer fired at once taught nothing"
        );
    }

    #[tokio::test]
    async fn a_wake_up_teaches_a_pacer_armed_ahead_its_lateness_and_one_on_waking_nothing() {
        let mut ahead = Pacer::new(Pacing::ArmedAhead(PACING_QUANTUM)).unwrap();
        sleep(&mut ahead, Instant::now() + STEP, None).await;
        assert_eq!(ahead.lateness.as_ref().map(|l| l.next), Some(1));
        let mut on_waking = Pacer::new(Pacing::OnWaking(WIDE_PACING_QUANTUM)).unwrap();
        let deadline = Instant::now() + STEP;
        sleep(&mut on_waking, deadline, None).await;
        assert!(on_waking.lateness.is_none(), "armed at its deadlines");
    }

    #[tokio::test]
    async fn a_deadline_already_past_returns_at_once() {
        let mut pacer = Pacer::new(Pacing::ArmedAhead(PACING_QUANTUM)).unwrap();
        let past = Instant::now();
        sleep(&mut pacer, past, Some(past + STEP)).await;
        assert_eq!(
            pacer.deadlines(),
            [None, None],
            "nothing armed for a sleep not taken"
        );
    }
}
