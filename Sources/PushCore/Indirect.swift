/// A value stored out of line, shared by the copies of the struct that holds it; a change
/// stores a new box. For fields most values leave empty, so they cost one pointer when unset.
final class Indirect<Value: Sendable & Equatable>: Sendable, Equatable {
    let value: Value

    init(_ value: Value) { self.value = value }

    static func == (lhs: Indirect, rhs: Indirect) -> Bool { lhs === rhs || lhs.value == rhs.value }

    /// A new box holding this value with `change` made to it (a field's setter of the struct that holds the box).
    func changed(_ change: (inout Value) -> Void) -> Indirect {
        var value = value
        change(&value)
        return Indirect(value)
    }
}
