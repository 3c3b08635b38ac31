//! `DelayedFault`: a request held back by a fault rule, on the broker's timing wheel.
//!
//! A `delay_ms` rule holds its request before the handler sees it; a `throttle_ms` rule
//! mutes the connection after the answer, as Kafka's quotas do. Either way the wait is a
//! delayed operation like any other: it sits in the `FaultDelay` purgatory, its timeout is a
//! timer entry on the same wheel as every produce and fetch (so a manual clock drives it),
//! and the live view lists it with the rule that put it there. Nothing completes it early:
//! its only way out is its timeout.

use timewheel::{Completion, DelayedOperation};
use tokio::sync::oneshot;

use crate::delayed::{Once, OpMeta};

/// A held request: answers `done` when its time is up.
pub struct DelayedFault {
    /// Who is held, and until when.
    pub meta: OpMeta,
    /// The rule that holds it.
    pub rule: u64,
    /// `delay` (before handling) or `throttle` (the connection after answering).
    pub what: &'static str,
    done: Once<oneshot::Sender<()>>,
}

impl DelayedFault {
    /// A hold for `meta`'s request, put there by `rule`; `done` is told when it ends.
    pub fn new(meta: OpMeta, rule: u64, what: &'static str, done: oneshot::Sender<()>) -> Self {
        DelayedFault {
            meta,
            rule,
            what,
            done: Once::new(done),
        }
    }
}

impl DelayedOperation for DelayedFault {
    type Cause = ();

    /// Never: only the timeout ends a hold.
    fn try_complete(&self) -> bool {
        false
    }

    fn on_complete(&self, _how: Completion) {
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
    }

    fn describe(&self) -> String {
        format!(
            "{} held by fault rule {} ({} of {} ms){}",
            self.meta.who("DelayedFault"),
            self.rule,
            self.what,
            self.meta.deadline_ms.saturating_sub(self.meta.created_ms),
            self.meta.request_tag()
        )
    }
}
