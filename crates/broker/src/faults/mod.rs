//! Fault and latency injection: rules that make the broker misbehave on purpose, per API.
//!
//! A test of a Kafka application wants to see what the application does when the broker
//! answers NOT_LEADER_OR_FOLLOWER three times, is slow to one client, throttles, drops the
//! connection or swallows a request. A rule says which requests (the [`rule::Match`]), what
//! to do to them ([`rule::Action`]) and when ([`rule::Trigger`]). The rules live here, one
//! list for every broker of the process, and the connection layer asks [`Faults::check`]
//! about each request before it reaches a handler:
//!
//! ```text
//!  frame ─► decode ─► Faults::check ─┬─ none ───────────► handler ─► answer
//!                                    ├─ error ──► answer.rs: error partitions out,
//!                                    │            the rest to the handler, merged back
//!                                    ├─ delay ──► DelayedFault on the wheel ─► handler
//!                                    ├─ throttle ► handler ─► answer with throttle_time_ms,
//!                                    │             then a DelayedFault mutes the connection
//!                                    └─ disconnect / blackhole / drop_response
//! ```
//!
//! Rules are checked in the order they were added, and the first that fires is the one
//! applied: a later rule does not see (or count) a request an earlier rule took. Each rule
//! counts the requests it matched and the times it fired (its `hits`); the request log says
//! which rule fired on a request. The rules come from the admin API (`POST /api/faults`),
//! `purgatory ctl fault`, and scenario steps, all of which read the JSON in [`rule`].

pub mod answer;
pub mod delay;
pub mod facts;
pub mod rule;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use timewheel::{Purgatory, PurgatoryConfig, Timer};
use tokio::sync::oneshot;

use crate::delayed::OpMeta;
use crate::request::RequestContext;
pub use delay::DelayedFault;
pub use facts::RequestFacts;
pub use rule::{Action, Match, Rule, RuleSpec, Trigger};

/// The most rules the broker holds at once.
pub const MAX_RULES: usize = 1000;

/// A rule that fired on a request: what to do to it.
#[derive(Clone, Debug)]
pub struct Fired {
    /// The rule's id.
    pub rule: u64,
    /// Its action.
    pub action: Action,
    /// Its match (an error rule's partitions come from it).
    pub matches: Match,
}

/// A rule and its counts.
struct Armed {
    id: u64,
    rule: Rule,
    /// The rule as it was given, for the list.
    given: Value,
    /// Requests it matched.
    matched: u64,
    /// Times it fired.
    hits: u64,
    /// A `probability` rule's generator.
    rng: Option<StdRng>,
}

impl Armed {
    /// Counts a matching request and says whether the rule fires on it.
    fn fires(&mut self) -> bool {
        self.matched += 1;
        let fire = match self.rule.trigger {
            Trigger::Always => true,
            Trigger::Times(n) => self.hits < n,
            Trigger::Nth(n) => self.matched == n,
            Trigger::Probability { p, .. } => match &mut self.rng {
                Some(rng) => rng.gen::<f64>() < p,
                None => false,
            },
        };
        if fire {
            self.hits += 1;
        }
        fire
    }

    fn view(&self) -> Value {
        let mut view = self.given.clone();
        if let Some(obj) = view.as_object_mut() {
            obj.insert("id".into(), json!(self.id));
            obj.insert("hits".into(), json!(self.hits));
            obj.insert("matched".into(), json!(self.matched));
            obj.insert("does".into(), json!(self.rule.action.describe()));
        }
        view
    }
}

/// Every fault rule of the process, and the purgatory that holds delayed requests.
pub struct Faults {
    rules: Mutex<Vec<Armed>>,
    /// Whether any rule is armed: the one load a request pays when none is.
    any: AtomicBool,
    next_id: AtomicU64,
    /// Requests held by `delay_ms` rules and connections muted by `throttle_ms` ones.
    pub delays: Purgatory<String, DelayedFault>,
}

impl Faults {
    /// No rules; holds go into `timer`.
    pub fn new(timer: Timer) -> Self {
        Faults {
            rules: Mutex::new(Vec::new()),
            any: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            delays: Purgatory::new("FaultDelay", timer, PurgatoryConfig::default()),
        }
    }

    /// Parses, checks and arms a rule from its JSON. Returns its id, or why not.
    pub fn add_json(&self, body: &str) -> Result<u64, String> {
        let rule = RuleSpec::parse(body)?;
        let given: Value = serde_json::from_str(body).map_err(|e| e.to_string())?;
        self.add(rule, given)
    }

    /// Arms a checked rule; `given` is what the list shows of it.
    pub fn add(&self, rule: Rule, given: Value) -> Result<u64, String> {
        let mut rules = self.rules.lock();
        if rules.len() >= MAX_RULES {
            return Err(format!(
                "{MAX_RULES} rules are armed already: remove some first"
            ));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let rng = match rule.trigger {
            Trigger::Probability { seed, .. } => Some(StdRng::seed_from_u64(seed)),
            _ => None,
        };
        rules.push(Armed {
            id,
            rule,
            given,
            matched: 0,
            hits: 0,
            rng,
        });
        self.any.store(true, Ordering::Release);
        Ok(id)
    }

    /// Every rule, in the order they are checked, with its `id`, `hits` and `matched`.
    pub fn list(&self) -> Vec<Value> {
        self.rules.lock().iter().map(Armed::view).collect()
    }

    /// Removes one rule; false if there was none with that id.
    pub fn remove(&self, id: u64) -> bool {
        let mut rules = self.rules.lock();
        let before = rules.len();
        rules.retain(|r| r.id != id);
        self.any.store(!rules.is_empty(), Ordering::Release);
        rules.len() != before
    }

    /// Removes every rule; returns how many there were.
    pub fn clear(&self) -> usize {
        let mut rules = self.rules.lock();
        let n = rules.len();
        rules.clear();
        self.any.store(false, Ordering::Release);
        n
    }

    /// Whether any rule is armed.
    pub fn is_armed(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// The first rule, in order, that matches the request and fires on it.
    pub fn check(&self, facts: &RequestFacts<'_>) -> Option<Fired> {
        if !self.is_armed() {
            return None;
        }
        let mut rules = self.rules.lock();
        rules
            .iter_mut()
            .filter(|armed| facts.matches(&armed.rule.matches))
            .find_map(|armed| {
                armed.fires().then(|| Fired {
                    rule: armed.id,
                    action: armed.rule.action,
                    matches: armed.rule.matches.clone(),
                })
            })
    }

    /// Holds `ctx`'s request for `ms` on the timing wheel, in the `FaultDelay` purgatory.
    /// The receiver is told when the time is up (or fails if the broker stops first).
    pub fn hold(
        &self,
        ctx: &RequestContext,
        rule: u64,
        what: &'static str,
        ms: u64,
    ) -> (oneshot::Receiver<()>, OpMeta) {
        let (tx, rx) = oneshot::channel();
        let meta = OpMeta::new(ctx, "fault", self.delays.timer(), ms);
        let op = DelayedFault::new(meta.clone(), rule, what, tx);
        self.delays
            .try_complete_else_watch(op, ms, vec![format!("fault-rule-{rule}")]);
        (rx, meta)
    }
}

#[cfg(test)]
mod tests;
