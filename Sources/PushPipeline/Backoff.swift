/// The wait before a failed store or broker operation is tried again, when no task waits for the operation.
enum Backoff {
    /// Runs `operation` until it succeeds, with no task waiting for it: after a failure (told to `failed`) it
    /// waits `delay`, doubling up to `maximum`, and tries again. `done` gets the value, or nil once a failure
    /// finds `givingUp` true.
    static func retry<T: Sendable>(
        _ operation: @escaping @Sendable (@escaping @Sendable (Result<T, any Error>) -> Void) -> Void,
        delay: Duration = .milliseconds(100), maximum: Duration, givingUp: @escaping @Sendable () -> Bool,
        failed: @escaping @Sendable (any Error) -> Void, then done: @escaping @Sendable (T?) -> Void
    ) {
        operation { result in
            switch result {
            case .success(let value):
                done(value)
            case .failure(let error):
                failed(error)
                if givingUp() { return done(nil) }
                Task {
                    await pause(for: delay, unless: givingUp)
                    retry(operation, delay: min(delay * 2, maximum), maximum: maximum, givingUp: givingUp, failed: failed, then: done)
                }
            }
        }
    }

    /// Waits `duration`, ending early (within 100 ms) once `givingUp` says so.
    static func pause(for duration: Duration, unless givingUp: @Sendable () -> Bool) async {
        var waited = Duration.zero
        while waited < duration, !givingUp() {
            try? await Task.sleep(for: min(.milliseconds(100), duration - waited))
            waited += .milliseconds(100)
        }
    }
}
