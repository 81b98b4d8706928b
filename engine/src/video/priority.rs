//! The face's threads yield to the voice's. On a busy machine the audio path (the engine's media
//! threads, the voice senders) must never wait for a video frame: a late frame is shown a frame late, a
//! late audio tick is heard. So threads that render and encode faces run at a lower scheduling priority
//! (a higher nice value) than everything else in the process.

/// The nice value of face threads, relative to the process's own (0).
pub const FACE_NICENESS: i32 = 5;

/// Lowers the calling thread's priority to `FACE_NICENESS` (Linux: nice values are per thread).
pub fn lower_for_video() -> std::io::Result<()> {
    // SAFETY: gettid has no preconditions; setpriority only reads its arguments.
    let result = unsafe {
        let thread = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, thread, FACE_NICENESS)
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
