//! A closed pipe ends the CLI quietly, as it ends other Unix tools.
//!
//! Rust ignores SIGPIPE, so `fleetq get cq -o json | head -1` used to
//! panic in `println!` ("failed printing to stdout: Broken pipe", exit
//! 101) once `head` had gone. kubectl (Go) dies of SIGPIPE when it writes
//! to a closed stdout or stderr, and so do cat, grep and ls; the shell
//! says nothing and `$?` is 141. fleetq does the same, but only for its
//! own standard output and error: SIGPIPE stays ignored otherwise, so a
//! server connection that breaks mid-write is still an error with a
//! message, not a silent death.

/// Installs the panic hook that turns a failed print to a closed stdout or
/// stderr into death by SIGPIPE; any other panic goes to the hook before.
pub fn die_quietly_on_closed_pipe() {
    let before = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // (PanicHookInfo::payload_as_str is newer than our rust-version.)
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied());
        if message.is_some_and(is_closed_pipe) {
            die_of_sigpipe();
        }
        before(info);
    }));
}

/// Whether `message` is std's panic for a print to a closed pipe.
fn is_closed_pipe(message: &str) -> bool {
    let print = message.starts_with("failed printing to stdout")
        || message.starts_with("failed printing to stderr");
    let epipe = format!("(os error {})", libc::EPIPE);
    print && (message.contains("Broken pipe") || message.contains(&epipe))
}

/// Ends the process the way a write to a closed pipe ends a C program.
fn die_of_sigpipe() -> ! {
    // SAFETY: signal() and raise() with valid constants; nothing else in
    // the process relies on SIGPIPE staying ignored from here on.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    // Blocked signal, or a platform that delivers it late: the same status.
    std::process::exit(128 + libc::SIGPIPE)
}

#[cfg(test)]
mod tests {
    use super::is_closed_pipe;

    #[test]
    fn only_prints_to_a_closed_pipe_count() {
        assert!(is_closed_pipe(
            "failed printing to stdout: Broken pipe (os error 32)"
        ));
        assert!(is_closed_pipe("failed printing to stderr: Broken pipe"));
        assert!(!is_closed_pipe(
            "failed printing to stdout: No space left on device (os error 28)"
        ));
        assert!(!is_closed_pipe("Broken pipe somewhere else"));
    }
}
