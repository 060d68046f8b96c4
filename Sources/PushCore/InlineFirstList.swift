/// A list that keeps its first element in place and the rest in an array: a list of one, what an event of the
/// pipeline mostly leaves (one job to launch, one waiter's turn), allocates nothing. Inlinable, so the modules that
/// iterate it get it specialised (as `FIFOQueue`).
public struct InlineFirstList<Element>: RandomAccessCollection {
    @usableFromInline var head: Element?
    @usableFromInline var tail: [Element] = []

    @inlinable public init() {}

    @inlinable public var startIndex: Int { 0 }
    @inlinable public var endIndex: Int { head == nil ? 0 : 1 + tail.count }

    @inlinable public subscript(position: Int) -> Element {
        precondition(position >= 0 && position < endIndex, "index out of range")
        return position == 0 ? head! : tail[position - 1]
    }

    @inlinable public mutating func append(_ element: Element) {
        if head == nil { head = element } else { tail.append(element) }
    }
}

extension InlineFirstList: Sendable where Element: Sendable {}
