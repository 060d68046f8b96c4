import Dispatch
import Synchronization

/// What a job costs for being a task: the whole process's CPU per job when each job is a task that waits for two
/// answers from two other threads (standing for the store's connection queue and the HTTP/2 event loop), beside
/// the same two hand-offs made as callbacks with no task. Nothing else is done per job, so the difference is the
/// least a pipeline without a task per job would save: a real job's task also holds the frames of its deeper calls.
enum HandOffBench {
    static let jobs = 200_000
    /// Jobs at a time, as the pipeline's in-flight limit holds them.
    static let inFlight = 2000

    private final class Countdown: Sendable {
        private let left: Atomic<Int>
        private let done: @Sendable () -> Void

        init(_ count: Int, done: @escaping @Sendable () -> Void) {
            left = Atomic(count)
            self.done = done
        }

        func finished() {
            if left.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { done() }
        }
    }

    static func run() async -> [MicroBench.Result] {
        let store = DispatchQueue(label: "bench-store")
        let transport = DispatchQueue(label: "bench-transport")
        _ = await cpuMicrosecondsPerJob(jobs: inFlight) { await callbacks($0, store: store, transport: transport) }
        _ = await cpuMicrosecondsPerJob(jobs: inFlight) { await tasks($0, store: store, transport: transport) }
        let callback = await cpuMicrosecondsPerJob(jobs: jobs) { await callbacks($0, store: store, transport: transport) }
        let task = await cpuMicrosecondsPerJob(jobs: jobs) { await tasks($0, store: store, transport: transport) }
        return [
            MicroBench.Result(
                name: "a job as a task waiting for 2 answers from 2 threads (CPU, whole process)", operationsPerSecond: 1e6 / task,
                microsecondsPerOperation: task, reference: "the same 2 hand-offs as callbacks, no task",
                referencePerSecond: 1e6 / callback)
        ]
    }

    private static func cpuMicrosecondsPerJob(jobs: Int, _ body: (Int) async -> Void) async -> Double {
        let before = ProcessResources.cpuSeconds()
        var started = 0
        while started < jobs {
            let wave = min(inFlight, jobs - started)
            await body(wave)
            started += wave
        }
        return (ProcessResources.cpuSeconds() - before) * 1e6 / Double(jobs)
    }

    private static func tasks(_ count: Int, store: DispatchQueue, transport: DispatchQueue) async {
        await withCheckedContinuation { (all: CheckedContinuation<Void, Never>) in
            let countdown = Countdown(count) { all.resume() }
            for _ in 0..<count {
                Task {
                    await withCheckedContinuation { answer in store.async { answer.resume() } }
                    await withCheckedContinuation { answer in transport.async { answer.resume() } }
                    countdown.finished()
                }
            }
        }
    }

    private static func callbacks(_ count: Int, store: DispatchQueue, transport: DispatchQueue) async {
        await withCheckedContinuation { (all: CheckedContinuation<Void, Never>) in
            let countdown = Countdown(count) { all.resume() }
            for _ in 0..<count {
                store.async { transport.async { countdown.finished() } }
            }
        }
    }
}
