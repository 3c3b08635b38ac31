//! An operation in the purgatory: the operation itself plus the purgatory's bookkeeping
//! for it (its one-way state, its timer handle, its keys), the handle callers hold, and
//! the three paths that finish it: a watcher's check, the timeout, a forced completion.

use std::fmt::Display;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use super::watchers::Core;
use super::{Completion, DelayedOperation};
use crate::timer::TimerTask;

pub(super) const PENDING: u8 = 0;
pub(super) const COMPLETED: u8 = 1;
pub(super) const CANCELLED: u8 = 2;

/// `timeout` slot value meaning "no timeout scheduled (or already taken)".
pub(super) const NO_TIMEOUT: u64 = u64::MAX;

/// An operation plus the purgatory's bookkeeping for it; the one allocation per operation.
/// The watcher lists, the timer's wheel entry and every [`OperationHandle`] share it.
pub(super) struct OpCell<K, Op> {
    pub(super) op: Op,
    /// `PENDING` until exactly one path moves it to `COMPLETED` or `CANCELLED`.
    pub(super) state: AtomicU8,
    /// Set before the operation joins its watcher lists: from then on, finishing it turns
    /// its list entries into garbage.
    pub(super) listed: AtomicBool,
    pub(super) deadline_ms: u64,
    /// The timeout's timer handle ([`TimerHandle::key_bits`]) once it is scheduled, else
    /// `NO_TIMEOUT`; swapped out by whoever cancels it.
    pub(super) timeout: AtomicU64,
    pub(super) keys: Vec<K>,
    pub(super) core: Arc<Core<K, Op>>,
}

/// A shared handle to an operation in a purgatory, returned by
/// [`Purgatory::try_complete_else_watch`](super::Purgatory::try_complete_else_watch) and [`Purgatory::cancel_for_key`](super::Purgatory::cancel_for_key).
///
/// Cloning is cheap (an `Arc`). Holding a handle keeps the operation alive, nothing else.
pub struct OperationHandle<Op> {
    pub(super) cell: Arc<dyn CellView<Op>>,
}

impl<Op> Clone for OperationHandle<Op> {
    fn clone(&self) -> Self {
        OperationHandle {
            cell: self.cell.clone(),
        }
    }
}

/// What a handle can see of an `OpCell` without knowing the key type.
pub(super) trait CellView<Op>: Send + Sync {
    fn op(&self) -> &Op;
    fn state(&self) -> u8;
    fn deadline_ms(&self) -> u64;
    fn force_complete(&self) -> bool;
}

impl<Op> OperationHandle<Op> {
    /// The operation itself.
    pub fn operation(&self) -> &Op {
        self.cell.op()
    }

    /// True once the operation has completed (by any path). A cancelled operation never
    /// completes.
    pub fn is_completed(&self) -> bool {
        self.cell.state() == COMPLETED
    }

    /// True if the operation was cancelled by [`Purgatory::cancel_for_key`](super::Purgatory::cancel_for_key) or
    /// [`Purgatory::shutdown`](super::Purgatory::shutdown).
    pub fn is_cancelled(&self) -> bool {
        self.cell.state() == CANCELLED
    }

    /// Complete the operation now, whatever its condition (Kafka's `forceComplete`): cancel
    /// its timeout and run `on_complete` on this thread. Returns `true` iff this call
    /// completed it (`false` if it had already completed or been cancelled).
    ///
    /// The operation stays in its watcher lists until they are next checked or purged.
    pub fn force_complete(&self) -> bool {
        self.cell.force_complete()
    }

    /// When the operation times out, on the timer's clock.
    pub fn deadline_ms(&self) -> u64 {
        self.cell.deadline_ms()
    }
}

impl<Op: std::fmt::Debug> std::fmt::Debug for OperationHandle<Op> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperationHandle")
            .field("operation", self.operation())
            .field("completed", &self.is_completed())
            .field("cancelled", &self.is_cancelled())
            .field("deadline_ms", &self.deadline_ms())
            .finish()
    }
}

impl<K, Op> OpCell<K, Op>
where
    K: Eq + Hash + Clone + Send + Sync + Display + 'static,
    Op: DelayedOperation,
{
    pub(super) fn is_pending(&self) -> bool {
        self.state.load(Ordering::Acquire) == PENDING
    }

    /// The one place where an operation leaves `PENDING`. True iff this call moved it.
    pub(super) fn finish(&self, to: u8) -> bool {
        let won = self
            .state
            .compare_exchange(PENDING, to, Ordering::SeqCst, Ordering::Acquire)
            .is_ok();
        if won && self.listed.load(Ordering::Acquire) {
            // Its watcher-list entries are garbage from now on.
            self.core
                .garbage
                .fetch_add(self.keys.len() as isize, Ordering::AcqRel);
        }
        won
    }

    /// Cancel the timeout if it is scheduled and still pending.
    pub(super) fn cancel_timeout(&self) {
        let bits = self.timeout.swap(NO_TIMEOUT, Ordering::SeqCst);
        if bits != NO_TIMEOUT
            && self
                .core
                .timer
                .cancel(self.core.timer.handle_from_bits(bits))
        {
            self.core.delayed.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Kafka's `forceComplete`: complete now if still pending, `how` being the caller's
    /// reason (a satisfied condition, or a forced completion).
    pub(super) fn complete(&self, how: Completion<Op::Cause>) -> bool {
        debug_assert!(
            !matches!(how, Completion::Expired),
            "only the timer task expires an operation"
        );
        if !self.finish(COMPLETED) {
            return false;
        }
        self.cancel_timeout();
        let check_purge = self.core.count_completion();
        self.op.on_complete(how);
        if check_purge {
            self.core.maybe_purge();
        }
        true
    }

    /// Cancel without any callback.
    pub(super) fn cancel(&self) -> bool {
        if !self.finish(CANCELLED) {
            return false;
        }
        self.cancel_timeout();
        true
    }
}

impl<K, Op> CellView<Op> for OpCell<K, Op>
where
    K: Eq + Hash + Clone + Send + Sync + Display + 'static,
    Op: DelayedOperation,
{
    fn op(&self) -> &Op {
        &self.op
    }

    fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }

    fn deadline_ms(&self) -> u64 {
        self.deadline_ms
    }

    fn force_complete(&self) -> bool {
        self.complete(Completion::Forced)
    }
}

/// The timeout path: the timer runs this when the operation's deadline comes.
impl<K, Op> TimerTask for OpCell<K, Op>
where
    K: Eq + Hash + Clone + Send + Sync + Display + 'static,
    Op: DelayedOperation,
{
    fn run(self: Arc<Self>) {
        self.core.delayed.fetch_sub(1, Ordering::AcqRel);
        if self.finish(COMPLETED) {
            self.core.expired.fetch_add(1, Ordering::AcqRel);
            let check_purge = self.core.count_completion();
            self.op.on_complete(Completion::Expired);
            if check_purge {
                self.core.maybe_purge();
            }
        }
    }
}
