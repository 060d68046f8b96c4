/// Waiting work of both lanes: urgent first, each lane oldest first. Appending and popping
/// cost O(1) (a head index, compacted as the queue drains), so a long queue stays cheap.
/// Inlinable (as is `FIFOQueue`), so that other modules specialize it for their elements instead of
/// going through the generic one, which looked up type metadata and copied through witness tables on
/// every call.
public struct LaneQueue<Element> {
    @usableFromInline var urgent = FIFOQueue<Element>()
    @usableFromInline var normal = FIFOQueue<Element>()

    @inlinable public init() {}

    @inlinable public var isEmpty: Bool { urgent.isEmpty && normal.isEmpty }
    @inlinable public var hasUrgent: Bool { !urgent.isEmpty }

    @inlinable public mutating func append(_ element: Element, lane: Lane) {
        if lane == .urgent { urgent.append(element) } else { normal.append(element) }
    }

    /// Puts `element` first in its lane (work handed back unprocessed keeps its place).
    @inlinable public mutating func prepend(_ element: Element, lane: Lane) {
        if lane == .urgent { urgent.prepend(element) } else { normal.prepend(element) }
    }

    /// The next element: an urgent one whenever one waits; a normal one only if `normalAllowed`.
    @inlinable public mutating func popFirst(normalAllowed: Bool = true) -> Element? {
        if let element = urgent.popFirst() { return element }
        return normalAllowed ? normal.popFirst() : nil
    }

    /// Takes out the first element that matches (a cancelled waiter), wherever it waits.
    @inlinable public mutating func remove(where matches: (Element) -> Bool) -> Element? {
        urgent.remove(where: matches) ?? normal.remove(where: matches)
    }

    @inlinable public mutating func removeAll() -> [Element] {
        urgent.removeAll() + normal.removeAll()
    }

    /// Takes out every element that matches, in one pass; returns them.
    @inlinable public mutating func removeAll(where matches: (Element) -> Bool) -> [Element] {
        urgent.removeAll(where: matches) + normal.removeAll(where: matches)
    }
}

extension LaneQueue: Sendable where Element: Sendable {}

/// Oldest first; popping moves a head index and compacts the storage as it drains. A popped
/// element's slot is emptied at once: the queue holds no reference to what it gave out (a job
/// waiting for its app's slot holds its message and decoded job until then).
public struct FIFOQueue<Element> {
    @usableFromInline var items: [Element?] = []
    @usableFromInline var head = 0

    @inlinable public init() {}

    @inlinable public var isEmpty: Bool { head == items.count }
    @inlinable public var count: Int { items.count - head }
    /// The oldest element, left in place.
    @inlinable public var first: Element? { head < items.count ? items[head] : nil }

    @inlinable public mutating func append(_ element: Element) { items.append(element) }

    /// Calls `body` with each element, oldest first, leaving them in place.
    @inlinable public func forEach(_ body: (Element) throws -> Void) rethrows {
        for case let element? in items[head...] { try body(element) }
    }

    /// Puts `element` before every other one.
    @inlinable public mutating func prepend(_ element: Element) {
        if head > 0 {
            head -= 1
            items[head] = element
        } else {
            items.insert(element, at: 0)
        }
    }

    @inlinable public mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let first = items[head].take()
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024, head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return first
    }

    @inlinable public mutating func remove(where matches: (Element) -> Bool) -> Element? {
        guard let index = items[head...].firstIndex(where: { matches($0!) }) else { return nil }
        return items.remove(at: index)
    }

    @inlinable public mutating func removeAll() -> [Element] {
        defer {
            items.removeAll()
            head = 0
        }
        return items[head...].map { $0! }
    }

    /// Takes out every element that matches, in one pass, keeping the others in order; returns them.
    @inlinable public mutating func removeAll(where matches: (Element) -> Bool) -> [Element] {
        var removed: [Element] = []
        var kept: [Element?] = []
        for case let element? in items[head...] {
            if matches(element) { removed.append(element) } else { kept.append(element) }
        }
        if !removed.isEmpty {
            items = kept
            head = 0
        }
        return removed
    }
}

extension FIFOQueue: Sendable where Element: Sendable {}
