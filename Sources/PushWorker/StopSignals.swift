import Foundation
import Synchronization

/// SIGTERM/SIGINT: the first asks for a graceful stop, a second exits at once.
public final class StopSignals {
    private let sources: [any DispatchSourceSignal]

    public init(onFirst stop: @escaping @Sendable () -> Void) {
        let received = ManagedCounter()
        sources = [SIGTERM, SIGINT].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                if received.increment() == 1 { stop() } else { exit(130) }
            }
            source.resume()
            return source
        }
    }
}

final class ManagedCounter: Sendable {
    private let count = Atomic<Int>(0)
    func increment() -> Int { count.add(1, ordering: .relaxed).newValue }
}
