//! Thread priorities: everything else yields to the audio path. On a busy machine the engine's media
//! threads and the voice senders must never wait: a late audio tick is heard, whereas a late video frame
//! is shown a frame late and a late end-of-turn verdict only lengthens a pause. So threads that render
//! and encode faces, and the turn model's threads, run at a lower scheduling priority (a higher nice
//! value) than the rest of the process.

/// The nice value of face threads, relative to the process's own (0).
pub const FACE_NICENESS: i32 = 5;
/// The nice value of turn-model threads: below the media threads, level with the faces (measured: below the
/// faces too, at 10, single frames came 92–165 ms late more often; docs/performance.md). A verdict that
/// comes too late only means the turn ends at the agent's max endpointing delay.
pub const TURN_NICENESS: i32 = 5;

/// Lowers the calling thread's priority to `FACE_NICENESS` (Linux: nice values are per thread).
pub fn lower_for_video() -> std::io::Result<()> {
    lower_priority(FACE_NICENESS)
}

/// Sets the calling thread's nice value to `niceness` (Linux: nice values are per thread).
pub fn lower_priority(niceness: i32) -> std::io::Result<()> {
    // SAFETY: gettid has no preconditions; setpriority only reads its arguments.
    let result = unsafe {
        let thread = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, thread, niceness)
    };
    if result == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_face_thread_runs_nicer_than_the_rest_of_the_process() {
        let before = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let nice = std::thread::spawn(|| {
            lower_for_video().unwrap();
            unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::syscall(libc::SYS_gettid) as libc::id_t) }
        })
        .join()
        .unwrap();
        assert_eq!(nice, FACE_NICENESS);
        assert_eq!(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }, before, "only that thread");
    }
}
