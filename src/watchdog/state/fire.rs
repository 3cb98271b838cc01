//! The `on_lost` callbacks of lost entries: queued for the watchdog thread (or, once the
//! client is closed, for the thread closing it), and the holds whose callbacks are running,
//! which a guard's release waits for.

use super::State;
use crate::watchdog::entry::take_where;
use crate::watchdog::lease::Fire;

impl State {
    /// Whether callbacks of lost entries wait to be run.
    pub(in crate::watchdog) fn has_to_fire(&self) -> bool {
        !self.to_fire.is_empty()
    }

    /// Takes the queued callbacks out to be run; their holds count as firing until
    /// [`done_firing`](Self::done_firing).
    pub(in crate::watchdog) fn take_to_fire(&mut self) -> Vec<Fire> {
        let fires = std::mem::take(&mut self.to_fire);
        self.firing = fires.iter().map(|f| f.hold).collect();
        fires
    }

    /// The callbacks taken by [`take_to_fire`](Self::take_to_fire) have all run.
    pub(in crate::watchdog) fn done_firing(&mut self) {
        self.firing.clear();
    }

    /// Takes the queued callbacks of hold `hold` out of the queue, uncalled.
    pub(in crate::watchdog) fn take_fires_of(&mut self, hold: u64) -> Vec<Fire> {
        take_where(&mut self.to_fire, |f| f.hold == hold)
    }

    /// Whether a callback of hold `hold` is running now.
    pub(in crate::watchdog) fn is_firing(&self, hold: u64) -> bool {
        self.firing.contains(&hold)
    }
}
