import PushWorker
import ServiceLifecycle

/// The shape of the backlog and burst scenarios: jobs queued before the worker starts drain while a `CallSource`
/// adds one job every interval from a thread of its own, the way an upstream service would. The worker runs as the
/// production service group; the source starts once `ready` holds, stops when the queued jobs are finished (or at
/// the timeout), and its own jobs then get `settle` to finish.
struct TrickleDuringDrain<Snapshot: Sendable> {
    let snapshot: @Sendable () -> Snapshot
    /// Queued jobs finished in a snapshot.
    let queuedFinished: (Snapshot) -> Int
    /// The source's jobs finished in a snapshot.
    let trickleFinished: (Snapshot) -> Int
    let queued: Int
    let timeout: Duration
    let settle: Duration

    struct Result {
        /// When the queued jobs were finished (or the timeout came).
        let queuedDone: Snapshot
        /// After the source's jobs settled.
        let final: Snapshot
        let trickleProduced: Int
        let cpuSeconds: Double
    }

    /// - Parameters:
    ///   - ready: the source starts once it holds (polled every 10 ms, at most until the timeout).
    ///   - beforeTrickle: runs between `ready` and the source's start.
    ///   - progress: a progress line, every 5 s, from a snapshot and the source's jobs produced so far.
    func run(
        _ worker: Worker, source: CallSource, ready: (Snapshot) -> Bool, beforeTrickle: () -> Void = {},
        progress: (Snapshot, Int) -> Void
    ) async throws -> Result {
        let cpuAtStart = ProcessResources.cpuSeconds()
        let services = worker.serviceGroup()
        let running = Task { try await services.run() }
        let started = ContinuousClock.now
        while !ready(snapshot()), ContinuousClock.now - started < timeout {
            try await Task.sleep(for: .milliseconds(10))
        }
        beforeTrickle()
        source.start()
        var lastProgress = ContinuousClock.now
        var current = snapshot()
        while queuedFinished(current) < queued, ContinuousClock.now - started < timeout {
            try await Task.sleep(for: .milliseconds(20))
            current = snapshot()
            if ContinuousClock.now - lastProgress >= .seconds(5) {
                lastProgress = .now
                progress(current, source.produced)
            }
        }
        let produced = source.stop()
        let queuedDone = snapshot()
        let settled = ContinuousClock.now + settle
        while trickleFinished(snapshot()) < produced, ContinuousClock.now < settled {
            try await Task.sleep(for: .milliseconds(10))
        }
        let final = snapshot()
        let cpuSeconds = ProcessResources.cpuSeconds() - cpuAtStart
        await services.triggerGracefulShutdown()
        try await running.value
        return Result(queuedDone: queuedDone, final: final, trickleProduced: produced, cpuSeconds: cpuSeconds)
    }
}
