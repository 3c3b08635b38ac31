//! A listener that cannot bind stops the broker with a message that says which listener,
//! which address, and which flag changes it — the first thing a user needs when port 9092
//! is already taken by a real Kafka.

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `purgatory serve` with `args`, expecting it to fail at start-up; returns stderr.
fn failed_start(args: &[&str]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_purgatory"))
        .arg("serve")
        .args(args)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("purgatory starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(
                !status.success(),
                "the broker must not run without its listener"
            );
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the broker kept running although its port was taken");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("output");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_taken_kafka_port_names_the_listener_the_address_and_the_flag() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let stderr = failed_start(&["--listen", &addr, "--no-admin", "--no-embedded-followers"]);
    assert!(stderr.contains("Kafka listener"), "{stderr}");
    assert!(stderr.contains(&addr), "{stderr}");
    assert!(stderr.contains("--listen"), "{stderr}");
}

#[test]
fn a_taken_admin_port_names_the_listener_the_address_and_the_flag() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let stderr = failed_start(&[
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        &addr,
        "--no-embedded-followers",
    ]);
    assert!(stderr.contains("admin HTTP listener"), "{stderr}");
    assert!(stderr.contains(&addr), "{stderr}");
    assert!(stderr.contains("--admin-listen"), "{stderr}");
}
