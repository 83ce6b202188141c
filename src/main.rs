fn main() -> std::process::ExitCode {
    give_large_blocks_back();
    dakghar::cli::main()
}

/// Each password check holds a 19 MiB block (argon2). glibc raises its
/// mmap threshold past the size of a freed block, so later blocks came
/// from its per-thread arenas, which keep them: a flood of 600 sign-ins
/// took the server from 54 MiB to 600 MiB, with two checks at a time. A
/// fixed threshold keeps such blocks mapped apart and returned when freed
/// (the same flood: 111 MiB).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn give_large_blocks_back() {
    // SAFETY: mallopt only changes the allocator's settings; it runs
    // before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1024 * 1024);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn give_large_blocks_back() {}
