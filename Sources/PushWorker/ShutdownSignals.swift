import ServiceLifecycle
import UnixSignals

#if canImport(Glibc)
    import Glibc
#endif

/// SIGTERM and SIGINT. The first shuts down gracefully; a second ends the process at once with status 130, whatever
/// is still running.
public enum ShutdownSignals {
    public static let signals: [UnixSignal] = [.sigterm, .sigint]

    /// Watches the signals for `group`, which takes the first as its graceful shutdown, until the returned task is
    /// cancelled. Call before `group.run()`.
    public static func watch(_ group: ServiceGroup) async -> Task<Void, Never> {
        // The group watches the signals too; this covers one that arrives before its watch is in place.
        await watch { await group.triggerGracefulShutdown() }
    }

    /// Returns at the first signal (the development tools' servers); a second still ends the process at once.
    public static func first() async {
        let (firstSignal, continuation) = AsyncStream<Void>.makeStream()
        _ = await watch { continuation.finish() }
        for await _ in firstSignal {}
    }

    /// From the return on, the signals no longer end the process by their default action.
    private static func watch(onFirst: @escaping @Sendable () async -> Void) async -> Task<Void, Never> {
        for number in signals.map(\.rawValue) { signal(number, SIG_IGN) }
        let received = await UnixSignalsSequence(trapping: signals)
        return Task {
            var count = 0
            for await _ in received {
                count += 1
                if count == 1 { await onFirst() } else { exit(130) }
            }
        }
    }
}
