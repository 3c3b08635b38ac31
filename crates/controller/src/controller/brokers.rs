//! # Brokers come, die, come back, and shut down
//!
//! * **Registration** makes a broker alive, at incarnation 0 the first time and one
//!   more at every later registration ([`Controller::broker_restarted`] re-registers
//!   with the same address).
//! * **Failure** fences it at once. Each partition it led elects the first live ISR
//!   member in replica order; failing that, on an unclean topic, the first live
//!   replica, whose ISR becomes just itself; failing that, nobody: the leader becomes
//!   -1 and the dead leader stays in the ISR as its last member, as Kafka keeps it,
//!   so that it is the clean leader when it returns. Each partition it followed drops
//!   it from the ISR (KRaft removes a fenced broker from every ISR), except where it
//!   is the last member.
//! * **Restart** makes it alive with a new incarnation. Leaderless partitions that can
//!   now elect someone do: it, if it is in their ISR (clean), or, on unclean topics,
//!   if it is a replica. It does *not* rejoin any ISR where another broker leads: that
//!   leader adds it back with an AlterPartition once it has caught up.
//! * **Controlled shutdown** first hands every partition it leads to the first other
//!   live ISR member and leaves the ISR of those it follows, then dies as above. A
//!   partition whose ISR has no other live member keeps it as leader until that death
//!   (Kafka's controller cannot move it either), and then goes the failure way: no
//!   leader, or an unclean election if the topic allows one. So nothing it led is left
//!   leaderless if another ISR member was alive.
//!
//! Failure and controlled shutdown of a broker already dead change nothing and return
//! no changes, so the caller need not track who is down.

use super::{Context, Controller, Decision};
use crate::broker::Broker;
use crate::change::{Change, ElectionReason};
use crate::election::{self, Elected};
use crate::error::Error;
use crate::partition::{Election, PartitionState, NO_LEADER};

/// The two moments a broker's partitions are taken from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leaving {
    /// Controlled shutdown, while it still runs: move what can be moved.
    Handover,
    /// It is dead: whatever it still leads must change.
    Gone,
}

impl Controller {
    /// Registers broker `id` at `address`. A new id starts at incarnation 0; a dead
    /// one comes back (as [`Controller::broker_restarted`], with the new address).
    /// Refuses a negative id (`INVALID_REQUEST`) and a broker that is alive
    /// (`DUPLICATE_BROKER_REGISTRATION`).
    pub fn register_broker(
        &mut self,
        id: i32,
        address: impl Into<String>,
    ) -> Result<Vec<Change>, Error> {
        if id < 0 {
            return Err(Error::InvalidRequest {
                reason: format!("broker id {id} is negative"),
            });
        }
        let address = address.into();
        let broker = match self.image.brokers.get_mut(&id) {
            Some(b) if b.alive => return Err(Error::DuplicateBrokerRegistration { id }),
            Some(b) => {
                b.alive = true;
                b.incarnation += 1;
                b.address = address;
                b.clone()
            }
            None => {
                let b = Broker {
                    id,
                    address,
                    alive: true,
                    incarnation: 0,
                };
                self.image.brokers.insert(id, b.clone());
                b
            }
        };
        let mut changes = vec![Change::BrokerRegistered {
            id,
            address: broker.address,
            incarnation: broker.incarnation,
        }];
        changes.extend(self.elect_leaderless(None, ElectionReason::BrokerReturned));
        self.debug_check();
        Ok(changes)
    }

    /// Broker `id` came back after dying: alive, incarnation + 1, same address.
    /// Leaderless partitions it can lead elect it; it joins no ISR by itself.
    /// Refuses an unknown id (`BROKER_ID_NOT_REGISTERED`) and a live broker
    /// (`DUPLICATE_BROKER_REGISTRATION`).
    pub fn broker_restarted(&mut self, id: i32) -> Result<Vec<Change>, Error> {
        let address = self.known(id)?.address.clone();
        self.register_broker(id, address)
    }

    /// Broker `id` died without warning. See the module doc for what its
    /// partitions do. Refuses an unknown id (`BROKER_ID_NOT_REGISTERED`).
    pub fn broker_failed(&mut self, id: i32) -> Result<Vec<Change>, Error> {
        if !self.known(id)?.alive {
            return Ok(Vec::new());
        }
        let mut changes = vec![self.mark_dead(id, false)];
        changes.extend(self.take_partitions_from(id, Leaving::Gone));
        self.debug_check();
        Ok(changes)
    }

    /// Broker `id` shuts down cleanly: leaderships move first, then it dies. See the
    /// module doc. Refuses an unknown id (`BROKER_ID_NOT_REGISTERED`).
    pub fn controlled_shutdown(&mut self, id: i32) -> Result<Vec<Change>, Error> {
        if !self.known(id)?.alive {
            return Ok(Vec::new());
        }
        let mut changes = self.take_partitions_from(id, Leaving::Handover);
        changes.push(self.mark_dead(id, true));
        changes.extend(self.take_partitions_from(id, Leaving::Gone));
        self.debug_check();
        Ok(changes)
    }

    fn known(&self, id: i32) -> Result<&Broker, Error> {
        self.image
            .brokers
            .get(&id)
            .ok_or(Error::BrokerIdNotRegistered { id })
    }

    fn mark_dead(&mut self, id: i32, controlled: bool) -> Change {
        let broker = self.image.brokers.get_mut(&id).expect("a known broker");
        debug_assert!(broker.alive, "broker {id} dies once");
        broker.alive = false;
        Change::BrokerDied {
            id,
            incarnation: broker.incarnation,
            controlled,
        }
    }

    /// Moves leadership and ISR membership off broker `id`, in every partition it is
    /// a replica of.
    fn take_partitions_from(&mut self, id: i32, when: Leaving) -> Vec<Change> {
        self.update_partitions(None, |p, ctx| leave_partition(p, ctx, id, when))
    }

    /// Elects a leader wherever there is none and one can be elected now.
    pub(super) fn elect_leaderless(
        &mut self,
        topic: Option<&str>,
        reason: ElectionReason,
    ) -> Vec<Change> {
        self.update_partitions(topic, |p, ctx| {
            if p.has_leader() {
                return None;
            }
            match election::elect(p, ctx.unclean_leader_election, ctx.alive) {
                Elected::Clean(leader) => Some(Decision {
                    leader,
                    // Only live members stay: a leader's ISR has no dead broker.
                    isr: p.isr.iter().copied().filter(|&b| (ctx.alive)(b)).collect(),
                    how: Election::clean(reason),
                }),
                Elected::Unclean(leader) => Some(Decision {
                    leader,
                    isr: vec![leader],
                    how: Election {
                        clean: false,
                        reason,
                    },
                }),
                Elected::Nobody => None,
            }
        })
    }
}

/// What partition `p` does when broker `id` leaves it.
fn leave_partition(
    p: &PartitionState,
    ctx: &Context<'_>,
    id: i32,
    when: Leaving,
) -> Option<Decision> {
    if !p.is_replica(id) {
        return None;
    }
    // `id` leaves the ISR, unless it is the last member.
    let without: Vec<i32> = p.isr.iter().copied().filter(|&b| b != id).collect();
    let isr = if without.is_empty() {
        p.isr.clone()
    } else {
        without
    };
    if p.leader != id {
        // A follower leaves: same leader, smaller ISR (`how` is not read).
        return Some(Decision {
            leader: p.leader,
            isr,
            how: Election::clean(ElectionReason::LeaderFailed),
        });
    }
    let (reason, unclean_allowed) = match when {
        Leaving::Handover => (ElectionReason::ControlledShutdown, false),
        Leaving::Gone => (ElectionReason::LeaderFailed, ctx.unclean_leader_election),
    };
    let eligible = |b: i32| b != id && (ctx.alive)(b);
    match election::elect(p, unclean_allowed, eligible) {
        Elected::Clean(leader) => Some(Decision {
            leader,
            isr,
            how: Election::clean(reason),
        }),
        Elected::Unclean(leader) => Some(Decision {
            leader,
            isr: vec![leader],
            how: Election {
                clean: false,
                reason,
            },
        }),
        Elected::Nobody if when == Leaving::Gone => Some(Decision {
            leader: NO_LEADER,
            isr,
            how: Election::clean(reason),
        }),
        // No one to hand over to: it leads on until it is gone.
        Elected::Nobody => None,
    }
}
