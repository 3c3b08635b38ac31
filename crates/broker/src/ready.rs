//! Telling whoever started `purgatory serve` where it listens, once it does: the ready
//! announcement. With port 0 the kernel picks each port, so a test (or a script) learns
//! them here instead of guessing free ports and retrying when one was taken meanwhile.
//!
//! The announcement is one JSON object:
//!
//! ```json
//! {"brokers":[{"id":1,"listener":"127.0.0.1:41234","advertised":"127.0.0.1:41234"}],
//!  "bootstrap":"127.0.0.1:41234","admin":"127.0.0.1:41235"}
//! ```
//!
//! `listener` is the address each Kafka listener is bound to, `advertised` the host and
//! port its Metadata answers give clients (the bound port, never 0), `bootstrap` the
//! advertised addresses joined by commas, and `admin` the admin HTTP listener's bound
//! address (`null` with `--no-admin`). With `--ready-file PATH` it is written to PATH
//! atomically (a temporary file in the same directory, then a rename), so a reader that
//! sees the file sees all of it; without, it is printed as one line on stdout, where
//! nothing else is printed (the logs go to stderr).

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

/// What the announcement says: its fields, in this order, are the JSON's.
#[derive(Serialize)]
pub struct Announcement {
    pub brokers: Vec<Listener>,
    pub bootstrap: String,
    pub admin: Option<SocketAddr>,
}

/// One Kafka listener of this process.
#[derive(Serialize)]
pub struct Listener {
    pub id: i32,
    /// The address it is bound to.
    pub listener: SocketAddr,
    /// `host:port` as Metadata advertises it.
    pub advertised: String,
}

impl Announcement {
    /// `brokers`' listeners, the admin listener's address if it runs.
    pub fn new(brokers: Vec<Listener>, admin: Option<SocketAddr>) -> Announcement {
        let bootstrap: Vec<&str> = brokers.iter().map(|b| b.advertised.as_str()).collect();
        let bootstrap = bootstrap.join(",");
        Announcement {
            brokers,
            bootstrap,
            admin,
        }
    }
}

/// Removes a ready file left by an earlier run, so that the file appearing means this run
/// is ready. A missing file is fine.
pub fn clear(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => {
            Err(e).with_context(|| format!("cannot remove the old ready file {}", path.display()))
        }
    }
}

/// Announces `announcement`: into `ready_file` if given, else on one stdout line.
pub fn announce(ready_file: Option<&Path>, announcement: &Announcement) -> anyhow::Result<()> {
    let line = serde_json::to_string(announcement)?;
    match ready_file {
        Some(path) => write_atomically(path, line.as_bytes())
            .with_context(|| format!("cannot write the ready file {}", path.display())),
        None => {
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{line}")?;
            stdout.flush()?;
            Ok(())
        }
    }
}

/// Writes `contents` to a temporary file beside `path`, then renames it over `path`: a
/// rename within one directory is atomic, so `path` is absent or complete, never half.
fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let temporary = temporary_beside(path);
    let written = std::fs::File::create(&temporary).and_then(|mut file| {
        file.write_all(contents)?;
        file.write_all(b"\n")?;
        file.sync_all()
    });
    let renamed = written.and_then(|()| std::fs::rename(&temporary, path));
    if renamed.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    renamed
}

/// `DIR/.NAME.PID.tmp` for `DIR/NAME`: the same directory (the same file system, so the
/// rename is atomic), and a name no reader waiting for `NAME` mistakes for it.
fn temporary_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "ready".to_string());
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(id: i32, bound: &str, advertised: &str) -> Listener {
        Listener {
            id,
            listener: bound.parse().unwrap(),
            advertised: advertised.into(),
        }
    }

    #[test]
    fn the_announcement_names_every_listener_the_bootstrap_and_the_admin_address() {
        let brokers = vec![
            listener(1, "127.0.0.1:41234", "127.0.0.1:41234"),
            listener(2, "0.0.0.0:41236", "broker:41236"),
        ];
        let admin = Some("127.0.0.1:41235".parse().unwrap());
        assert_eq!(
            serde_json::to_string(&Announcement::new(brokers, admin)).unwrap(),
            r#"{"brokers":[{"id":1,"listener":"127.0.0.1:41234","advertised":"127.0.0.1:41234"},{"id":2,"listener":"0.0.0.0:41236","advertised":"broker:41236"}],"bootstrap":"127.0.0.1:41234,broker:41236","admin":"127.0.0.1:41235"}"#
        );
    }

    #[test]
    fn a_ready_file_is_replaced_whole_and_leaves_no_temporary_behind() {
        let dir = std::env::temp_dir().join(format!("purgatory-ready-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ready.json");
        std::fs::write(&path, "stale").unwrap();
        clear(&path).unwrap();
        assert!(!path.exists());
        clear(&path).unwrap();
        let single = Announcement::new(vec![listener(1, "127.0.0.1:9092", "127.0.0.1:9092")], None);
        announce(Some(&path), &single).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"brokers\":[{\"id\":1,\"listener\":\"127.0.0.1:9092\",\"advertised\":\"127.0.0.1:9092\"}],\"bootstrap\":\"127.0.0.1:9092\",\"admin\":null}\n"
        );
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["ready.json"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
