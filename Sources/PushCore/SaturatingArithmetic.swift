/// Arithmetic on numbers that come from outside (HTTP headers and bodies, Kafka
/// timestamps, job fields, Redis records): Swift traps on overflow, so one hostile value
/// would crash every replica that reads it. These clamp to the type's range instead.
extension Int64 {
    public func adding(saturating other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        guard overflow else { return sum }
        return other > 0 ? .max : .min
    }

    public func subtracting(saturating other: Int64) -> Int64 {
        let (difference, overflow) = subtractingReportingOverflow(other)
        guard overflow else { return difference }
        return other < 0 ? .max : .min
    }

    public func multiplied(saturating other: Int64) -> Int64 {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        guard overflow else { return product }
        return (self < 0) == (other < 0) ? .max : .min
    }

    /// A floating-point value rounded towards zero and clamped to Int64's range (NaN is 0).
    public init(clamping value: Double) {
        if value.isNaN {
            self = 0
        } else if value >= 9_223_372_036_854_775_807 {
            self = .max
        } else if value <= -9_223_372_036_854_775_808 {
            self = .min
        } else {
            self = Int64(value)
        }
    }
}

extension Duration {
    /// Whole milliseconds, saturated to Int64's range.
    public var milliseconds: Int64 {
        let components = components
        return components.seconds.multiplied(saturating: 1000)
            .adding(saturating: components.attoseconds / 1_000_000_000_000_000)
    }

    /// At most `bound`.
    public func clamped(to bound: Duration) -> Duration { min(self, bound) }
}
