/// Fault-injection commands for a `MockKafkaCluster`, one per line (the control channel
/// of `push-worker-dev kafka-mock --control`):
///
/// | command                          | effect                                                        |
/// |----------------------------------|---------------------------------------------------------------|
/// | `broker-down <id>\|all`          | disconnect the broker's clients, refuse new connections       |
/// | `broker-up <id>\|all`            | accept connections again                                      |
/// | `produce-errors <n>`             | the next n Produce requests fail (retriable NOT_ENOUGH_REPLICAS) |
/// | `request-errors <api> <n> <err>` | the next n requests of API key `api` fail with error code `err` |
/// | `rtt <id>\|all <ms>`             | delay the broker's answers by ms                              |
public enum MockKafkaControl: Equatable, Sendable {
    case broker(Int32, up: Bool)
    case produceErrors(Int)
    case requestErrors(apiKey: Int16, count: Int, error: Int32)
    case roundTripTime(broker: Int32, milliseconds: Int)

    public struct Problem: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    public static func parse(_ line: String) throws(Problem) -> MockKafkaControl {
        let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        func broker(_ word: String) throws(Problem) -> Int32 {
            if word == "all" { return -1 }
            guard let id = Int32(word), id >= 0 else { throw Problem(description: "broker must be an id or all, not \(word)") }
            return id
        }
        func number(_ word: String) throws(Problem) -> Int {
            guard let value = Int(word), value >= 0 else { throw Problem(description: "\(word) is not a count ≥ 0") }
            return value
        }
        switch (words.first, words.count) {
        case ("broker-down", 2): return .broker(try broker(words[1]), up: false)
        case ("broker-up", 2): return .broker(try broker(words[1]), up: true)
        case ("produce-errors", 2): return .produceErrors(try number(words[1]))
        case ("request-errors", 4):
            guard let api = Int16(words[1]), let error = Int32(words[3]) else {
                throw Problem(description: "request-errors <apiKey> <count> <errorCode>")
            }
            return .requestErrors(apiKey: api, count: try number(words[2]), error: error)
        case ("rtt", 3): return .roundTripTime(broker: try broker(words[1]), milliseconds: try number(words[2]))
        default:
            throw Problem(
                description: "unknown command \"\(line)\" (broker-down|broker-up <id|all>, produce-errors <n>, "
                    + "request-errors <api> <n> <err>, rtt <id|all> <ms>)")
        }
    }

    public func apply(to cluster: MockKafkaCluster) {
        switch self {
        case .broker(let id, let up): cluster.setBroker(id, up: up)
        case .produceErrors(let count): cluster.failNextProduceRequests(count)
        case .requestErrors(let apiKey, let count, let error): cluster.failNextRequests(apiKey: apiKey, count: count, error: error)
        case .roundTripTime(let broker, let milliseconds): cluster.setRoundTripTime(broker: broker, milliseconds: milliseconds)
        }
    }
}
