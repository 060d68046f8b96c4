#if canImport(Glibc)
    import Glibc
#endif

/// A value behind a glibc mutex, for the locks many threads take per job.
///
/// The standard library's `Mutex` on Linux is a priority-inheritance futex: when it is contended,
/// an unlock hands the lock to the thread that waits for it, and nobody else can take it until that
/// thread has been scheduled, so a busy lock makes a convoy of threads that each sleep and wake
/// in the kernel. A glibc mutex lets the running thread take a lock just released; the adaptive kind
/// spins a little before it sleeps, as the standard library's does, for the short holds of these locks.
public final class Locked<State: Sendable>: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    // Behind a pointer, not a stored `var`: an inout access to a class's property is checked for
    // exclusivity at run time, and the mutex already makes the access exclusive.
    @usableFromInline let state: UnsafeMutablePointer<State>

    public init(_ state: State) {
        self.state = .allocate(capacity: 1)
        self.state.initialize(to: state)
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        precondition(pthread_mutex_init(mutex, &attributes) == 0, "pthread_mutex_init failed")
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        state.deinitialize(count: 1)
        state.deallocate()
    }

    @inlinable
    public func withLock<Result, Failure: Error>(_ body: (inout State) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state.pointee)
    }
}
