import PushCore

/// A value for each lane the pipeline runs (the urgent one may be absent), read and changed in
/// place: a dictionary keyed by lane would hash the lane's name and copy the value on every read.
struct PerLane<Value> {
    private var normal: Value?
    private var urgent: Value?

    init(_ lanes: [Lane], _ make: (Lane) -> Value) {
        for lane in lanes { self[lane] = make(lane) }
    }

    /// Whether the lane has a value, without copying it.
    func contains(_ lane: Lane) -> Bool {
        switch lane {
        case .normal: if case .none = normal { false } else { true }
        case .urgent: if case .none = urgent { false } else { true }
        }
    }

    /// What `body` reads from the lane's value (nil without one). Unlike `self[lane]?.…`, which the
    /// optimiser may copy the whole value for (a retain and release of each of its collections), the
    /// value is lent to `body`.
    func read<Result>(_ lane: Lane, _ body: (borrowing Value) -> Result) -> Result? {
        switch lane {
        case .normal: if let normal { body(normal) } else { nil }
        case .urgent: if let urgent { body(urgent) } else { nil }
        }
    }

    /// Runs `body` on the lane's value (nil without one). The value is moved out and back, so it
    /// stays uniquely referenced and changes in place, with no accessor coroutine in between: a
    /// chain of `_modify` accessors whose frames do not fit the caller's buffer allocates them on
    /// every access.
    mutating func update<Result>(_ lane: Lane, _ body: (inout Value) -> Result) -> Result? {
        switch lane {
        case .normal:
            guard var value = normal.take() else { return nil }
            defer { normal = value }
            return body(&value)
        case .urgent:
            guard var value = urgent.take() else { return nil }
            defer { urgent = value }
            return body(&value)
        }
    }

    subscript(lane: Lane) -> Value? {
        _read {
            switch lane {
            case .normal: yield normal
            case .urgent: yield urgent
            }
        }
        _modify {
            switch lane {
            case .normal: yield &normal
            case .urgent: yield &urgent
            }
        }
    }
}

extension PerLane: Sendable where Value: Sendable {}
