/// The kinds of job a benchmark run produces, and in what proportion.
public struct JobMix: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, CaseIterable {
        /// An incoming call to an iPhone: APNs voip push (topic `.voip`, priority 10).
        case apnsVoip = "apns-voip"
        /// A chat message to an iPhone: APNs alert.
        case apnsAlert = "apns-alert"
        /// A chat message to an Android phone through FCM HTTP v1.
        case fcm
        /// A chat message to a browser: RFC 8291 encryption + VAPID.
        case webpush
        /// A message through the customer's push proxy.
        case proxy
    }

    public let weights: [(kind: Kind, weight: Int)]

    /// Everything the worker delivers, weighted towards mobile chat traffic.
    public static let `default` = try! JobMix(parsing: "apns-voip=20,apns-alert=40,fcm=25,webpush=5,proxy=10")

    /// `kind=weight,…`, e.g. `apns-voip=1,apns-alert=3`.
    public init(parsing text: String) throws(BenchError) {
        var weights: [(Kind, Int)] = []
        for part in text.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map { String($0).trimmingWhitespace() }
            guard let kind = Kind(rawValue: pair[0]) else {
                throw BenchError("unknown job kind '\(pair[0])' in --mix (known: \(Kind.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            let weight = pair.count == 2 ? Int(pair[1]) : 1
            guard let weight, weight >= 0 else { throw BenchError("weight of '\(pair[0])' in --mix must be a whole number ≥ 0") }
            if weight > 0 { weights.append((kind, weight)) }
        }
        guard !weights.isEmpty else { throw BenchError("--mix names no job kind with a weight above 0") }
        self.weights = weights
    }

    public var kinds: Set<Kind> { Set(weights.map(\.kind)) }

    /// The kind of the `index`-th job: a fixed interleaving, so every run sends the same sequence.
    public func kind(at index: Int) -> Kind {
        let total = weights.reduce(0) { $0 + $1.weight }
        var slot = index % total
        for (kind, weight) in weights {
            if slot < weight { return kind }
            slot -= weight
        }
        return weights[0].kind
    }

    public var description: String { weights.map { "\($0.kind.rawValue)=\($0.weight)" }.joined(separator: ",") }

    public static func == (lhs: JobMix, rhs: JobMix) -> Bool { lhs.description == rhs.description }
}

public struct BenchError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension String {
    func trimmingWhitespace() -> String {
        var text = Substring(self)
        while text.first?.isWhitespace == true { text.removeFirst() }
        while text.last?.isWhitespace == true { text.removeLast() }
        return String(text)
    }
}
