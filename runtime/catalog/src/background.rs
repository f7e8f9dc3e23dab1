//! Threads for work that must never delay a request: the search segments
//! built after a change and the vectors of the embedding stage. They run at
//! a lower CPU priority, so when the machine has more runnable threads than
//! cores, the scheduler deschedules them rather than a thread answering a
//! search (on a 2-core machine a reload's index pass and one more runnable
//! thread are enough to take a search's core for milliseconds).

use std::io;
use std::thread::JoinHandle;

/// How many nice levels below the thread that starts them background
/// threads run: far below the request threads (about a tenth of their CPU
/// weight), well above idle, so a machine kept busy by requests still
/// builds a change's segments within milliseconds.
pub const BACKGROUND_NICE_STEP: i32 = 10;

/// Starts `work` on a thread called `name` that first lowers its own CPU
/// priority by [`BACKGROUND_NICE_STEP`] (where the platform lets one thread be
/// lowered alone: Linux; elsewhere it runs at the normal priority).
pub fn spawn<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> io::Result<JoinHandle<T>> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            if let Err(error) = lower_this_threads_priority() {
                tracing::debug!(%error, "background thread keeps the normal CPU priority");
            }
            work()
        })
}

/// Lowers the calling thread's priority, never another thread's: on
/// Linux, `nice` changes the calling thread's nice value only (and threads
/// it starts inherit it; the kernel caps it at 19). Raising it back needs
/// privileges, which is why background work gets threads of its own.
#[cfg(target_os = "linux")]
fn lower_this_threads_priority() -> io::Result<()> {
    // `nice` may return -1 as the new nice value: errno tells an error.
    // SAFETY: errno is this thread's; nice takes an integer only.
    let now = unsafe {
        *libc::__errno_location() = 0;
        libc::nice(BACKGROUND_NICE_STEP)
    };
    let error = io::Error::last_os_error();
    if now == -1 && error.raw_os_error() != Some(0) {
        Err(error)
    } else {
        Ok(())
    }
}

/// Elsewhere, `nice` would lower the whole process: left alone.
#[cfg(not(target_os = "linux"))]
fn lower_this_threads_priority() -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest nice value (the lowest priority) Linux has.
    const LOWEST_NICE: i32 = 19;

    /// The nice value of this process's thread `tid`, from procfs.
    #[cfg(target_os = "linux")]
    fn nice_of(tid: i32) -> i32 {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        // Fields after the command name, which ends at the last `)`:
        // state is field 3, nice field 19.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        after.split(' ').nth(19 - 3).unwrap().parse().unwrap()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_background_thread_is_lowered_and_the_caller_is_not() {
        // SAFETY: gettid has no preconditions.
        let caller = unsafe { libc::gettid() };
        let before = nice_of(caller);
        let (inside, name) = spawn("quiver-test-bg", || {
            // SAFETY: as above.
            let nice = nice_of(unsafe { libc::gettid() });
            (nice, std::thread::current().name().map(str::to_owned))
        })
        .unwrap()
        .join()
        .unwrap();
        assert_eq!(name.as_deref(), Some("quiver-test-bg"));
        assert_eq!(inside, (before + BACKGROUND_NICE_STEP).min(LOWEST_NICE));
        assert!(inside > before || before == LOWEST_NICE);
        assert_eq!(nice_of(caller), before, "the caller keeps its priority");
    }
}
