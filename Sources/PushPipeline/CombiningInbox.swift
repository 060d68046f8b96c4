import Synchronization

/// Work handed in from many threads and carried out in batches by one of them: a thread that hands an item in while
/// nobody is carrying the inbox out becomes the one who does, and goes on until nothing is left; the others hand
/// their item in and return at once. Where each item needs a hold of a contended lock, that is one hold per batch
/// rather than per item, and no thread queues for the lock behind another.
final class CombiningInbox<Item: Sendable>: Sendable {
    private struct State: Sendable {
        var items: [Item] = []
        var carryingOut = false
    }

    private let state = Mutex(State())

    /// Hands `item` in; when no other thread is carrying the inbox out, carries it out here (`carryOut` gets each batch,
    /// in the order the items were handed in) until it is empty.
    func handIn(_ item: Item, carryOut: ([Item]) -> Void) {
        let carries = state.withLock { state in
            state.items.append(item)
            guard !state.carryingOut else { return false }
            state.carryingOut = true
            return true
        }
        guard carries else { return }
        // Two buffers take turns, so a steady flow of batches allocates nothing.
        var batch: [Item] = []
        while true {
            state.withLock { state in
                swap(&batch, &state.items)
                if batch.isEmpty { state.carryingOut = false }
            }
            guard !batch.isEmpty else { return }
            carryOut(batch)
            batch.removeAll(keepingCapacity: true)
        }
    }
}
