import Foundation
import PushCore
import ServiceLifecycle
import Synchronization

/// Where JSON log lines go: a file descriptor (standard error), written in batches.
///
/// A line below `notice` (a delivery's `delivery finished`, the redelivery notes) waits up to `batchDelay` so
/// that the lines of that time leave in one `write`: a system call per line took about 1.4 % of the worker's
/// CPU and woke the process reading the pipe once per delivery. A line at `notice` or above is written
/// at once, after every line that waits, and so is everything waiting once more than `maximumWaitingBytes` wait
/// (the caller then writes, as it did line by line: a reader that falls behind slows the logging threads down
/// instead of growing the buffer). At a normal exit what waits is written; a process killed outright loses at
/// most `batchDelay` of lines below `notice`.
public final class LogLineOutput: Service, Sendable {
    public static let standardError = LogLineOutput(descriptor: STDERR_FILENO)

    public static let defaultBatchDelay = Duration.milliseconds(10)
    static let maximumWaitingBytes = 1 << 20

    private struct Waiting {
        var bytes: [UInt8] = []
        var writerStarted = false
    }

    private let descriptor: Int32
    private let batchDelay: Duration
    private let waiting = Locked(Waiting())
    /// Held while bytes taken from `waiting` are written, so batches reach the descriptor in the order they were taken.
    private let writing = Locked(())
    /// Signalled when a line arrives with nothing waiting: the writer thread then waits `batchDelay` and writes.
    private let arrived = DispatchSemaphore(value: 0)
    private let writes = Atomic<Int>(0)

    public init(descriptor: Int32, batchDelay: Duration = defaultBatchDelay) {
        self.descriptor = descriptor
        self.batchDelay = batchDelay
    }

    /// System calls that wrote lines so far (for tests).
    var writeCount: Int { writes.load(ordering: .relaxed) }

    /// Appends one line (its newline included); `urgent` writes it, and what waits before it, now.
    public func write(_ line: [UInt8], urgent: Bool) {
        if urgent { return writeWaiting(then: line) }
        let (first, startWriter, overflowing) = waiting.withLock { waiting in
            let first = waiting.bytes.isEmpty
            waiting.bytes.append(contentsOf: line)
            let startWriter = !waiting.writerStarted
            waiting.writerStarted = true
            return (first, startWriter, waiting.bytes.count > Self.maximumWaitingBytes)
        }
        if startWriter { startWriterThread() }
        if overflowing { return writeWaiting(then: []) }
        if first { arrived.signal() }
    }

    /// Writes every line that waits.
    public func flush() { writeWaiting(then: []) }

    /// As a service, the last of the worker's: at the graceful shutdown it writes what waits.
    public func run() async {
        try? await gracefulShutdown()
        flush()
    }

    private func writeWaiting(then line: [UInt8]) {
        writing.withLock { _ in
            var bytes = waiting.withLock { waiting in
                defer { waiting.bytes = [] }
                return waiting.bytes
            }
            if bytes.isEmpty { bytes = line } else { bytes.append(contentsOf: line) }
            writeAll(bytes)
        }
    }

    private func writeAll(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        writes.add(1, ordering: .relaxed)
        bytes.withUnsafeBytes { buffer in
            var written = 0
            while written < buffer.count {
                let result = Foundation.write(descriptor, buffer.baseAddress! + written, buffer.count - written)
                if result < 0, errno == EINTR { continue }
                if result <= 0 { break }
                written += result
            }
        }
    }

    private func startWriterThread() {
        if self === Self.standardError { atexit { LogLineOutput.standardError.flush() } }
        let (arrived, delaySeconds) = (arrived, Double(batchDelay.milliseconds) / 1000)
        NamedThread.start("log-writer") { [weak self] in
            while true {
                arrived.wait()
                Thread.sleep(forTimeInterval: delaySeconds)
                guard let self else { return }
                flush()
            }
        }
    }

    deinit {
        flush()
        // Ends the writer thread, which finds no output left.
        arrived.signal()
    }
}
