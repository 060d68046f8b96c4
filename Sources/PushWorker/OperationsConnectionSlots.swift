import NIOCore
import Synchronization

/// The operations endpoint's open connections against its limit, oldest first. At the limit a new connection is
/// always admitted and takes the place of another: the oldest one between requests (answered, kept alive, no byte of a
/// next request yet) if there is one, otherwise the oldest one whatever it does — still sending its head, or being
/// answered to a client that reads slowly or not at all. So clients that hold connections cannot keep a probe out: a
/// probe, the newest connection, is displaced only after `limit` more connections arrive before its answer is written.
final class ConnectionSlots: Sendable {
    enum Admission {
        case admitted
        /// Admitted; the caller closes `channel`, whose place the new one took.
        case admittedInPlaceOf(any Channel, Displaced)
    }

    /// What the displaced connection was doing, which decides how it is closed.
    enum Displaced: Equatable {
        /// Between requests: closing it costs its client nothing.
        case betweenRequests
        /// Sending a head or being answered: it is reset, so the kernel drops what it still holds for it.
        case busy
    }

    private struct Slot {
        let channel: any Channel
        var betweenRequests = false
    }

    private let limit: Int
    /// In the order the connections were accepted.
    private let slots = Mutex<[Slot]>([])

    init(limit: Int) { self.limit = max(1, limit) }

    func admit(_ channel: any Channel) -> Admission {
        slots.withLock { slots in
            defer { slots.append(Slot(channel: channel)) }
            guard slots.count >= limit else { return .admitted }
            if let idle = slots.firstIndex(where: \.betweenRequests) {
                return .admittedInPlaceOf(slots.remove(at: idle).channel, .betweenRequests)
            }
            return .admittedInPlaceOf(slots.removeFirst().channel, .busy)
        }
    }

    /// Marks whether `channel` is between requests: from a written answer (with none other in progress) until the first
    /// byte of its next request.
    func setBetweenRequests(_ betweenRequests: Bool, _ channel: any Channel) {
        slots.withLock { slots in
            if let index = slots.firstIndex(where: { $0.channel === channel }) { slots[index].betweenRequests = betweenRequests }
        }
    }

    /// Frees the place of a closed connection (none if it already gave its place to a newer one).
    func release(_ channel: any Channel) {
        slots.withLock { slots in slots.removeAll { $0.channel === channel } }
    }
}
