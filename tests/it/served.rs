//! The real `dakghar` binary as a child process of a test.

use std::process::Child;

pub const BIN: &str = env!("CARGO_BIN_EXE_dakghar");

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `dakghar serve` child that dies with its test: without this, a failed
/// assertion left the server running after the test process, claiming
/// against its schema.
pub struct Served(pub Child);

impl Served {
    /// SIGKILL, and reaped.
    pub fn kill(&mut self) -> std::io::Result<()> {
        self.0.kill()?;
        self.0.wait().map(drop)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}
