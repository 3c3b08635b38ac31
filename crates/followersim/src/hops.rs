//! SCRATCH: hop timestamps for profiling.
#![allow(missing_docs)]
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

pub static BASE: OnceLock<Instant> = OnceLock::new();
pub static EVENTS: Mutex<Vec<(u64, &'static str, i64, u64)>> = Mutex::new(Vec::new());

#[inline]
pub fn rec(what: &'static str, a: i64, b: u64) {
    let base = *BASE.get_or_init(Instant::now);
    let t = base.elapsed().as_nanos() as u64;
    let tid = {
        // thread id hash
        let id = format!("{:?}", std::thread::current().id());
        id.trim_start_matches("ThreadId(").trim_end_matches(')').parse::<u64>().unwrap_or(0)
    };
    EVENTS.lock().unwrap().push((t, what, a, b * 1000 + tid));
}

pub fn dump(path: &str) {
    use std::io::Write;
    let ev = std::mem::take(&mut *EVENTS.lock().unwrap());
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for (t, w, a, b) in ev {
        writeln!(f, "{t} {w} {a} {b}").unwrap();
    }
}
